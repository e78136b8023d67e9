"""Wu et al. (2019) task-agnostic distillation: an SRA student approximates the pre-trained teacher's
sentence vector on general text, once, as a content-keyed artifact every task fine-tunes.

§3.1: the teacher is BERT as pre-trained (not fine-tuned on any task); its sentence vector T_x is
the top layer at [CLS] (`agnostic.pooling=cls`) or, as an option for sentence-transformer teachers
such as the offline MiniLM, the mean of the top layer over the sentence (`mean`). The student (BiLSTM
-> max-pool -> linear without bias -> tanh, students/sra.py) minimises 1/2 (1 - cos(S_x, T_x))
(eq. 1, losses.representation_cosine) with Adam at 1e-3 and batch 1024 (§4.3). Its vocabulary is
the teacher tokenizer's whole wordpiece list; a task's student keeps the rows of its own.

The budget (`agnostic.steps`): null trains `epochs` passes over the corpus; a number trains exactly
that many optimiser updates, cycling through the corpus as often as needed, so corpus sizes compare
at one update count (Wu §5.4, Table 4). The held-out lines of eq. 1's validation loss
(`agnostic.heldout`): "after", the lines after the ones trained on (they move with max_sentences);
"end", the corpus's last `heldout_sentences` lines, the same for every max_sentences.

The artifact (outputs/cache/agnostic/<teacher>-<hash>/) is keyed by the teacher's weights, the
pooling, the corpus's lines, the student's sizes and every setting (the settings added later stay
out of the key at their defaults, so earlier artifacts are still found). With heldout=after the
teacher's vectors of the lines read are computed into the build directory; with heldout=end they
are computed once for the whole corpus into an artifact of their own
(outputs/cache/agnostic-vectors/), which every corpus size and seed then slices; runs that want
it at once (seeds side by side) split its pieces. Training saves a
checkpoint after every pass and every few minutes within one, so a killed build resumes where it
was, with the same result.

It runs on the active runtime (distil.common.runtime): the teacher and the student on its device,
each batch copied there once, the student's forward passes under its precision, which is part of the
student artifact's key when it is not fp32. The teacher's vectors are targets, kept as the run's
teacher cache is (Runtime.cache_precision): computed in fp32 under bf16 (bf16 keeps 8 mantissa
bits, fp32 24) and in fp16 under fp16, whose shared vectors' key then says so.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf
from safetensors.torch import load_file, save_file

from distil.common import distributed, tracking
from distil.common.progress import progress_bar
from distil.common.runtime import current, fetch, precision_key
from distil.config.schema import as_plain_dict
from distil.data.batching import length_bucketed_batches, pad, shuffled_batches
from distil.data.cut import cut_all
from distil.errors import DistilError, check_choice
from distil.pretrain.corpus import lines_digest, read_lines
from distil.store.artifacts import Artifact, ArtifactStore
from distil.store.claims import ShardClaims
from distil.students.sra import SRAStudent
from distil.students.vocab import TrimmedVocab
from distil.training.checkpoint import Checkpoint, cuda_rng_states, rank_rng_states, restore_rng_states
from distil.training.loop import optimiser_step
from distil.training.losses import representation_cosine

log = logging.getLogger(__name__)

POOLINGS = ("cls", "mean")
HELDOUT = ("after", "end")
VECTORS = "teacher-vectors.safetensors"
VECTORS_KIND = "agnostic-vectors"  # the whole corpus's teacher vectors, shared by heldout=end builds
VECTORS_LAYOUT = 1
VECTORS_CHUNK = 50_000  # corpus lines per resumable piece of a shared vectors build
HELD_OUT = 2000  # agnostic.heldout_sentences' default: the held-out distillation loss (Wu Table 4)
CHECKPOINT = "agnostic-checkpoint.pt"
CHECKPOINT_SECONDS = 300.0  # within a pass (and after each): a killed build loses at most this much training
WEIGHTS = "student.safetensors"
LAYOUT_VERSION = 1
# settings added after artifacts were first built: at these values (their schema defaults, today's
# behaviour) they stay out of the key, so those artifacts are still found
ADDED_SETTINGS = {"steps": None, "heldout": "after", "heldout_sentences": HELD_OUT}


def check_agnostic(cfg) -> None:
    check_choice("agnostic.pooling", cfg.pooling, POOLINGS)
    check_choice("agnostic.heldout", cfg.heldout, HELDOUT)


def sentence_vectors(encoder, ids: list[list[int]], pad_id: int, pooling: str, batch_size: int = 128,
                     progress=None) -> torch.Tensor:
    """[n, H] float32: the encoder's top layer at [CLS], or its mean over the real wordpieces."""
    return pooled_vectors(encoder, ids, pad_id, (pooling,), batch_size, progress)[pooling]


