"""benchmarks/gpu_check.py, the check prepared for the first GPU, runs here in its dry mode so that it does not rot.

The dry run takes the same code path on CPU tensors, with the CPU sync
detection (`syncguard`) in place of ``torch.cuda.set_sync_debug_mode``: it
must pass on the correct pipeline, and fail when layoutcheck's own code
reads a value.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def load():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return gpu_check


def test_the_dry_run_passes_with_the_debug_mode_on_and_reports_its_host_time():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run"], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "dry run on cpu" in out and "7 hooks (producer, batch-builder" in out and "tracer on, mode raise" in out
    for line in ("step, without the debug mode", "step, with hooks + tracer", "in the hooks own code",
                 "in the tracer own code", "violations 0, notes 0", "PASS: no synchronising call"):
        assert line in out, out
    assert "checked per step: 1 rollouts, 4 replay tensors, 4 micro-batches" in out


def test_without_a_gpu_it_says_so_unless_dry():
    if torch.cuda.is_available():  # this suite never has one; on a GPU machine the check itself runs
        return
    assert load().main([]) == 2


def test_the_dry_run_fails_when_the_tracer_reads_a_value(monkeypatch, capsys):
    from layoutcheck.runtime.tracing import op_rules
    from layoutcheck.runtime.tracing.tags import clear_tags

    shape = op_rules._shape

    def reading(x):  # a rule that looks at the data: a sync on a GPU
        if isinstance(x, torch.Tensor) and x.numel():
            x.tolist()
        return shape(x)

    monkeypatch.setattr(op_rules, "_shape", reading)
    try:
        assert load().main(["--dry-run"]) == 1
    finally:
        clear_tags()
    out = capsys.readouterr().out
    assert "FAIL: the step raised LayoutSpecError: the tracer could not follow" in out
    assert "a layout check called Tensor.tolist" in out
