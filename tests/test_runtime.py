"""The runtime (device and precision) on the CPU: what keeps the GPU path from rotting where no GPU is.

- every student and teacher moves whole: on the `meta` device no tensor stays behind (a module kept
  out of nn.Module's walk, as the BiLSTM's one-way LSTMs once were, would);
- no forward pass or loss creates a tensor without a device (a lint over the source);
- bad settings fail with one line; batches, results and keys behave as documented.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from distil.common.runtime import CPU, Runtime, current, fetch, use
from distil.errors import DistilError
from distil.students import build_student
from distil.tasks import get_task, make_task
from tests.conftest import compose_config
from tests.test_students import CASES, student_cfg

ROOT = Path(__file__).resolve().parents[1]
FACTORIES = {"zeros", "ones", "empty", "full", "arange", "tensor", "as_tensor", "randn", "rand", "randint", "eye",
             "linspace"}


def _tensors_off(module: torch.nn.Module, device: str) -> list[str]:
    """Every tensor reachable from `module` (parameters, buffers, and attributes holding modules or
    tensors outside nn.Module's registry) that is not on `device`."""
    left, seen = [], set()

    def visit(obj, path: str) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            if obj.device.type != device:
                left.append(f"{path} on {obj.device}")
        elif isinstance(obj, torch.nn.Module):
            for name, value in vars(obj).items():
                if name in ("_parameters", "_buffers", "_modules"):
                    for key, item in value.items():
                        if item is not None:
                            visit(item, f"{path}.{key}")
                elif isinstance(value, torch.Tensor | torch.nn.Module | tuple | list):
                    visit(value, f"{path}.{name}")
        elif isinstance(obj, tuple | list):
            for index, item in enumerate(obj):
                visit(item, f"{path}[{index}]")

    visit(module, type(module).__name__)
    return left


@pytest.mark.parametrize("kind,task", CASES)
def test_every_student_moves_whole_to_another_device(kind, task):
    model = build_student(student_cfg(kind), vocab_size=20, num_labels=3, task=get_task(task),
                          teacher_hidden_size=12, representation_head=True)
    model.to("meta")
    assert _tensors_off(model, "meta") == []


def test_the_bilstm_one_way_lstms_move_with_it():
    """They are a tuple (no state-dict entries): before, .to() left them on the CPU."""
    from distil.students.encoders import BiLSTMEncoder

    encoder = BiLSTMEncoder(20, 8, 8, 0.0).to("meta")
    assert all(p.device.type == "meta" for one_way in encoder._one_way for p in one_way.parameters())
    assert "_one_way" not in str(list(encoder.state_dict()))


def test_a_teacher_moves_whole_to_another_device():
    from distil.teacher.load import load_pretrained

    cfg = compose_config("debug=smoke")
    model, _ = load_pretrained(cfg.teacher, make_task(cfg.dataset), ["a", "b"], 0, True)
    model.to("meta")
    assert _tensors_off(model, "meta") == []


def _calls_without_device(path: Path, root: Path = ROOT) -> list[str]:
    """torch factory calls with no device= inside a forward pass or a loss of `path`."""
    tree = ast.parse(path.read_text())
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        in_forward = function.name in ("forward", "_padded", "_run", "__call__") or path.name == "losses.py"
        if not in_forward:
            continue
        for call in ast.walk(function):
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in FACTORIES
                    and isinstance(call.func.value, ast.Name) and call.func.value.id == "torch"
                    and not any(k.arg == "device" for k in call.keywords)):
                found.append(f"{path.relative_to(root)}:{call.lineno} torch.{call.func.attr} in {function.name}")
    return found


def test_no_forward_pass_or_loss_creates_a_tensor_without_a_device():
    """On a GPU such a tensor lands on the CPU and the next op fails (or, worse, syncs every step)."""
    files = [*sorted((ROOT / "distil" / "students").glob("*.py")), ROOT / "distil" / "training" / "losses.py"]
    assert [line for path in files for line in _calls_without_device(path)] == []


def test_the_lint_finds_a_factory_without_a_device(tmp_path):
    """The check above can fail."""
    source = tmp_path / "bad.py"
    source.write_text("import torch\nclass M:\n    def forward(self, x):\n        return x + torch.zeros(3)\n")
    assert _calls_without_device(source, tmp_path) == ["bad.py:4 torch.zeros in forward"]


@pytest.mark.parametrize(("device", "precision", "message"), [
    ("cuda", "fp32", "no CUDA GPU"),
    ("cuda:3", "fp32", "no CUDA GPU"),
    ("tpu", "fp32", "not a device"),
    ("cpu", "fp8", "not one of auto, fp32, bf16, fp16"),
    ("cpu", "fp16", "needs a CUDA GPU"),
])
def test_a_setting_that_cannot_run_here_is_one_line(device, precision, message):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(DistilError, match=message) as error:
        Runtime.resolve(device, precision)
    assert "\n" not in str(error.value)


