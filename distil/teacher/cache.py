"""The teacher's outputs for every split, cached in shards so students never run it again.

Layout of a targets artifact (outputs/cache/targets/<teacher>-<hash>/):

    manifest.json                 spec, SHA-256 and size of every file, the layout below
    <split>-<shard:05d>.safetensors   examples [start, end) of the split, in split order

A shard holds fp16 tensors (safetensors, readable by any safetensors tool):
    logits   [n, C]          one row per example; per-token tasks: [tokens, C] with
    offsets  [n + 1]         int64, example i is rows offsets[i]:offsets[i + 1]
    hidden   [n, H]          layer `teacher.layer` at the task's positions: [CLS] per example, or
                             each word's first wordpiece for tagging ([words, H] with
                             hidden_offsets [n + 1]); for a pair whose student reads the two
                             sentences apart, [n, 2, H]: [CLS] of sentence a alone and of
                             sentence b alone (Wu et al. 2019 §3.1, Fig. 1c), while the logits
                             stay those of the joined pair (the teacher classifies pairs)

The teacher runs over one shard's examples at a time, in length-sorted batches under
inference mode, so memory stays at one shard whatever the transfer-set size; each shard is
written to a .partial file and renamed, so a build interrupted anywhere (Ctrl-C, kill -9)
resumes at its first missing shard and ends byte-identical to an uninterrupted one.
A shard whose values are not finite (a diverged teacher, or one whose outputs overflow fp16)
is refused: the run fails in one line and nothing is cached.
Training reads rows back with positioned reads (`os.pread`), never the whole file.

The manifest records each split's content fingerprint. A new artifact of the same teacher and
settings takes the shards of every split an earlier one already holds (hard links, checked
against that artifact's checksums): a sweep over transfer sets runs the teacher on each new
transfer set, not again on the dev and test sets every cell shares.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import struct
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from distil.common import distributed
from distil.common.progress import progress_bar
from distil.common.runtime import current, fetch, precision_key
from distil.config.schema import TeacherConfig
from distil.data.prepared import PreparedSplit
from distil.data.split import TaskData
from distil.errors import DistilError
from distil.store.artifacts import Artifact, ArtifactStore, file_problem
from distil.store.claims import ShardClaims
from distil.tasks import Task
from distil.teacher.finetune import lr_setting
from distil.teacher.inference import pick, teacher_batches

log = logging.getLogger(__name__)

LAYOUT_VERSION = 3  # 3: a pair's hidden vectors may be cached per sentence ([n, 2, H])


def ensure_targets(cfg: TeacherConfig, teacher: Artifact, task: Task, data: TaskData,
                   prepared: dict[str, PreparedSplit], store: ArtifactStore, layer: int | None,
                   load_teacher: Callable[[], tuple], apart: bool = False) -> Artifact:
    """Logits for every split, plus hidden layer `layer` (None: logits only): of each example as
    the teacher reads it, or, with `apart`, of each sentence of a pair alone. `load_teacher()`
    gives (model, tokenizer) and is called only when a shard has to be computed."""
    if apart and task.inputs != "pair":
        raise ValueError(f"only a pair can be cached apart, not a {task.name} task's {task.inputs}")
    apart = apart and layer is not None
    data_key = data.fingerprint(*data.splits)  # hashing every row: once

    # the precision of the forward that fills the cache (the active runtime's cache_precision, which also
    # computes it): fp32, or fp16 under fp16, in the key only when fp16 (fp32 keys as before runtimes)
    forward = current().cache_precision

    def spec(hidden_layer: int | None, hidden_apart: bool) -> dict:
        # `apart` is in the key: a joint and a per-sentence cache never stand in for each other
        return {"teacher": teacher.key, "data": data_key, "max_length": cfg.max_length,
                "layer": hidden_layer, "apart": hidden_apart, "dtype": "float16", "shard_size": cfg.shard_size,
                "layout": LAYOUT_VERSION, **precision_key(forward, "forward")}

    if layer is None:
        # Logits are the same bytes in a cache that also holds a hidden layer, joint or apart: reuse it.
        for hidden_apart in (False, True) if task.inputs == "pair" else (False,):
            superset = store.find("targets", cfg.name, spec(cfg.layer, hidden_apart))
            if superset is not None:
                log.info("reusing cached teacher targets %s (logits only needed)", superset.path)
                return superset

    def build(out: Path, assisting: bool = False) -> dict:
        digests = {split: data.fingerprint(split) for split in prepared}
        donors = find_donors(store, cfg.name, spec(layer, apart), digests)
        return write_targets(out, task, prepared, layer, cfg.shard_size, cfg.eval_batch_size, load_teacher,
                             apart, fix=f"lower {lr_setting(cfg.finetune)}", digests=digests, donors=donors,
                             assisting=assisting)

    describe = {"teacher": cfg.name, "dataset": data.name, "task": task.name,
                "layers": [] if layer is None else [layer], "examples": data.summary()}
    if apart:
        describe["hidden"] = "each sentence of a pair alone"
    artifact = store.get_or_build("targets", cfg.name, spec(layer, apart), build, describe=describe,
                                  assist=partial(build, assisting=True))
    if artifact.reused:
        log.info("reusing cached teacher targets %s; not running the teacher again", artifact.path)
    else:
        log.info("cached teacher targets in %s", artifact.path)
    return artifact


def shard_name(split: str, index: int) -> str:
    return f"{split}-{index:05d}.safetensors"


@dataclass(frozen=True)
class DonorSplit:
    """A split's shards in another targets artifact of the same teacher and settings."""

    directory: Path
    shards: list[dict]       # that artifact's layout entry for the split
    files: dict[str, dict]   # its manifest's size and SHA-256 per file

    def give(self, index: int, target: Path) -> bool:
        """Put shard `index` at `target` (a hard link, else a copy) if the donor's file is intact."""
        name = self.shards[index]["file"]
        if file_problem(self.directory, name, self.files.get(name, {})) is not None:
            return False  # damaged or pruned meanwhile: the teacher computes this shard
        try:
            os.link(self.directory / name, target)
        except FileExistsError:
            return True
        except OSError:  # no hard links here (another file system): a copy, renamed when complete
            partial = target.with_suffix(".partial")
            try:
                shutil.copyfile(self.directory / name, partial)
            except OSError:
                return False
            os.replace(partial, target)
        return True


