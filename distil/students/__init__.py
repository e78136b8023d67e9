"""Student families: `kind` in the student config picks the builder."""

from __future__ import annotations

import torch

from distil.config.schema import StudentConfig
from distil.errors import DistilError, check_choice
from distil.students.bilstm import BiLSTMClassifier
from distil.students.bilstm_tagger import BiLSTMTagger
from distil.students.heads import WithRepresentation, check_output_layers, check_projection_place
from distil.students.rnn import RNNClassifier
from distil.students.siamese import SiameseBiLSTM
from distil.students.sra import SRAStudent
from distil.students.static import StaticStudent
from distil.students.tang import TangStudent
from distil.students.transformer import TransformerStudent
from distil.students.vocab import UnkDropout
from distil.tasks import Task

FAMILIES = {
    "bilstm": BiLSTMClassifier,
    "bilstm_tagger": BiLSTMTagger,
    "rnn": RNNClassifier,
    "siamese": SiameseBiLSTM,
    "transformer": TransformerStudent,
    "sra": SRAStudent,
    "tang": TangStudent,
    "static": StaticStudent,
}
# families whose classifier is a ReLU layer then the output: mlp_hidden_size 0 would leave it no width
NEEDS_MLP = ("siamese", "sra", "tang")


def reads_pairs_apart(cfg: StudentConfig) -> bool:
    return getattr(FAMILIES.get(cfg.kind), "READS_PAIRS_APART", False)  # a peer (not a family) reads texts


TOKENS = ("words", "wordpieces")
VOCABULARIES = ("trimmed", "full")  # student.vocabulary: see StudentConfig


def reads_words(cfg: StudentConfig) -> bool:
    """Whitespace words rather than the teacher's wordpieces: `student.tokens`, else the family's own."""
    if cfg.tokens is not None:
        return cfg.tokens == "words"
    return getattr(FAMILIES.get(cfg.kind), "READS_WORDS", False)


INPUT_NAMES = {"text": "single texts", "pair": "text pairs", "tokens": "word sequences"}


def check_student(cfg: StudentConfig, task: Task) -> None:
    """Fail before any training when the student cannot read the dataset's task inputs (a peer is
    checked by distil.peers.check_peer)."""
    if cfg.kind not in FAMILIES:
        raise DistilError(
            f"student '{cfg.name}': unknown kind '{cfg.kind}'; use one of: {', '.join(FAMILIES)}"
        )
    if not 0 <= cfg.unk_dropout < 1:
        raise DistilError(f"student.unk_dropout {cfg.unk_dropout} must be at least 0 and below 1 (the share of "
                          f"training tokens read as [UNK]); set e.g. 0.02, or 0 to turn word dropout off")
    if cfg.mlp_hidden_size == 0 and cfg.kind in NEEDS_MLP:
        raise DistilError(f"student '{cfg.name}' classifies through a ReLU layer of student.mlp_hidden_size units, "
                          f"and 0 leaves it none; set student.mlp_hidden_size to 1 or more (Tang: 200 or 400)")
    reads = FAMILIES[cfg.kind].INPUTS
    if task.inputs not in reads:
        fitting = sorted(kind for kind, family in FAMILIES.items() if task.inputs in family.INPUTS)
        raise DistilError(
            f"student '{cfg.name}' cannot do {task.name} on {INPUT_NAMES[task.inputs]} (it reads "
            f"{' or '.join(INPUT_NAMES[r] for r in reads)}); choose a student of kind {', '.join(fitting)}"
        )
    check_tokens(cfg, task)


def check_tokens(cfg: StudentConfig, task: Task) -> None:
    if cfg.tokens is not None:  # null: the student's default for its kind
        check_choice("student.tokens", cfg.tokens, TOKENS)
    check_choice("student.vocabulary", cfg.vocabulary, VOCABULARIES)
    if cfg.vocabulary == "full" and reads_words(cfg):
        raise DistilError("student.vocabulary=full keeps every teacher wordpiece but this student reads words; "
                          "set student.vocabulary=trimmed or student.tokens=wordpieces")
    # Words are read from one text (pipeline.student_tokens): pairs and tagged tokens need wordpieces.
    if reads_words(cfg) and task.inputs != "text":
        raise DistilError(f"student.tokens=words reads one whitespace-split text but {task.name} gives "
                          f"{INPUT_NAMES[task.inputs]}; set student.tokens=wordpieces")