def test_auto_is_the_cpu_without_a_gpu_and_the_default_outside_a_command_is_cpu_fp32():
    if not torch.cuda.is_available():
        assert Runtime.resolve("auto").device == torch.device("cpu")
    assert current() == CPU and CPU.precision == "fp32"
    with use(Runtime.resolve("cpu", "bf16")) as runtime:
        assert current() is runtime
    assert current() == CPU


def test_results_come_back_as_float32_on_the_cpu_and_batches_stay_put_on_the_cpu():
    runtime = Runtime.resolve("cpu", "bf16")
    batch = (torch.ones(2, 3, dtype=torch.long), {"m": torch.ones(2)})
    assert runtime.put(batch) is batch  # no copy on the CPU
    out = fetch({"logits": torch.ones(2, 3, dtype=torch.bfloat16)})
    assert out["logits"].dtype == torch.float32 and out["logits"].device.type == "cpu"
    with runtime.autocast():
        assert torch.nn.Linear(3, 2)(torch.ones(1, 3)).dtype == torch.bfloat16
    with runtime.autocast(runtime.cache_precision):  # the teacher's kept outputs: fp32 under bf16
        assert torch.nn.Linear(3, 2)(torch.ones(1, 3)).dtype == torch.float32
    assert runtime.describe()["precision"] == "bf16" and runtime.describe()["device"] == "cpu"


# bf16 against fp32 on the smoke job (a tiny random teacher on 24 labeled toy sentences): measured,
# the student's dev loss moved 0.05% and its accuracy by one of 24 test sentences. The bounds leave
# room for another CPU's kernels, not for a phase that stopped following the precision or the device.
DEV_LOSS_TOLERANCE = 0.01  # relative
ACCURACY_TOLERANCE = 2 / 24  # two test sentences


@pytest.mark.heavy
def test_every_phase_runs_with_the_device_given_and_in_bf16_close_to_fp32(smoke_cfg, tmp_path):
    from distil.run.pipeline import run

    runs = {}
    for name, overrides in (("default", ()), ("cpu", ("runtime.device=cpu",)),
                            ("bf16", ("runtime.device=cpu", "runtime.precision=bf16"))):
        cfg = smoke_cfg(*overrides, "schedule=d4.2")
        runs[name] = run(cfg, tmp_path / name, {}, [])
    default, cpu, bf16 = runs["default"], runs["cpu"], runs["bf16"]
    assert cpu["runtime"]["device"] == "cpu" and bf16["runtime"]["precision"] == "bf16"
    # the device is in no key: the explicit run reused the default run's teacher and targets
    assert cpu["artifacts"]["teacher"] == default["artifacts"]["teacher"] and cpu["artifacts"]["teacher_reused"]
    assert cpu["artifacts"]["targets"] == default["artifacts"]["targets"]
    assert cpu["student"]["test"] == default["student"]["test"]
    # the precision is: bf16 fine-tuned its own teacher and cached its own targets
    assert bf16["artifacts"]["teacher"] != cpu["artifacts"]["teacher"] and not bf16["artifacts"]["teacher_reused"]
    assert bf16["artifacts"]["targets"] != cpu["artifacts"]["targets"]
    fp32_stages, bf16_stages = cpu["student"]["stages"], bf16["student"]["stages"]
    assert [s["name"] for s in bf16_stages] == [s["name"] for s in fp32_stages]  # every d4.2 step ran
    for ours, theirs in zip(bf16_stages, fp32_stages, strict=True):
        assert ours["dev_loss"] == pytest.approx(theirs["dev_loss"], rel=DEV_LOSS_TOLERANCE)
    assert bf16["teacher"]["finetune"]["dev_loss"] == pytest.approx(cpu["teacher"]["finetune"]["dev_loss"],
                                                                     rel=DEV_LOSS_TOLERANCE)
    assert abs(bf16["student"]["test"]["accuracy"] - cpu["student"]["test"]["accuracy"]) <= ACCURACY_TOLERANCE + 1e-9


def test_the_training_recipe_holds_the_precision_only_when_not_fp32(smoke_cfg):
    from distil.run.plan import training_recipe

    plain, on_cpu = training_recipe(smoke_cfg()), training_recipe(smoke_cfg("runtime.device=cpu"))
    assert plain == on_cpu and "runtime" not in plain["groups"]  # fp32: the key of before runtimes
    assert training_recipe(smoke_cfg("runtime.precision=bf16"))["groups"]["runtime"] == {"precision": "bf16"}