def find_donors(store: ArtifactStore, name: str, spec: dict, digests: dict[str, str]) -> dict[str, DonorSplit]:
    """For each split, a built artifact whose spec differs from `spec` only in its data and that
    holds a split with the same content fingerprint: the teacher's outputs on it are the same bytes."""
    settings = {key: value for key, value in spec.items() if key != "data"}
    donors: dict[str, DonorSplit] = {}
    for directory, manifest in store.manifests("targets", name):
        other = manifest.get("spec", {})
        if {key: value for key, value in other.items() if key != "data"} != settings:
            continue
        for split, entry in manifest.get("info", {}).get("splits", {}).items():
            fingerprint = entry.get("fingerprint")
            if split not in donors and fingerprint is not None and fingerprint == digests.get(split):
                donors[split] = DonorSplit(directory, entry["shards"], manifest.get("files", {}))
    return donors


def write_targets(out: Path, task: Task, prepared: dict[str, PreparedSplit], layer: int | None,
                  shard_size: int, batch_size: int, load_teacher: Callable[[], tuple], apart: bool = False,
                  fix: str = "lower the teacher's fine-tuning learning rate", digests: dict[str, str] | None = None,
                  donors: dict[str, DonorSplit] | None = None, assisting: bool = False) -> dict:
    """Write every missing shard into `out` (shards already there are complete: kept); `fix` is
    what the error for a non-finite shard tells the user to do. `digests` (split -> content
    fingerprint) go into the layout; a split in `donors` with the same shard bounds takes the
    donor's shards instead of running the teacher.

    Several processes can fill one `out` together (torchrun's ranks, or independent runs on a shared
    file system, `assisting` the one that holds the build lock): each shard is computed by the process
    that claims it (`ShardClaims`), so every process runs the teacher on different shards. The
    builder (not `assisting`) then waits for the shards others hold, and computes any whose process
    died, so it returns only when every shard is there."""
    digests, donors = digests or {}, donors or {}
    layout = {"per_token": task.per_token, "layer": layer, "apart": apart, "splits": {}}
    claims = ShardClaims(out)
    out.mkdir(parents=True, exist_ok=True)  # an assisting process may come before the builder made it
    passes = 3 if apart else 1  # the joined pair for the logits, then each sentence alone
    teacher = None
    with progress_bar() as progress:
        todo = []  # (split, its shards' bounds, the shards missing, its progress bar)
        for split, examples in prepared.items():  # the four splits and any extra test split
            bounds = [(start, min(start + shard_size, len(examples))) for start in range(0, len(examples), shard_size)]
            shards = [{"file": shard_name(split, i), "start": s, "end": e} for i, (s, e) in enumerate(bounds)]
            entry = {"examples": len(examples), "shards": shards}
            if split in digests:
                entry["fingerprint"] = digests[split]
            layout["splits"][split] = entry
            missing = [i for i in range(len(bounds)) if not (out / shard_name(split, i)).is_file()]
            donor = donors.get(split)
            if donor is not None and missing and donor.shards == entry["shards"]:
                missing = [i for i in missing if not donor.give(i, out / shard_name(split, i))]
                log.info("teacher outputs on the %s split taken from %s (the same examples)",
                         split, donor.directory.name)
            done = len(examples) - sum(bounds[i][1] - bounds[i][0] for i in missing)
            bar = progress.add_task(f"caching teacher outputs: {split}", total=passes * len(examples),
                                    completed=passes * done,
                                    status=f"resuming at shard {missing[0]}" if missing and done else "")
            todo.append((split, bounds, missing, bar))

        def write(split: str, bounds: list, index: int, bar) -> None:
            nonlocal teacher
            if teacher is None:
                teacher = load_teacher()
            model, tokenizer = teacher
            start, end = bounds[index]
            tensors = compute_shard(model, task, prepared[split], np.arange(start, end), tokenizer.pad_token_id,
                                    batch_size, layer, progress=lambda n: progress.advance(bar, n), apart=apart)
            try:
                check_finite(tensors, split, start, end, fix)
            except DistilError:
                claims.remove()  # the store removes the build directory too: bad settings, not work to resume
                raise
            path = out / shard_name(split, index)
            unfinished = path.with_suffix(".partial")  # one writer per shard: its claim's holder
            save_file(tensors, unfinished)
            os.replace(unfinished, path)  # a shard under its final name is complete
            del tensors  # the next shard is computed without this one alive

        # every split's free shards first, then (the builder) those others held: a process never waits
        # on one split while another still has shards nobody claimed
        pieces = {shard_name(split, index): (split, bounds, index, bar)
                  for split, bounds, missing, bar in todo for index in missing}
        for split, bounds, index, bar in claims.mine(pieces, assisting):
            write(split, bounds, index, bar)
        if not assisting:  # every shard is there now: what others computed counts as done
            for split, _, _, bar in todo:
                progress.update(bar, completed=passes * len(prepared[split]))
    if not assisting:
        distributed.barrier()  # no rank still reads a claim
        if distributed.is_main():
            claims.remove()
    return layout


