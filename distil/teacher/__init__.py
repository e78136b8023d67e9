from distil.teacher.cache import ensure_targets, load_targets, teacher_hidden, teacher_logits
from distil.teacher.finetune import ensure_teacher
from distil.teacher.load import load_finetuned

__all__ = ["ensure_targets", "ensure_teacher", "load_finetuned", "load_targets", "teacher_hidden",
           "teacher_logits"]