def test_a_cells_key_holds_the_precision_but_not_the_device():
    from distil.tables.cells import cell_key

    plain = cell_key(["debug=smoke", "seed=1"])
    assert cell_key(["debug=smoke", "runtime.device=cpu", "seed=1"]) == plain
    assert cell_key(["debug=smoke", "runtime.precision=bf16", "seed=1"]) != plain


CPUINFO = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx2 avx512f {extra}\nbugs\t\t: {bug}\n"


@pytest.mark.parametrize("extra, bug, native", [
    ("avx512_bf16", "", True), ("amx_bf16 amx_tile", "", True),
    ("avx512bw avx512vl", "", False),  # AVX512 alone: oneDNN would emulate bf16, slower than fp32
    ("", "avx512_bf16", False),        # a flag name on another line is not a flag
])
def test_auto_precision_is_bf16_only_on_a_cpu_with_native_bf16_instructions(tmp_path, monkeypatch, extra, bug, native):
    from distil.common import runtime

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(CPUINFO.format(extra=extra, bug=bug))
    assert runtime.cpu_has_native_bf16(cpuinfo) is native
    assert not runtime.cpu_has_native_bf16(tmp_path / "absent")  # no /proc (not Linux): fp32
    monkeypatch.setattr(runtime, "cpu_has_native_bf16", lambda: native)
    assert Runtime.resolve("cpu", "auto").precision == ("bf16" if native else "fp32")
    assert Runtime.resolve("cpu", "fp32").precision == "fp32"  # an explicit precision is kept


@pytest.mark.parametrize("native", [True, False])
def test_the_default_job_resolves_auto_once_and_keys_what_it_chose(smoke_cfg, monkeypatch, native):
    from distil.common import runtime
    from distil.run.plan import plan_run

    monkeypatch.setattr(runtime, "cpu_has_native_bf16", lambda: native)
    assert compose_config().runtime.precision == "auto"  # the default job's
    assert smoke_cfg().runtime.precision == "fp32"  # the smoke job's numbers are every machine's
    plan = plan_run(smoke_cfg("runtime.precision=auto", "runtime.device=cpu"))
    chosen = "bf16" if native else "fp32"
    assert plan.runtime.precision == chosen and plan.runtime.describe()["precision_chosen_by"] == "auto"
    assert str(plan.runtime).endswith(f"{chosen} (runtime.precision=auto)")  # the startup line says why
    assert plan.recipe["groups"].get("runtime") == ({"precision": "bf16"} if native else None)


def test_the_recorded_recipe_pins_fp32_and_leaves_every_cells_key_as_it_was():
    from distil.tables.cells import RECORDED_RECIPE, cell_key

    assert "runtime.precision=fp32" in RECORDED_RECIPE
    # fp32 is the schema's default, so pinning it adds nothing to a key (the recorded cells stay found)
    assert cell_key(["debug=smoke", "runtime.precision=fp32", "seed=1"]) == cell_key(["debug=smoke", "seed=1"])


def test_a_checkpoint_written_on_a_gpu_restores_its_cpu_state_here(tmp_path):
    """A GPU run saves its CUDA generators beside the CPU's: on a machine without them the CPU state
    and the batches' order still come back exactly."""
    import numpy as np

    from distil.training.checkpoint import Checkpoint, restore_rng_states, rng_states

    torch.manual_seed(5)
    rng = np.random.default_rng(3)
    saved = {**rng_states(rng), "cuda_rng": [torch.zeros(16, dtype=torch.uint8)]}  # as a one-GPU run writes
    Checkpoint(tmp_path / "c.pt").save(saved)
    expected = (torch.rand(3), rng.integers(0, 100, 3))
    torch.manual_seed(99)
    rng = np.random.default_rng(0)
    restore_rng_states(Checkpoint(tmp_path / "c.pt").load(), rng)
    assert torch.equal(torch.rand(3), expected[0]) and (rng.integers(0, 100, 3) == expected[1]).all()


def test_fp32_on_a_gpu_turns_tf32_off():
    """cuDNN's LSTMs round fp32 to TF32 by default: a GPU fp32 run would then differ from the CPU's."""
    cudnn = torch.backends.cudnn
    backends = (cudnn.rnn, cudnn.conv)
    before = [backend.fp32_precision for backend in backends]
    try:
        for backend in backends:
            backend.fp32_precision = "tf32"
        with use(Runtime(torch.device("cuda"), "fp32")):  # built directly: this machine may have no GPU
            assert cudnn.rnn.fp32_precision == cudnn.conv.fp32_precision == "ieee"
    finally:  # torch's settings objects are not plain attributes: set back by hand
        for backend, value in zip(backends, before, strict=True):
            backend.fp32_precision = value
