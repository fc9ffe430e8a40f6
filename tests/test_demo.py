"""``layoutcheck demo`` finds rollout-global padding and shows what it costs.

The expected figures are recomputed here from the same synthetic rollout
through `layoutcheck.geometry`, never copied from the output.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch  # noqa: F401 - the [test] extra requires it; fail here, not skip, without it
from minitrainer.rollout import long_tailed_lengths

from layoutcheck import demo, geometry


def run_demo(capsys, *argv: str) -> tuple[int, str]:
    code = demo.main(["--no-color", *argv])
    return code, capsys.readouterr().out


def sections(out: str) -> tuple[str, str]:
    buggy, _, correct = out.partition("\n2. correct")
    return buggy, correct


def table_row(text: str, label: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.strip().startswith(label))
    return re.split(r"\s{3,}", line.strip())


def test_default_demo_finds_rollout_global_padding(capsys):
    code, out = run_demo(capsys, "--samples", "12", "--seed", "1")
    assert code == 0
    buggy, correct = sections(out)
    lengths = long_tailed_lengths(12, seed=1)
    global_p = geometry.padded_length(max(lengths), 128)
    own = [geometry.padded_length(t, 128) for t in lengths]

    # violations: O3, naming a sample, with the formatted message
    assert "FOUND" in buggy and "(O3 x" in buggy
    named = {int(s) for s in re.findall(r"\[O3\] get_rollout_data, sample (\d+), field `max_seq_lens`", buggy)}
    assert named and all(global_p >= lengths[i] + 128 for i in named)
    assert "rollout-global padding" in buggy and "... and " in buggy  # the rest are counted, not printed

    # inflation: total and worst sample, from the actual data
    total = table_row(buggy, "all samples")
    padded = global_p * len(lengths)
    assert total[1:] == [f"{sum(lengths):,}", f"{padded:,}", f"{padded / sum(lengths):.1f}x"]
    assert float(total[3].rstrip("x")) > 1
    worst = min(range(len(lengths)), key=lambda i: lengths[i])
    assert table_row(buggy, "worst sample")[0] == f"worst sample (#{worst})"
    assert table_row(buggy, "worst sample")[3] == f"{global_p / lengths[worst]:.1f}x"
    assert table_row(buggy, "through the MoE MLP")[2] == f"{global_p * len(lengths):,}"  # 2cp divides P: P each

    # what the bug costs, from the geometry model, and the run agrees with it
    predicted = sum(geometry.rollout_global_padded_lengths(lengths, 128))
    assert predicted == padded
    assert (f"The geometry model predicts {predicted:,} padded tokens for rollout-global padding, "
            f"{predicted / sum(own):.1f}x the {sum(own):,} of per-sample padding.") in buggy

    # the correct run: no violations, tight padding
    assert "OK  no layout violations" in correct and "[O" not in correct
    assert table_row(correct, "all samples")[2] == f"{sum(own):,}"
    assert "layoutcheck caught the bug; the correct run is clean." in out


@pytest.mark.parametrize(("bug", "invariant"), [("mixed_padded_lengths", "G1"), ("replay_thd_pad_multiplier", "G5")])
def test_demo_runs_other_bugs(capsys, bug, invariant):
    code, out = run_demo(capsys, "--samples", "6", "--bug", bug)
    buggy, correct = sections(out)
    assert code == 0 and f"[{invariant}]" in buggy and f"with the bug `{bug}`" in buggy
    assert "no layout violations" in correct


def test_demo_runs_the_bucket_bug(capsys):
    # wrong_bucket shows only where a micro-batch's longest P is a bucket: the default rollout has some.
    code, out = run_demo(capsys, "--bug", "wrong_bucket")
    buggy, correct = sections(out)
    assert code == 0 and "[G6] get_batch, micro-batch" in buggy and "not the smallest that fits" in buggy
    assert "no layout violations" in correct


def test_demo_self_check_fails_when_the_cost_disagrees_with_the_geometry(capsys, monkeypatch):
    real_run = demo.run

    def padded_less(title, ref, settings):
        result = real_run(title, ref, settings)
        result.padded = [p - 128 for p in result.padded]
        return result

    monkeypatch.setattr(demo, "run", padded_less)
    code, out = run_demo(capsys, "--samples", "4")
    assert code == 1 and "(the run DOES NOT match it)" in out
    assert "Self-check failed: layoutcheck disagrees with the geometry model on what the bug costs" in out


def test_demo_without_the_pipeline_exits_2(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(demo, "fixtures_dir", lambda: tmp_path)
    assert demo.main([]) == 2
    assert "source checkout" in capsys.readouterr().err


def test_demo_self_check_fails_when_nothing_is_caught(capsys, monkeypatch):
    real_run = demo.run

    def blind_run(title, ref, settings):
        result = real_run(title, ref, settings)
        result.violations = []
        return result

    monkeypatch.setattr(demo, "run", blind_run)
    code, out = run_demo(capsys, "--samples", "4")
    assert code == 1 and "Self-check failed: layoutcheck missed the bug" in out


def test_python_m_layoutcheck_demo():
    proc = subprocess.run(
        [sys.executable, "-m", "layoutcheck.demo", "--samples", "4", "--no-color"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "[O3]" in proc.stdout and "\033[" not in proc.stdout