@torch.inference_mode()
def pooled_vectors(encoder, ids: list[list[int]], pad_id: int, poolings: tuple[str, ...], batch_size: int = 128,
                   progress=None) -> dict[str, torch.Tensor]:
    """{pooling: [n, H] float32, on the CPU} from one pass of the encoder (on the active runtime's
    device, in its cache_precision: targets are kept, so never bf16): its top layer at [CLS] ("cls"),
    its mean over the real wordpieces ("mean"). Each batch is copied to the device once and its
    vectors back once."""
    runtime = current()
    encoder.eval()
    order = np.argsort([len(x) for x in ids])  # length-sorted batches: little padding
    out = {pooling: torch.empty((len(ids), encoder.config.hidden_size)) for pooling in poolings}
    for start in range(0, len(ids), batch_size):
        rows = order[start:start + batch_size]
        batch, mask = runtime.put(pad([ids[r] for r in rows], pad_id))
        with runtime.autocast(runtime.cache_precision):
            states = encoder(input_ids=batch, attention_mask=mask).last_hidden_state
        states = states.float()  # pooled in fp32 whatever the forward's precision (a no-op in fp32)
        pooled = [states[:, 0] if pooling == "cls"
                  else (states * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
                  for pooling in out]
        index = torch.from_numpy(rows)
        for vectors, pooling in zip(fetch(torch.stack(pooled)), out, strict=True):  # one copy back a batch
            out[pooling][index] = vectors
        if progress is not None:
            progress(len(rows))
    return out


def agnostic_spec(cfg, teacher_identity: dict, student_cfg, digest: str, sentence_size: int,
                  precision: str | None = None) -> dict:
    """The student artifact's key. `precision` (None: the active runtime's) enters it only when it is
    not fp32, so every fp32 key is the one from before precisions; the device never does."""
    unkeyed = ("name", "description", "corpus", "max_sentences")  # the corpus counts by its digest
    settings = {k: v for k, v in as_plain_dict(cfg).items()
                if k not in unkeyed and not (k in ADDED_SETTINGS and v == ADDED_SETTINGS[k])}
    if cfg.steps is not None:
        settings.pop("epochs")  # unused: the update count is the budget
    student = {k: student_cfg[k] for k in ("embedding_dim", "hidden_size", "num_layers", "dropout", "embedding_init")}
    return {"teacher": teacher_identity, "corpus": digest, "student": student, "sentence_size": sentence_size,
            "settings": settings, "layout": LAYOUT_VERSION, **precision_key(precision or current().precision)}


def vectors_spec(cfg, teacher_identity: dict, every: list[str]) -> dict:
    """The shared teacher vectors' key, by the active runtime's cache_precision: fp32's (the key from
    before precisions) under fp32 and bf16, which compute them alike, and its own under fp16."""
    return {"teacher": teacher_identity, "pooling": cfg.pooling, "max_length": cfg.max_length,
            "corpus": lines_digest(every), "layout": VECTORS_LAYOUT, **precision_key(current().cache_precision)}


def corpus_split(cfg, data_dir: str) -> tuple[list[str], list[str], list[str] | None]:
    """(training lines, held-out lines, the whole corpus or None), as agnostic.heldout says.
    "after": the first max_sentences lines, then the held-out ones read after them (the last lines
    read: at most heldout_sentences, a tenth of a small corpus). "end": the corpus's last
    heldout_sentences lines (at most a tenth of a small corpus), the same for every max_sentences, and
    the first max_sentences of the lines before them (all of them with null); the whole corpus is
    returned too, since its teacher vectors are computed once for every size."""
    if cfg.heldout == "after":
        limit = None if cfg.max_sentences is None else cfg.max_sentences + cfg.heldout_sentences
        lines = read_lines("agnostic.corpus", cfg.corpus, data_dir, limit)
        held = min(cfg.heldout_sentences, len(lines) // 10)
        return lines[:len(lines) - held], lines[len(lines) - held:], None
    every = read_lines("agnostic.corpus", cfg.corpus, data_dir, None)
    pool = len(every) - min(cfg.heldout_sentences, len(every) // 10)
    if cfg.max_sentences is not None and cfg.max_sentences > pool:
        log.info("agnostic.max_sentences=%d: the corpus has %d lines before its held-out ones; training on those",
                 cfg.max_sentences, pool)
    count = pool if cfg.max_sentences is None else min(cfg.max_sentences, pool)
    return every[:count], every[pool:], every


def ensure_agnostic(cfg, teacher_name: str, teacher_identity: dict, teacher_hidden: int, load_encoder, tokenizer,
                    student_cfg, initial_rows, store: ArtifactStore, data_dir: str) -> Artifact:
    """The task-agnostic SRA student for this teacher: built once, reused by every task.
    `load_encoder()` gives the pre-trained teacher encoder (only called to build); `initial_rows(dim)`
    the student's starting embedding over [PAD], [UNK] and every teacher wordpiece."""
    check_agnostic(cfg)
    lines, held_out, every = corpus_split(cfg, data_dir)
    digest = lines_digest(lines + held_out)
    describe = {"teacher": teacher_name, "pooling": cfg.pooling, "corpus": cfg.corpus, "sentences": len(lines),
                **({"epochs": cfg.epochs} if cfg.steps is None else {"steps": cfg.steps}), "heldout": cfg.heldout}
    teacher_vectors = None
    if every is not None:
        def teacher_vectors() -> tuple[torch.Tensor, torch.Tensor]:
            return shared_vectors(cfg, teacher_name, teacher_identity, load_encoder, tokenizer, every, store,
                                  len(lines), len(held_out))
    artifact = store.get_or_build(
        "agnostic", teacher_name, agnostic_spec(cfg, teacher_identity, student_cfg, digest, teacher_hidden),
        lambda out: distil_agnostic(cfg, load_encoder, tokenizer, student_cfg, initial_rows, lines, held_out, out,
                                    teacher_vectors),
        describe=describe)
    if artifact.reused:
        log.info("reusing task-agnostic SRA student %s; not distilling it again", artifact.path)
    else:
        log.info("task-agnostic SRA student saved to %s", artifact.path)
    return artifact


def shared_vectors(cfg, teacher_name: str, teacher_identity: dict, load_encoder, tokenizer, every: list[str],
                   store: ArtifactStore, count: int, held: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(training targets, held-out targets) of a heldout=end build: the first `count` and the last
    `held` rows of the teacher's vectors of the whole corpus, an artifact keyed by the teacher, the
    pooling, the length and the corpus's lines, built once for every corpus size and seed."""
    artifact = store.get_or_build(
        VECTORS_KIND, teacher_name, vectors_spec(cfg, teacher_identity, every),
        lambda out: corpus_vectors(cfg, load_encoder, tokenizer, every, out),
        describe={"teacher": teacher_name, "pooling": cfg.pooling, "corpus": cfg.corpus, "sentences": len(every)},
        # a run that finds another building them computes the pieces nobody has claimed yet, then waits
        assist=lambda out: corpus_vectors(cfg, load_encoder, tokenizer, every, out, assisting=True))
    vectors = load_file(artifact.path / VECTORS)["vectors"]
    return vectors[:count], vectors[len(vectors) - held:]


def piece_name(start: int) -> str:
    """The file of the corpus vectors' piece whose first line is `start`."""
    return f"piece-{start:09d}.safetensors"


def corpus_vectors(cfg, load_encoder, tokenizer, lines: list[str], out: Path, assisting: bool = False) -> dict:
    """The teacher's sentence vectors of every line into `out`/VECTORS, in pieces of VECTORS_CHUNK
    lines, each saved as it is done, so a killed build resumes at the first piece missing. Each piece
    is computed by the process that claims it (store.claims): a torchrun rank, or a run `assisting`
    the one that holds the build lock, which computes the pieces nobody holds and leaves the rest to
    the builder. The builder (rank 0 under torchrun) waits for the pieces others hold and joins them."""
    encoder, claims = None, ShardClaims(out)
    out.mkdir(parents=True, exist_ok=True)  # an assisting process may come before the builder made it
    starts = range(0, len(lines), VECTORS_CHUNK)
    done = sum(min(VECTORS_CHUNK, len(lines) - start) for start in starts if (out / piece_name(start)).is_file())
    with progress_bar() as progress:  # a resumed build starts at the pieces already written: its time left is right
        bar = progress.add_task(f"teacher sentence vectors of the corpus ({cfg.pooling})", total=len(lines),
                                completed=done, status=f"resuming: {done:,} lines done" if done else "")
        for start in claims.mine({piece_name(start): start for start in starts}, assisting):
            piece = out / piece_name(start)
            ids = tokenizer(cut_all(lines[start:start + VECTORS_CHUNK], cfg.max_length), truncation=True,
                            max_length=cfg.max_length)["input_ids"]
            encoder = encoder or load_encoder()  # on the runtime's device (teacher.load.load_encoder)
            vectors = sentence_vectors(encoder, ids, tokenizer.pad_token_id, cfg.pooling,
                                       progress=lambda n: progress.advance(bar, n))
            partial = piece.with_suffix(".partial")
            save_file({"vectors": vectors.contiguous()}, partial)
            os.replace(partial, piece)
        if assisting:
            return {}
        progress.update(bar, completed=len(lines))
    pieces = [load_file(out / piece_name(start))["vectors"] for start in starts]
    every = torch.cat(pieces) if pieces else torch.empty((0, 0))
    distributed.barrier()  # every rank has read the pieces
    if distributed.is_main():
        partial = (out / VECTORS).with_suffix(".partial")
        save_file({"vectors": every}, partial)
        os.replace(partial, out / VECTORS)
        for piece in out.glob("piece-*.safetensors"):
            piece.unlink()
        claims.remove()
    return {"sentences": len(lines), "sentence_size": int(every.shape[1])}


def distil_agnostic(cfg, load_encoder, tokenizer, student_cfg, initial_rows, lines: list[str], held_out: list[str],
                    out: Path, teacher_vectors=None) -> dict:
    """Wu et al.'s task-agnostic distillation (Eq. 1) of the teacher's sentence vectors into the SRA
    student. Not `training.fit`, by design: it trains a fixed budget (`epochs` passes, or `steps`
    updates) and keeps the last weights (the held-out loss is reported, Wu Table 4, and selects
    nothing), where fit stops on patience and restores the best dev epoch; its loss history is per
    pass over the corpus (the last one partial when `steps` ends within it), per sentence, not per
    batch. It shares fit's optimiser step (training.loop.optimiser_step). `teacher_vectors()`, when
    given, returns the (training, held-out) targets; else they are computed into `out`."""
    # a long line cut by characters first (data/cut.py): the tokenizer never sees more than it keeps
    ids = tokenizer(cut_all(lines + held_out, cfg.max_length), truncation=True, max_length=cfg.max_length)["input_ids"]
    pad_id = tokenizer.pad_token_id
    vectors_path = out / VECTORS
    if teacher_vectors is not None:
        targets, held_targets = teacher_vectors()
    else:
        if vectors_path.is_file():
            every = load_file(vectors_path)["vectors"]
        else:
            encoder = load_encoder()
            with progress_bar() as progress:
                bar = progress.add_task(f"teacher sentence vectors ({cfg.pooling})", total=len(ids), status="")
                every = sentence_vectors(encoder, ids, pad_id, cfg.pooling,
                                         progress=lambda n: progress.advance(bar, n))
            if distributed.is_main():
                partial = vectors_path.with_suffix(".partial")
                save_file({"vectors": every.contiguous()}, partial)
                os.replace(partial, vectors_path)
        targets, held_targets = every[:len(lines)], every[len(lines):]
    ids, held_ids = ids[:len(lines)], ids[len(lines):]
    vocab = TrimmedVocab.whole(len(tokenizer))  # every wordpiece: rows 2.. are teacher ids 0..
    runtime = current()
    scaler = runtime.grad_scaler()
    torch.manual_seed(cfg.seed)  # the weights are drawn on the CPU, the same on every device
    student = SRAStudent(len(vocab), student_cfg.embedding_dim, student_cfg.hidden_size, 2, student_cfg.dropout,
                         student_cfg.mlp_hidden_size, targets.shape[1], pair=False, num_layers=student_cfg.num_layers)
    with torch.no_grad():
        student.encoder.embedding.weight.copy_(initial_rows(student_cfg.embedding_dim, vocab))
    student.to(runtime.device)
    mapped, held_mapped = [vocab.map(x) for x in ids], [vocab.map(x) for x in held_ids]
    del ids, held_ids  # a whole corpus's ids are large: keep one copy
    optimizer = torch.optim.Adam(student.parameters(), lr=cfg.lr)
    rng = np.random.default_rng(cfg.seed)
    lengths = [len(x) for x in mapped]
    per_pass = -(-len(mapped) // cfg.batch_size)
    budget = cfg.epochs * per_pass if cfg.steps is None else cfg.steps
    # epoch: passes finished; within the pass under way, `position` batches done, their loss sum `total`
    epoch, step, position, total, history, seconds = 0, 0, 0, 0.0, [], 0.0
    checkpoint = Checkpoint(out / CHECKPOINT)
    # onto the CPU whichever device wrote it: load_state_dict copies to the student's device
    if (state := checkpoint.load()) is not None:
        student.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if scaler.is_enabled() and state.get("scaler"):
            scaler.load_state_dict(state["scaler"])
        rng.bit_generator.state = state["numpy_rng"]  # where the pass under way drew its batches
        # dropout's generators: the CPU's, and the CUDA ones only on a machine with as many GPUs (a
        # checkpoint from before them has none)
        restore_rng_states({"torch_rng": state["dropout_rng"], "cuda_rng": state.get("cuda_rng"),
                            "rank_rng": state.get("rank_rng")})
        epoch, history, seconds = state["epoch"], state["history"], state["seconds"]
        # a checkpoint of an earlier version was taken at a pass's end
        step, position, total = state.get("step", epoch * per_pass), state.get("position", 0), state.get("total", 0.0)
        log.info("resuming task-agnostic distillation at update %d of %d (pass %d) from %s", step, budget,
                 epoch + 1, checkpoint)
    started = time.perf_counter() - seconds
    saved = time.perf_counter()

    def save(pass_rng: dict) -> None:
        checkpoint.save({"model": student.state_dict(), "optimizer": optimizer.state_dict(), "numpy_rng": pass_rng,
                         "dropout_rng": torch.get_rng_state(), "cuda_rng": cuda_rng_states(), **rank_rng_states(),
                         "scaler": scaler.state_dict() if scaler.is_enabled() else None,
                         "epoch": epoch, "step": step, "position": position,
                         "total": total, "history": history, "seconds": time.perf_counter() - started})

    with progress_bar() as progress:
        bar = progress.add_task("task-agnostic SRA distillation", total=budget, completed=step, status="")
        while step < budget:
            student.train()
            pass_rng = rng.bit_generator.state  # a resumed pass draws its batches again from here
            batches = epoch_batches(cfg, lengths, rng)
            for rows in batches[position:]:
                if step >= budget:
                    break
                # under torchrun each process trains on its rows of the global batch
                mine, weight = distributed.my_part(rows)
                loss, value = None, 0.0
                if len(mine):
                    inputs, wanted = runtime.put((pad([mapped[r] for r in mine]), targets[torch.from_numpy(mine)]))
                    with runtime.autocast():
                        loss = representation_cosine(student.sentence(*inputs), wanted)
                    value = float(fetch(loss))  # the step's one wait for the device
                optimiser_step(loss, optimizer, list(student.parameters()), scaler=scaler, weight=weight)
                value = distributed.total(value * weight)
                total += value * len(rows)
                step, position = step + 1, position + 1
                progress.update(bar, advance=1, status=f"loss {value:.4f}")
                # rank 0's clock decides for every rank: saving gathers each rank's dropout state
                if step < budget and distributed.broadcast(time.perf_counter() - saved >= CHECKPOINT_SECONDS):
                    save(pass_rng)
                    saved = time.perf_counter()
            seen = sum(len(rows) for rows in batches[:position])
            epoch += 1
            history.append({"epoch": epoch, "steps": step, "loss": total / seen,
                            "validation_loss": held_out_loss(student, held_mapped, held_targets, cfg.batch_size)})
            held = history[-1]["validation_loss"]
            tracking.current().log_epoch("task-agnostic SRA", epoch,
                                         {"train_loss": total / seen, "validation_loss": held})
            log.info("task-agnostic SRA pass %d (update %d of %d): loss %.4f, held-out %s", epoch, step, budget,
                     total / seen, "none" if held is None else f"{held:.4f}")
            position, total = 0, 0.0
            if step < budget:
                save(rng.bit_generator.state)
                saved = time.perf_counter()
    # from the CPU: the artifact's bytes are the same whichever device trained it
    weights = {k: v.detach().cpu().contiguous() for k, v in student.state_dict().items()
               if not k.startswith("classifier.")}
    if distributed.is_main():  # under torchrun: rank 0 writes the build directory
        save_file(weights, out / WEIGHTS)
        checkpoint.path.unlink(missing_ok=True)
        vectors_path.unlink(missing_ok=True)  # the teacher's vectors served the build only
    return {"epochs": epoch, "steps": step, "history": history, "sentences": len(lines), "held_out": len(held_out),
            "heldout": cfg.heldout, "sentence_size": int(targets.shape[1]),
            "seconds": round(time.perf_counter() - started, 1), "final_loss": history[-1]["loss"],
            "validation_loss": history[-1]["validation_loss"]}


def epoch_batches(cfg, lengths: list[int], rng: np.random.Generator) -> list[np.ndarray]:
    if cfg.length_buckets:
        return length_bucketed_batches(lengths, cfg.batch_size, rng)
    return shuffled_batches(len(lengths), cfg.batch_size, rng)


@torch.inference_mode()
def held_out_loss(student, mapped: list[list[int]], targets: torch.Tensor, batch_size: int) -> float | None:
    """Eq. 1's loss on the held-out corpus lines (Wu Table 4's "distillation loss on the Wikipedia
    validation set"), the student in eval mode and the run's precision; None without held-out lines.
    Each batch is copied to the device once and its loss back once."""
    if not mapped:
        return None
    runtime = current()
    student.eval()
    total = 0.0
    for start in range(0, len(mapped), batch_size):
        rows = mapped[start:start + batch_size]
        inputs, wanted = runtime.put((pad(rows), targets[start:start + len(rows)]))
        with runtime.autocast():
            loss = representation_cosine(student.sentence(*inputs), wanted)
        total += float(fetch(loss)) * len(rows)
    return total / len(mapped)


def load_agnostic(path: Path) -> dict[str, torch.Tensor]:
    return load_file(path / WEIGHTS)


class TeacherAsPretrained:
    """The teacher as pre-trained (never fine-tuned), its tokenizer, and what the student's
    embedding initialisation reads from it: one home for the agnostic stage, `distil pretrain`
    and `distil-untuned`."""

    def __init__(self, teacher_cfg, hub_offline: bool):
        from distil.teacher.load import load_tokenizer, source_identity

        self.cfg, self.hub_offline = teacher_cfg, hub_offline
        self.tokenizer = load_tokenizer(teacher_cfg, hub_offline)
        random_init = teacher_cfg.random_init
        self.identity = {"name_or_path": teacher_cfg.name_or_path, "source": source_identity(teacher_cfg),
                         "random_init": OmegaConf.to_container(random_init) if random_init is not None else None}

    @functools.cached_property
    def encoder(self):
        """Loaded on first use: a run that finds the task-agnostic artifact built never needs the weights."""
        from distil.teacher.load import load_encoder

        return load_encoder(self.cfg, self.hub_offline)

    @functools.cached_property
    def hidden_size(self) -> int:
        from distil.teacher.load import hidden_size

        return hidden_size(self.cfg) or self.encoder.config.hidden_size

    def initial_rows(self, student_cfg, seed: int):
        """dim, vocab -> the student's starting embedding rows, from the pre-trained teacher's own
        wordpiece embeddings (so the artifact depends on nothing its key does not name)."""
        from distil.students.embeddings import initial_embeddings

        if student_cfg.embedding_init == "model2vec":
            raise DistilError("the task-agnostic SRA student starts from student.embedding_init=svd, pca, random or "
                              "file, not model2vec (that reads a fine-tuned teacher); choose one of those")
        def rows(dim: int, vocab: TrimmedVocab) -> torch.Tensor:
            # on the CPU in float32 wherever the encoder is (it moves to the device to compute vectors)
            embeddings = fetch(self.encoder.get_input_embeddings().weight)
            tokens = self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))
            return initial_embeddings(student_cfg.embedding_init, dim, teacher_ids=vocab.teacher_ids,
                                      teacher_embeddings=embeddings, teacher_tokens=tokens,
                                      vectors_file=student_cfg.vectors_file, seed=seed,
                                      sif_coefficient=student_cfg.sif_coefficient)
        return rows

    def student(self, student_cfg, seed: int) -> SRAStudent:
        """A fresh single-sentence SRA student over the whole vocabulary, its embeddings initialised."""
        torch.manual_seed(seed)
        vocab = TrimmedVocab.whole(len(self.tokenizer))
        student = SRAStudent(len(vocab), student_cfg.embedding_dim, student_cfg.hidden_size, 2, student_cfg.dropout,
                             student_cfg.mlp_hidden_size, self.hidden_size, pair=False,
                             num_layers=student_cfg.num_layers)
        with torch.no_grad():
            student.encoder.embedding.weight.copy_(self.initial_rows(student_cfg, seed)(student_cfg.embedding_dim,
                                                                                         vocab))
        return student


def agnostic_student(cfg, teacher_cfg, student_cfg, hub_offline: bool, store: ArtifactStore, data_dir: str,
                     teacher: TeacherAsPretrained | None = None) -> Artifact:
    """Wu et al.'s task-agnostic SRA student for this teacher and student config: built once."""
    teacher = teacher or TeacherAsPretrained(teacher_cfg, hub_offline)
    return ensure_agnostic(cfg, teacher_cfg.name, teacher.identity, teacher.hidden_size, lambda: teacher.encoder,
                           teacher.tokenizer, student_cfg, teacher.initial_rows(student_cfg, cfg.seed), store,
                           data_dir)

