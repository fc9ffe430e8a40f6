"""The ``verl`` preset on verl's real Megatron data path: its class-3 bug caught in 0.7.0, 0.9.1 clean.

verl is installed at pinned versions from PyPI (`realcode.verl_tree`: the
wheel's ``verl/models/mcore/util.py`` and ``verl/utils/seqlen_balancing.py``
unchanged, Megatron's parallel state stubbed), and `verl_job` runs its
micro-batching, ``preprocess_packed_seqs`` and ``postprocess_packed_seqs``
on two processes that form one context-parallel group (gloo on loopback),
with cp = 2 and tp = 2. The configuration is one line, ``preset = "verl"``;
the job never mentions layoutcheck.

verl 0.7.0 cuts a sample's true tokens (``input_ids[i, attention_mask[i]]``)
at offsets computed from its padded length (DESIGN.md section 10, class 3):
a sample of 3 tokens (padded to 8, chunks of 2) leaves one token for cp
rank 1's first chunk, which verl broadcasts over the chunk, so a pad position
holds a token, with no error (shorter ones crash). 0.9.1 clamps the chunk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from isolation import loopback_env
from realcode import verl_tree

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "tests" / "verl_job.py"


def torchrun(tmp_path: Path, version: str, **env: str) -> list[dict]:
    tree = verl_tree(version, tmp_path)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    environ.update(loopback_env(), PYTHONPATH=os.pathsep.join([str(tree), str(ROOT / "tests")]), **env)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--rdzv-backend=c10d",
         "--rdzv-endpoint=127.0.0.1:0", "--nproc-per-node=2", str(JOB), "out"],
        cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads((tmp_path / f"out.{r}.json").read_text()) for r in range(2)]


@pytest.fixture
def preset(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "layoutcheck.toml"
    config.write_text('[runtime]\npreset = "verl"\n')
    return {"LAYOUTCHECK": "raise", "LAYOUTCHECK_CONFIG": str(config)}


def test_the_bug_is_real_and_silent_without_the_debug_mode(tmp_path):
    old = torchrun(tmp_path / "old", "0.7.0")
    new = torchrun(tmp_path / "new", "0.9.1")
    for rank in range(2):
        assert old[rank]["step"]["type"] is None and new[rank]["step"]["type"] is None
        assert old[rank]["session"] is None  # nothing checked
    assert old[0]["step"]["streams"] == new[0]["step"]["streams"]
    # cp rank 1: 0.7.0 puts a token where 0.9.1 (and the layout) has a pad, and unpacking hides it
    assert old[1]["step"]["streams"] != new[1]["step"]["streams"]
    assert old[1]["step"]["roundtrip"] and new[1]["step"]["roundtrip"]


def test_verl_0_7_0_fails_its_step_on_the_rank_whose_layout_is_wrong(tmp_path, preset):
    ranks = torchrun(tmp_path, "0.7.0", **preset)
    step = ranks[1]["step"]
    assert step["type"] == "LayoutError" and step["invariants"] == ["B6"], step
    head = step["message"].splitlines()[1]
    assert head.startswith("[B6] verl.models.mcore.util:preprocess_packed_seqs (call 1), sample 0, field `returns.0` "
                           "(space P, packed, CP-local (zigzag)): sample 0's part is not its data from "
                           "`args.input_ids`"), head
    assert "should hold a pad" in head
    assert "    seen:     " in step["message"] and "    expected: 0" in step["message"]
    assert "T=3, P=8, cp=2, r=1" in step["message"]
    assert ranks[0]["step"]["type"] == "peer failed" and ranks[0]["session"]["violations"] == 0
    assert ranks[1]["session"]["hooks"] == [
        "boundary: verl.models.mcore.util:postprocess_packed_seqs",
        "boundary: verl.models.mcore.util:preprocess_packed_seqs",
        "boundary: verl.utils.seqlen_balancing:rearrange_micro_batches",
    ]


def test_verl_0_9_1_is_clean_on_every_rank(tmp_path, preset):
    for rank in torchrun(tmp_path, "0.9.1", **preset):
        assert rank["step"]["type"] is None and rank["step"]["roundtrip"], rank["step"]
        assert rank["session"]["violations"] == 0 and rank["session"]["notes"] == []
        assert len(rank["session"]["hooks"]) == 3
