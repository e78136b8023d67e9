"""Wu et al. §3.1, Fig. 1c on sentence pairs: a student that reads the two sentences apart is
distilled on each sentence against the teacher's vector of that sentence alone, while the
logits stay those of the joined pair (the teacher is a pair classifier)."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from distil.data.batching import model_inputs
from distil.run.pipeline import prepare_data, run
from distil.run.schedule import StudentSplit
from distil.store.artifacts import Artifact
from distil.students import build_student
from distil.tasks import make_task
from distil.teacher import load_finetuned, open_targets
from distil.training.losses import weighted_loss
from tests.conftest import compose_config

PAIR_RUN = ("debug=smoke", "+experiment=smoke-pair", "schedule=sra", "trainer.epochs=1", "teacher.shard_size=10")


def fp16_of(cached: torch.Tensor, exact: torch.Tensor) -> bool:
    """Whether `cached` is `exact` rounded to fp16: within half an fp16 step of each value
    (plus 5e-5 for a batched run's padding against this unbatched one). The tiny teacher's
    [CLS] vectors of related texts differ by about one fp16 step, so a looser tolerance
    could not tell sentence a alone from the joined pair."""
    exponent = torch.floor(torch.log2(exact.abs().clamp(min=2.0**-14)))
    return bool(((cached - exact).abs() <= 2.0 ** (exponent - 11) + 5e-5).all())


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def pair_run(tmp_path_factory, cache_dir, student):
    """One in-process run of the pipeline on the shipped pairs: (cfg, metrics)."""
    outputs = tmp_path_factory.mktemp(f"run-{student}")
    cfg = compose_config(*PAIR_RUN, f"student={student}", f"paths.outputs={outputs}", f"paths.cache={cache_dir}")
    return cfg, run(cfg, outputs / "run", {}, [])


@pytest.fixture(scope="module")
def apart_run(tmp_path_factory, cache_dir):
    return pair_run(tmp_path_factory, cache_dir, "sra")


@pytest.fixture(scope="module")
def joint_run(tmp_path_factory, cache_dir, apart_run):
    return pair_run(tmp_path_factory, cache_dir, "bilstm")


def cached(cache_dir, kind, key) -> Artifact:
    manifest = json.loads((cache_dir / kind / key / "manifest.json").read_text())
    return Artifact(key, cache_dir / kind / key, True, manifest.get("info", {}))


def teacher_of(cfg, metrics, cache_dir):
    task = make_task(cfg.dataset)
    model, tokenizer = load_finetuned(cached(cache_dir, "teachers", metrics["artifacts"]["teacher"]).path, task)
    return task, model.eval(), tokenizer


@torch.no_grad()
def teacher_alone(model, ids, layer):
    """The teacher on one sequence, unbatched: (logits [C], layer `layer` at [CLS] [H])."""
    out = model(input_ids=torch.as_tensor(np.asarray(ids), dtype=torch.long)[None], output_hidden_states=True)
    return out.logits[0], out.hidden_states[layer][0, 0]


def test_pair_read_apart_caches_each_sentence_alone(apart_run, cache_dir):
    cfg, metrics = apart_run
    task, model, _ = teacher_of(cfg, metrics, cache_dir)
    _, prepared = prepare_data(cfg, task)
    view = open_targets(cached(cache_dir, "targets", metrics["artifacts"]["targets"]))["transfer"]
    split, layer = prepared["transfer"], cfg.teacher.layer
    rows = [0, 9, 10, 35]  # across shards of 10
    hidden, logits = view.hidden(rows), view.logits(rows)
    assert hidden.shape == (len(rows), 2, cfg.teacher.random_init.hidden_size)
    for k, row in enumerate(rows):
        joint_logits, joint_cls = teacher_alone(model, split.ids[row], layer)
        _, cls_a = teacher_alone(model, split.pair.first[row], layer)
        _, cls_b = teacher_alone(model, split.pair.second[row], layer)
        assert fp16_of(hidden[k, 0], cls_a)  # hidden_states[layer][0] of sentence a alone
        assert fp16_of(hidden[k, 1], cls_b)
        assert not fp16_of(hidden[k, 0], joint_cls)  # the check can tell them apart
        assert fp16_of(logits[k], joint_logits)  # logits: still the joined pair's


def test_joint_student_still_caches_the_joint_cls_in_its_own_cache(apart_run, joint_run, cache_dir):
    cfg, metrics = joint_run
    assert metrics["artifacts"]["targets"] != apart_run[1]["artifacts"]["targets"]  # never mixed
    assert metrics["artifacts"]["teacher"] == apart_run[1]["artifacts"]["teacher"]
    task, model, _ = teacher_of(cfg, metrics, cache_dir)
    _, prepared = prepare_data(cfg, task)
    joint = open_targets(cached(cache_dir, "targets", metrics["artifacts"]["targets"]))["dev"]
    apart = open_targets(cached(cache_dir, "targets", apart_run[1]["artifacts"]["targets"]))["dev"]
    rows = np.arange(len(prepared["dev"]))
    assert joint.hidden(rows).shape == (len(rows), cfg.teacher.random_init.hidden_size)
    assert torch.equal(joint.all_logits(), apart.all_logits())  # the same teacher outputs
    for row in (0, 7):
        _, joint_cls = teacher_alone(model, prepared["dev"].ids[row], cfg.teacher.layer)
        assert fp16_of(joint.hidden([row])[0], joint_cls)


def with_sentence_b_of(split, row, other, task, tokenizer, cfg, names):
    """The prepared split with the second sentence of `row` replaced by that of `other`."""
    texts = split.examples["text_pair"][:]
    texts[row] = texts[other]
    changed = split.examples.remove_columns("text_pair").add_column("text_pair", texts)
    return task.prepare(split.name, tokenizer, changed, cfg.teacher.max_length, names)


@pytest.mark.parametrize("student", ["sra", "siamese"])
def test_changing_sentence_b_changes_the_representation_loss(apart_run, cache_dir, student):
    """Through the real cache, StudentSplit.batch and the student: sentence b is distilled too."""
    cfg, metrics = apart_run
    task, _, tokenizer = teacher_of(cfg, metrics, cache_dir)
    data, prepared = prepare_data(cfg, task)
    view = open_targets(cached(cache_dir, "targets", metrics["artifacts"]["targets"]))["dev"]
    dev, width = prepared["dev"], cfg.teacher.random_init.hidden_size
    student_cfg = compose_config(*PAIR_RUN, f"student={student}").student
    torch.manual_seed(0)
    model = build_student(student_cfg, len(tokenizer), data.num_labels, task, width, representation_head=True).eval()

    def loss(split):
        inputs, targets = StudentSplit(split.pair, split.labels, task.has_gold(split.labels), view).batch([0], 0)
        out = model(*inputs)
        assert out["representation"].shape == targets.teacher_hidden.shape == (1, 2, width)
        return weighted_loss({"repr_cos": 1.0}, out, targets).item(), out["representation"][0]

    changed = with_sentence_b_of(dev, 0, 1, task, tokenizer, cfg, data.label_names)
    assert changed.pair.second[0].tolist() != dev.pair.second[0].tolist()
    (before, rep_before), (after, rep_after) = loss(dev), loss(changed)
    assert abs(after - before) > 1e-4
    assert torch.allclose(rep_before[0], rep_after[0])  # sentence a's vector does not read b


def test_siamese_representation_head_projects_each_sentence():
    """gelu(W h_k + b) for each sentence k of the pair (Mukherjee & Awadallah eq. 6 per sentence)."""
    cfg = compose_config(*PAIR_RUN, "student=siamese").student
    task = make_task(compose_config(*PAIR_RUN).dataset)
    torch.manual_seed(0)
    model = build_student(cfg, 30, 2, task, 12, representation_head=True).eval()
    inputs = model_inputs([([5, 6, 7], [8, 9]), ([10, 11], [12, 13, 14, 15])])
    representation = model(*inputs)["representation"]
    assert representation.shape == (2, 2, 12)
    for side, (ids, mask) in enumerate((inputs[:2], inputs[2:])):
        _, last = model.student.encoder(ids, mask)
        assert torch.allclose(representation[:, side], F.gelu(model.projection(last)), atol=1e-6)
