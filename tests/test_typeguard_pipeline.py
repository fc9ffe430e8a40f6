"""The reference pipeline's ``Padded`` annotations under typeguard's import hook, with each bug flag.

One subprocess (`tests/typeguard_run.py`, a fresh interpreter: the hook
instruments modules as they are imported) runs every case twice: typeguard
alone (the names are sizes) and with the debug mode's tracer (the names read
the tensors' tags). The annotations check shapes where a function takes or
returns them, so they see only the bugs that show there; the test states
which, and that every other case (and the correct run) passes them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("typeguard")


# The module's module-scoped fixture runs once: its tests all go to one xdist worker
# (`--dist loadgroup` in pyproject.toml) instead of each worker paying for it.
pytestmark = pytest.mark.xdist_group("test_typeguard_pipeline")


@pytest.fixture(scope="module")
def annotation_violations(tmp_path_factory) -> dict[str, dict[str, list[str]]]:
    out = tmp_path_factory.mktemp("typeguard") / "out.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "fixtures"), str(ROOT / "tests")])
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "typeguard_run.py"), str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


SEEN_UNTAGGED = {
    # the batch of samples cut to the shortest: its B is not the output's (sizes alone say so)
    "loss_cat_mixed_padded_lengths": ['_loss_inputs: item 0 of the return value (tuple) has B=2 (size 2 in dimension '
                                      '0), but B=1 was bound by argument "logits"'],
}


def test_typeguard_alone_sees_the_batch_that_is_not_the_outputs_shape(annotation_violations):
    for case, found in annotation_violations["untagged"].items():
        assert found == SEEN_UNTAGGED.get(case, []), case


def test_with_the_tracers_tags_the_annotations_see_geometry(annotation_violations):
    tagged = annotation_violations["tagged"]
    assert tagged.pop("loss_cat_mixed_padded_lengths") == SEEN_UNTAGGED["loss_cat_mixed_padded_lengths"]
    # the loss mask laid out with the rollout's max: its L is not the micro-batch's (from its tag)
    repad = tagged.pop("loss_repad_to_rollout_max")
    assert len(repad) == 8 and all(v.startswith("_loss_inputs: item 1 of the return value (tuple) has ") for v in repad)
    assert all(", but L is 2048 for micro-batch (samples " in v for v in repad)  # round_up(4096, 128) / cp
    # a micro-batch laid out with its first sample's P (all-gather CP): a sample's own P is not its length
    mixed = tagged.pop("mixed_padded_lengths@allgather")
    assert mixed and all(v.startswith("lay_out: item 1 of value assigned to padded (list) has ") for v in mixed)
    assert any("positions in dimension 0, but P is 256 for sample 7 `tokens`" in v for v in mixed)
    # the rest: the bug is in a value no annotated boundary holds (a wrong P itself, an int argument, a
    # stream length, a truncation to the owner's stale P): the tracer's and the hooks' business
    assert tagged == {case: [] for case in tagged}