@torch.inference_mode()
def compute_shard(model, task: Task, split: PreparedSplit, rows: np.ndarray, pad_id: int, batch_size: int,
                  layer: int | None, progress=None, apart: bool = False) -> dict[str, torch.Tensor]:
    """The shard's tensors, each batch written straight into one fp16 buffer per tensor.

    Sizes are known before the teacher runs (lengths, and the task's hidden positions), so
    nothing is allocated per example: thousands of small per-example tensors between each
    batch's large activations fragment the heap and make memory creep from shard to shard."""
    model.eval()
    joint_layer = None if apart else layer  # the layer read from the examples as the teacher reads them
    lengths = split.ids.lengths()[rows]
    logit_offsets = _offsets(lengths if task.per_token else np.ones(len(rows), dtype=np.int64))
    tensors = {"logits": torch.empty((int(logit_offsets[-1]), model.config.num_labels), dtype=torch.float16)}
    if joint_layer is not None:
        positions = [task.hidden_positions(split, int(row)) for row in rows]
        hidden_offsets = _offsets(np.asarray([len(p) for p in positions], dtype=np.int64))
        tensors["hidden"] = torch.empty((int(hidden_offsets[-1]), model.config.hidden_size), dtype=torch.float16)
    for batch, logits, states in teacher_batches(model, split.ids, rows, pad_id, batch_size, joint_layer, progress):
        picked = None if states is None else pick(states, [positions[local] for local in batch])
        for k, local in enumerate(batch):
            first, last = logit_offsets[local], logit_offsets[local + 1]
            tensors["logits"][first:last] = logits[k, : lengths[local]] if task.per_token else logits[k]
            if picked is not None:
                first, last = hidden_offsets[local], hidden_offsets[local + 1]
                tensors["hidden"][first:last] = picked[k]
    if apart:
        tensors["hidden"] = sentence_vectors(model, split, rows, pad_id, batch_size, layer, progress)
    if task.per_token:  # one row per example otherwise: no offsets needed
        tensors["offsets"] = torch.from_numpy(logit_offsets)
        if joint_layer is not None:
            tensors["hidden_offsets"] = torch.from_numpy(hidden_offsets)
    return tensors


