from distil.teacher.cache import TargetView, ensure_targets, open_targets
from distil.teacher.finetune import ensure_teacher
from distil.teacher.load import load_finetuned, load_tokenizer

__all__ = ["TargetView", "ensure_targets", "ensure_teacher", "load_finetuned", "load_tokenizer", "open_targets"]
