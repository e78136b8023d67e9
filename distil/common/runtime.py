"""Where the tensors live and in which precision the arithmetic runs: one `Runtime` per command.

Every phase (teacher fine-tuning, caching, the student schedules, evaluation, pre-training,
prediction, the benchmarks) reads the active runtime rather than a parameter threaded through
each function: models are moved once where they are built or loaded, batches once per batch at
the few places that pad them (`put`), and results come back once per batch (`fetch`). A command
activates its runtime for its whole length (`use`); code that runs outside one (a test calling a
function directly, a notebook) gets the CPU in fp32, what distil did before it knew of devices.

Precision:
- auto (the default job's): bf16 where the device computes it natively (a CUDA GPU with bf16; a CPU
  with AVX512-BF16 or AMX instructions), else fp32. A CPU without them would emulate bf16, slower
  than fp32. Resolved once, at the start: keys, metrics.json and the startup line hold what it chose.
- fp32: no autocast; every result as on a CPU before.
- bf16: autocast to bfloat16 for the forward passes of training (CPU and GPU). bf16 keeps fp32's
  exponent, so no loss scaling is needed, but only 8 bits of mantissa.
- fp16: autocast to float16 with a GradScaler (dynamic loss scaling, so small gradients do not
  flush to zero). CUDA only: the CPU's oneDNN has no fp16 LSTM.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from distil.common.provenance import cpu_model
from distil.errors import DistilError

DEVICES = "auto, cpu, cuda, cuda:N or mps"
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Runtime:
    """A device and a precision. Build one with `Runtime.resolve` (it checks both)."""

    device: torch.device = torch.device("cpu")
    precision: str = "fp32"
    auto_precision: bool = dataclasses.field(default=False, compare=False)  # chosen by runtime.precision=auto

    @classmethod
    def resolve(cls, device: str = "auto", precision: str = "fp32") -> Runtime:
        """`device` auto: the first CUDA GPU when there is one, else Apple's mps, else the CPU.
        `precision` auto: the device's native low precision (`native_precision`)."""
        if precision not in PRECISIONS:
            raise DistilError(f"runtime.precision={precision} is not one of {', '.join(PRECISIONS)}")
        resolved = _device(str(device))
        if precision == "auto":
            return cls(resolved, native_precision(resolved), auto_precision=True)
        if precision == "fp16" and resolved.type != "cuda":
            raise DistilError(f"runtime.precision=fp16 needs a CUDA GPU, and this run is on {resolved}; "
                              "use runtime.precision=bf16 (or fp32) here")
        return cls(resolved, precision)

    @property
    def on_gpu(self) -> bool:
        return self.device.type != "cpu"

    @property
    def cache_precision(self) -> str:
        """The precision of the teacher's forward passes whose outputs are kept (the cached targets,
        and the dev scores that select the teacher): fp16 under fp16, else fp32. Never bf16: the cache
        stores fp16 (11 mantissa bits), and bf16's 8 would lose what it keeps."""
        return "fp16" if self.precision == "fp16" else "fp32"

    def autocast(self, precision: str | None = None) -> contextlib.AbstractContextManager:
        """Forward passes under `precision` (default: the run's); a no-op in fp32."""
        precision = precision or self.precision
        if precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=AUTOCAST_DTYPES[precision])

    def grad_scaler(self) -> torch.amp.GradScaler:
        """Dynamic loss scaling, enabled in fp16 only (bf16 and fp32 have fp32's range)."""
        return torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")

    def put(self, value: Any) -> Any:
        """`value` (a tensor, or tuples, lists and dicts of them) on the device: one copy per batch,
        from pinned memory and without waiting, on a GPU; on the CPU the same objects back."""
        if not self.on_gpu:
            return value
        if isinstance(value, torch.Tensor):
            source = value.pin_memory() if self.device.type == "cuda" and not value.is_pinned() else value
            return source.to(self.device, non_blocking=True)
        if isinstance(value, dict):
            return {key: self.put(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.put(item) for item in value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a batch's targets
            return dataclasses.replace(value, **{f.name: self.put(getattr(value, f.name))
                                                 for f in dataclasses.fields(value) if f.init})
        return value

    def synchronize(self) -> None:
        """Wait for the device's queued work: before a clock is read, or a result is trusted."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elif self.device.type == "mps":
            torch.mps.synchronize()

    def describe(self) -> dict:
        """metrics.json's `runtime`: the device, its name and the precision."""
        return {"device": str(self.device), "name": device_name(self.device), "precision": self.precision,
                "precision_chosen_by": "auto" if self.auto_precision else "config"}

    def __str__(self) -> str:
        chosen = " (runtime.precision=auto)" if self.auto_precision else ""
        return f"{device_name(self.device)} ({self.device}), {self.precision}{chosen}"


def share_of_cores(jobs: int) -> int:
    """The torch threads each of `jobs` processes sharing this machine gets: an equal share of its cores,
    at least 1 (`distil table --jobs N` gives it to each cell)."""
    return max(1, (os.cpu_count() or 1) // jobs)


def precision_key(precision: str, name: str = "precision") -> dict:
    """An artifact key's entry for the precision it was made in: nothing for fp32, so every fp32 key is
    the one from before precisions (and still finds what was built then); {name: precision} otherwise.
    The one rule for every key (teacher, cached targets, pre-trained students); the device is never in one."""
    return {} if precision == "fp32" else {name: precision}


def fetch(value: Any) -> Any:
    """`value` back on the CPU, as float32 where it was computed in a lower precision: one copy per
    batch (then sliced per example on the host), never one per example."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if value.is_floating_point() and value.dtype != torch.float32:
            value = value.float()
        return value.cpu()
    if isinstance(value, dict):
        return {key: fetch(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(fetch(item) for item in value)
    return value


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple GPU (mps)"
    return cpu_model()


def _device(spec: str) -> torch.device:
    if spec == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(spec)
    except RuntimeError:
        raise DistilError(f"runtime.device={spec} is not a device: choose {DEVICES}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DistilError(f"runtime.device={spec}: this machine has no CUDA GPU that torch can use "
                              f"(torch {torch.__version__}); use runtime.device=cpu or auto")
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index >= torch.cuda.device_count():
            raise DistilError(f"runtime.device={spec}: this machine has {torch.cuda.device_count()} GPU(s), "
                              f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
        return torch.device("cuda", index)
    if device.type == "mps" and not _mps_available():
        raise DistilError(f"runtime.device={spec}: Apple's mps is not available here; use runtime.device=cpu or auto")
    if device.type not in ("cpu", "cuda", "mps"):
        raise DistilError(f"runtime.device={spec} is not supported: choose {DEVICES}")
    return device


def native_precision(device: torch.device) -> str:
    """What runtime.precision=auto runs in on `device`: bf16 where its arithmetic units compute bf16
    (CUDA: compute capability 8.0 on; a CPU: AVX512-BF16 or AMX-BF16), else fp32. Apple's mps: fp32."""
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported(including_emulation=False) else "fp32"
    if device.type == "cpu":
        return "bf16" if cpu_has_native_bf16() else "fp32"
    return "fp32"


BF16_CPU_FLAGS = {"avx512_bf16", "amx_bf16"}


@lru_cache(maxsize=2)
def cpu_has_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU has bf16 dot-product instructions (Linux reports them in /proc/cpuinfo's flags;
    elsewhere: no, so auto stays fp32). Without them oneDNN emulates bf16, slower than fp32."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    flags = next((line.partition(":")[2].split() for line in text.splitlines() if line.startswith("flags")), [])
    return bool(BF16_CPU_FLAGS & set(flags))


def _mps_available() -> bool:
    return hasattr(torch.backends, "mps") and torch.backends.mps.is_available()


CPU = Runtime()
_active: contextvars.ContextVar[Runtime] = contextvars.ContextVar("distil_runtime", default=CPU)


def current() -> Runtime:
    """The runtime of the command running now (the CPU in fp32 outside one)."""
    return _active.get()


@contextlib.contextmanager
def use(runtime: Runtime) -> Iterator[Runtime]:
    """Make `runtime` the active one for a block (a command's whole length)."""
    token = _active.set(runtime)
    if runtime.device.type == "cuda" and runtime.precision == "fp32":
        full_fp32_on_cuda()
    try:
        yield runtime
    finally:
        _active.reset(token)


def full_fp32_on_cuda() -> None:
    """fp32 means fp32 on a GPU too: torch lets cuDNN's convolutions and LSTMs round their fp32 inputs to
    TF32 (10 mantissa bits) by default, which would make a GPU fp32 run differ from the CPU's by more
    than float rounding. Matrix products are full fp32 at torch's defaults already."""
    cudnn = torch.backends.cudnn
    if hasattr(cudnn, "rnn") and hasattr(cudnn.rnn, "fp32_precision"):  # torch's per-backend settings
        cudnn.conv.fp32_precision = cudnn.rnn.fp32_precision = "ieee"
    else:
        cudnn.allow_tf32 = False