def check_finite(tensors: dict[str, torch.Tensor], split: str, start: int, end: int, fix: str) -> None:
    """A shard is cached only if every value is finite: nan or inf targets would train every
    student of every later run on nothing."""
    for name in ("logits", "hidden"):
        if name in tensors and not torch.isfinite(tensors[name]).all():
            raise DistilError(f"the teacher's {name} on the {split} split (examples {start}-{end - 1}) are not "
                              f"finite (nan, or beyond float16's range): the teacher diverged; {fix}")


CLS = 0  # the position the joined pair's vector is read at (Task.hidden_positions), here of each sentence


def sentence_vectors(model, split: PreparedSplit, rows: np.ndarray, pad_id: int, batch_size: int, layer: int,
                     progress=None) -> torch.Tensor:
    """[n, 2, H] fp16: layer `layer` at [CLS] of sentence a run through the teacher alone, and of
    sentence b alone. Wu et al. 2019 §3.1, Fig. 1c: the student encodes each sentence on its
    own, so each is distilled against the teacher's vector of that sentence (T_x for a
    sentence x); the joined pair's [CLS] mixes both and matches neither."""
    vectors = torch.empty((len(rows), 2, model.config.hidden_size), dtype=torch.float16)
    for side, sentences in enumerate((split.pair.first, split.pair.second)):
        for batch, _, states in teacher_batches(model, sentences, rows, pad_id, batch_size, layer, progress):
            vectors[torch.from_numpy(batch), side] = fetch(states[:, CLS]).to(vectors.dtype)
    return vectors


def _offsets(counts: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets


# --- reading -----------------------------------------------------------------------------

class Shard:
    """One safetensors shard read by positioned reads: the header once, then only the rows asked for."""

    def __init__(self, path: Path):
        self.path = path
        with path.open("rb") as handle:
            (header_size,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(header_size))
        self.data_start = 8 + header_size
        self.tensors = {name: meta for name, meta in header.items() if name != "__metadata__"}
        self._fd: int | None = None
        self._offsets: dict[str, np.ndarray] = {}

    def _read(self, begin: int, size: int) -> bytes:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        return os.pread(self._fd, size, self.data_start + begin)

    def whole(self, name: str) -> np.ndarray:
        meta = self.tensors[name]
        begin, end = meta["data_offsets"]
        dtype = {"F16": np.float16, "I64": np.int64}[meta["dtype"]]
        return np.frombuffer(self._read(begin, end - begin), dtype=dtype).reshape(meta["shape"])

    def rows(self, name: str, local: int, per_token: bool) -> np.ndarray:
        """Example `local` of this shard: one row ([width], or [2, width] for a pair's sentences
        apart), or [len, width] for per-token tensors."""
        meta = self.tensors[name]
        row_shape = meta["shape"][1:]
        row_bytes = 2 * int(np.prod(row_shape))
        if per_token:
            offsets_name = "hidden_offsets" if name == "hidden" else "offsets"
            if offsets_name not in self._offsets:
                self._offsets[offsets_name] = self.whole(offsets_name)
            first, last = self._offsets[offsets_name][local], self._offsets[offsets_name][local + 1]
        else:
            first, last = local, local + 1
        data = self._read(meta["data_offsets"][0] + int(first) * row_bytes, int(last - first) * row_bytes)
        values = np.frombuffer(data, dtype=np.float16).reshape(-1, *row_shape)
        return values if per_token else values[0]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self):
        self.close()


class SplitTargets:
    """One split of a targets artifact, opened lazily shard by shard.

    Headers and offsets stay loaded (a few bytes an example); open file descriptors are kept
    for the MAX_OPEN most recently read shards only, so a transfer set of thousands of shards
    never runs into the process's limit on open files."""

    MAX_OPEN = 128

    def __init__(self, directory: Path, layout: dict, split: str):
        entry = layout["splits"][split]
        self.size = entry["examples"]
        self.per_token = layout["per_token"]
        self.has_hidden = layout["layer"] is not None
        self._files = [directory / s["file"] for s in entry["shards"]]
        self._starts = np.asarray([s["start"] for s in entry["shards"]], dtype=np.int64)
        self._shards: dict[int, Shard] = {}
        self._open: OrderedDict[int, None] = OrderedDict()  # shards holding a descriptor, oldest first

    def row(self, name: str, row: int) -> np.ndarray:
        index = int(np.searchsorted(self._starts, row, side="right") - 1)
        if index not in self._shards:
            self._shards[index] = Shard(self._files[index])
        values = self._shards[index].rows(name, row - int(self._starts[index]), self.per_token)
        self._open[index] = None
        self._open.move_to_end(index)
        if len(self._open) > self.MAX_OPEN:
            self._shards[self._open.popitem(last=False)[0]].close()
        return values


