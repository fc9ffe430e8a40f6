"""A boundary contract's spaces become the tracer's tags: a trainer with none of Miles's names, checked by configuration.

The trainer (written here, in a folder of the test's own): ``collate`` turns
episodes into next-token labels and loss weights; ``score`` (a consumer, run
inside the tracer as the ``loss-function`` role runs any function) weights
the labels. The configuration says what ``collate`` returns, in layout
spaces; nothing else tells layoutcheck what the tensors are. A consumer that
cuts the weights at the wrong end (verl 2d6c6dbb3's shape) is caught at its
op with its line; the right cut is silent; and without the tracer, the
boundary's own checks see nothing wrong (every length is right).
"""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from layoutcheck.runtime import activation
from layoutcheck.runtime.tracing.tags import clear_tags, geometry_of

TRAINER = '''
import torch


def collate(episodes, prompt_lengths):
    labels = [ids[1:] for ids in episodes]              # next-token targets: T - 1 long
    weights = [torch.cat([torch.zeros(p), torch.ones(ids.numel() - p)]) for ids, p in zip(episodes, prompt_lengths)]
    return {"labels": labels, "weights": weights}


def score(batch, cut):
    total = 0
    for labels, weights in zip(batch["labels"], batch["weights"]):
        total = total + (labels * weights[cut]).sum()   # the op that pairs them
    return total
'''

CONFIG = '''
[runtime]
mode = "record"
summary = false
tracer = {tracer}

[runtime.hooks]
loss-function = ["{module}:score"]

[runtime.boundaries."{module}:collate"]
args.episodes = "T"
returns.labels = "T +1"
returns.weights = "T"
'''


@pytest.fixture
def trainer(tmp_path, request):
    name = f"boundary_trainer_{request.node.name.replace('[', '_').replace(']', '').replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(TRAINER))
    sys.path.insert(0, str(tmp_path))
    module = importlib.import_module(name)

    def session(tracer: bool = True) -> activation.Session:
        (tmp_path / "layoutcheck.toml").write_text(CONFIG.format(module=name, tracer=str(tracer).lower()))
        return activation.activate(config=tmp_path / "layoutcheck.toml", environ={})

    try:
        yield module, session
    finally:
        activation.deactivate()
        clear_tags()
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


def episodes():
    import torch

    return [torch.arange(1, 301), torch.arange(1, 131)], [75, 32]


def test_the_contracts_spaces_are_the_tracers_tags(trainer):
    module, session = trainer
    traced = session()
    batch = module.collate(*episodes())
    labels, weights = (geometry_of(t) for t in (batch["labels"][1], batch["weights"][1]))
    assert (labels.sample, labels.total, labels.shift, labels.field) == (1, 130, 1, "returns.labels")
    assert (weights.sample, weights.total, weights.shift) == (1, 130, 0)
    assert traced.violations == [] and traced.notes == []


def test_a_consumer_that_pairs_them_at_the_wrong_end_is_caught_at_its_line(trainer):
    module, session = trainer
    traced = session()
    batch = module.collate(*episodes())
    wrong = float(module.score(batch, slice(None, -1)))
    found = traced.violations
    assert {v.invariant for v in found} == {"S3"} and {v.sample for v in found} == {0, 1}
    assert found[0].where.startswith("Tensor.mul at ") and f"{module.__name__}.py:14 in score" in found[0].where
    assert "shift +1 vs +0" in found[0].problem
    count = len(found)
    right = float(module.score(batch, slice(1, None)))
    assert len(traced.violations) == count and traced.notes == []
    assert wrong != right  # the symptom: one prompt token weighted, the last answer token not


def test_without_the_tracer_the_boundary_checks_see_nothing(trainer):
    module, session = trainer
    checks = session(tracer=False)
    module.score(module.collate(*episodes()), slice(None, -1))
    assert checks.violations == [] and checks.notes == [] and checks.checker.checked["boundary calls"] == 1