def embedding_size(cfg: StudentConfig) -> int:
    """Width of the student's token embeddings (a transformer embeds at its hidden size)."""
    return cfg.hidden_size if cfg.kind == "transformer" else cfg.embedding_dim


def word_embeddings(model: torch.nn.Module) -> torch.nn.Embedding:
    """The student's token embedding layer: the first nn.Embedding it holds."""
    return next(m for m in model.modules() if isinstance(m, torch.nn.Embedding))


def keeps_own_random_init(cfg: StudentConfig) -> bool:
    """Transformer students are BERT models (Turc et al.): embedding_init=random keeps BERT's own
    N(0, 0.02) instead of the recurrent students' U(-0.1, 0.1)."""
    return cfg.kind == "transformer"


def add_unk_dropout(model: torch.nn.Module, rate: float, keep_ids: list[int]) -> None:
    """Train the [UNK] row: while training, tokens but [PAD] and keep_ids are read as [UNK] with
    probability `rate` (see vocab.UnkDropout)."""
    if rate > 0:
        word_embeddings(model).register_forward_pre_hook(UnkDropout(rate, keep_ids))


def build_student(
    cfg: StudentConfig, vocab_size: int, num_labels: int, task: Task,
    teacher_hidden_size: int | None = None, representation_head: bool = False, projection: str = "side",
    sep_id: int | None = None, shared_output: bool = True,
) -> torch.nn.Module:
    """The student; with `representation_head`, wrapped with gelu(W z + b) to the teacher's size,
    beside the classifier or under it (`projection`: side | path, see heads.WithRepresentation), and
    with `shared_output` False a logit layer W^r of its own beside the classifier W^s (XtremeDistil
    eq. 1 and 3; schedule.shared_output_layer)."""
    check_student(cfg, task)
    family = FAMILIES[cfg.kind]
    if representation_head:
        check_projection_place(projection, family, task.inputs)
        check_output_layers(shared_output, family)
    needs_teacher_size = getattr(family, "NEEDS_TEACHER_SIZE", False) or representation_head
    if needs_teacher_size and teacher_hidden_size is None:
        raise ValueError(f"student kind '{cfg.kind}' needs teacher_hidden_size")
    extra = {"teacher_hidden_size": teacher_hidden_size} if getattr(family, "NEEDS_TEACHER_SIZE", False) else {}
    if getattr(family, "NEEDS_SEP_ID", False):
        extra["sep_id"] = sep_id
    student = family.from_config(cfg, vocab_size, num_labels, task, **extra)
    if representation_head and not getattr(family, "HAS_REPRESENTATION", False):
        return WithRepresentation(student, teacher_hidden_size, projection, shared_output)
    return student


def count_params(model: torch.nn.Module) -> int:
    """Parameters as deployed: every one but the training-only representation head."""
    return sum(p.numel() for p in model.parameters()) - training_only_params(model)


def training_only_params(model: torch.nn.Module) -> int:
    """A side projection gelu(W z + b) to the teacher's size serves only the representation losses;
    one under the classifier (schedule.projection: path) is part of the deployed model. A logit layer
    W^r of its own (schedule.shared_output_layer=false) serves only the logit loss: predictions read W^s."""
    if not isinstance(model, WithRepresentation):
        return 0
    side = 0 if model.in_path else sum(p.numel() for p in model.projection.parameters())
    regression = 0 if model.shared_output else sum(p.numel() for p in model.regression.parameters())
    return side + regression


def param_counts(model: torch.nn.Module, teacher_vocab_size: int | None) -> dict[str, int | None]:
    """How the papers count a model (students and teachers alike):
    deployed            every parameter but the training-only layers (a side projection head, a W^r of its own);
    full_teacher_vocab  the token embedding as if it held all `teacher_vocab_size` teacher wordpieces
                        instead of the trimmed vocabulary (Mukherjee & Awadallah Table 7, XtremeDistil
                        Table 16); None for a student reading words (the RNN baseline), which has its own;
    without_embeddings  without the token embedding matrix (Wu et al. Table 2 leaves out "the embedding
                        layers", which depend on the vocabulary; position tables, small, are kept);
    training_only       the training-only layers left out of all three."""
    layer = word_embeddings(model)
    deployed = count_params(model)
    without_embeddings = deployed - layer.weight.numel()
    full = None if teacher_vocab_size is None else without_embeddings + teacher_vocab_size * layer.embedding_dim
    return {"deployed": deployed, "full_teacher_vocab": full, "without_embeddings": without_embeddings,
            "training_only": training_only_params(model)}