class MemoryTargets:
    """Targets held in memory (tests, and the benchmark's in-memory baseline): [N, C] tensors,
    or per-example lists of [len_i, C] tensors for per-token tasks."""

    def __init__(self, logits, hidden=None):
        self.per_token = isinstance(logits, list)
        self.has_hidden = hidden is not None
        self.size = len(logits)
        self._tensors = {"logits": logits, "hidden": hidden}

    def row(self, name: str, row: int) -> np.ndarray:
        return self._tensors[name][row].numpy()

    def rows(self, name: str, rows: np.ndarray) -> torch.Tensor:
        """Sequence tasks: the rows by one tensor index (no per-row copies)."""
        return self._tensors[name][torch.from_numpy(rows)].float()


class TargetView:
    """Rows of one or more cached splits in a chosen order: what a student split reads.

    `logits(rows)` / `hidden(rows)` give fp32 tensors: [B, C] (or [B, H], [B, 2, H] for a pair's
    sentences apart) for sequence tasks, a list of [len_i, C] (or [words_i, H]) for per-token tasks."""

    def __init__(self, parts: Sequence[tuple[SplitTargets | MemoryTargets, np.ndarray]]):
        self.parts = [(source, np.asarray(rows, dtype=np.int64)) for source, rows in parts]
        self._bounds = np.cumsum([0] + [len(rows) for _, rows in self.parts])
        first = self.parts[0][0]
        self.per_token, self.has_hidden = first.per_token, first.has_hidden

    @classmethod
    def of(cls, source: SplitTargets | MemoryTargets) -> TargetView:
        return cls([(source, np.arange(source.size))])

    @classmethod
    def in_memory(cls, logits, hidden=None) -> TargetView:
        return cls.of(MemoryTargets(logits, hidden))

    def __len__(self) -> int:
        return int(self._bounds[-1])

    def _read(self, name: str, rows) -> list[np.ndarray]:
        rows = np.asarray(rows, dtype=np.int64)
        part = np.searchsorted(self._bounds, rows, side="right") - 1
        return [self.parts[p][0].row(name, int(self.parts[p][1][r - self._bounds[p]]))
                for p, r in zip(part, rows, strict=True)]

    def _tensor(self, name: str, rows):
        source, local = self.parts[0]
        if len(self.parts) == 1 and isinstance(source, MemoryTargets) and not self.per_token:
            return source.rows(name, local[np.asarray(rows, dtype=np.int64)])
        values = self._read(name, rows)
        if self.per_token:
            return [torch.from_numpy(v.astype(np.float32)) for v in values]
        return torch.from_numpy(np.stack(values).astype(np.float32)) if values else torch.zeros((0, 0))

    def logits(self, rows):
        return self._tensor("logits", rows)

    def hidden(self, rows):
        return self._tensor("hidden", rows) if self.has_hidden else None

    def all_logits(self):
        return self.logits(np.arange(len(self)))

    def select(self, rows) -> TargetView:
        """These rows, in this order (consecutive rows of one source stay one part)."""
        rows = np.asarray(rows, dtype=np.int64)
        part = np.searchsorted(self._bounds, rows, side="right") - 1
        parts: list[tuple[SplitTargets, list[int]]] = []
        for p, row in zip(part.tolist(), rows.tolist(), strict=True):
            source, local = self.parts[p]
            if not parts or parts[-1][0] is not source:
                parts.append((source, []))
            parts[-1][1].append(int(local[row - self._bounds[p]]))
        return TargetView(parts or [(self.parts[0][0], [])])

    @staticmethod
    def concat(views: Sequence[TargetView]) -> TargetView:
        return TargetView([part for view in views for part in view.parts])


def open_targets(artifact: Artifact) -> dict[str, TargetView]:
    """Every split of a targets artifact, read lazily."""
    layout = artifact.info
    return {split: TargetView.of(SplitTargets(artifact.path, layout, split)) for split in layout["splits"]}
