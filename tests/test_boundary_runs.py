"""A trainer with none of Miles's names, checked through configuration alone.

``fixtures/packthd`` is a packed-THD data path of its own (episodes, a plan
of padded lengths by a list of factors, a packer, a ``zigzag(t, length,
pad_value)`` CP helper, coordinates from its own ``mesh``), and
``fixtures/packthd.toml`` describes its functions as boundary contracts. The
job (``python -m packthd.job``) runs a few steps on two context ranks, once
clean and once per planted fault; it never mentions layoutcheck. Each fault
is silent without the debug mode and fails its step with ``LAYOUTCHECK=raise``,
with a message that names the boundary, the sample, the field, its space, what
was seen and what was expected.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "fixtures" / "packthd.toml"

CAUGHT = {
    # fault: (invariant, boundary, field, space, a phrase of the problem)
    "rollout_wide_padding": ("B2", "packthd.collate:plan", "returns", "len P", "more than one alignment unit above it"),
    "unit_dropped": ("B3", "packthd.collate:plan", "returns", "len P", "unit `tp * 8` = 16 does not divide"),
    "partner_unsliced": ("B6", "packthd.collate:pack", "returns.logp", "P, packed, CP-local (zigzag)",
                         "is not its data from `args.episodes.*.logp`"),
    "cut_at_padded_offsets": ("B6", "packthd.collate:pack", "returns.ids", "P, packed, CP-local (zigzag)",
                              "should hold a true position"),
    "order_changed": ("B5", "packthd.collate:pack", "returns.cu_seqlens", "cu P, packed",
                      "samples come back in another order"),
}


def job(tmp_path: Path, *extra: str, **env: str) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "fixtures"), str(ROOT)])  # ROOT: the layoutcheck under test
    environ.update(env)
    proc = subprocess.run([sys.executable, "-m", "packthd.job", "out.json", *extra], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=300)
    out = tmp_path / "out.json"
    return proc, json.loads(out.read_text()) if out.exists() else None


def test_every_planted_fault_has_a_case():
    sys.path.insert(0, str(ROOT / "fixtures"))
    try:
        from packthd.faults import FAULTS
    finally:
        sys.path.remove(str(ROOT / "fixtures"))
    assert set(FAULTS) == set(CAUGHT)


def test_without_the_debug_mode_every_fault_is_silent(tmp_path):
    proc, results = job(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert all(r["type"] is None for r in results.values()), results


def test_raise_mode_fails_each_faulty_step_naming_boundary_sample_field_space_seen_and_expected(tmp_path):
    proc, results = job(tmp_path, LAYOUTCHECK="raise", LAYOUTCHECK_CONFIG=str(CONFIG))
    assert proc.returncode == 0, proc.stderr
    assert results["clean"] == results["clean again"] == {"type": None, "invariants": []}
    for fault, (invariant, boundary, field, space, phrase) in CAUGHT.items():
        got = results[fault]
        assert got["type"] == "LayoutError" and invariant in got["invariants"], (fault, got)
        lines = got["message"].splitlines()
        head = next(line for line in lines if line.startswith(f"[{invariant}] "))
        assert head.startswith(f"[{invariant}] {boundary} (call "), (fault, head)
        assert ", sample " in head and f"field `{field}` (space {space})" in head and phrase in head, (fault, head)
        at = lines.index(head)
        assert lines[at + 1].startswith("    seen:") and lines[at + 2].startswith("    expected:"), fault
        assert any(line.startswith("    fix:") for line in lines[at:at + 6]), fault
    assert "layoutcheck: " in proc.stderr and "boundary calls" in proc.stderr  # the exit summary


def test_warn_mode_finishes_every_step_and_says_what_it_saw(tmp_path):
    proc, results = job(tmp_path, LAYOUTCHECK="warn", LAYOUTCHECK_CONFIG=str(CONFIG))
    assert proc.returncode == 0, proc.stderr
    assert all(r["type"] is None for r in results.values()), results
    for invariant in {c[0] for c in CAUGHT.values()}:
        assert f"LayoutWarning: " in proc.stderr and f"[{invariant}] " in proc.stderr


def test_a_cp_helper_configured_as_a_tracer_role_it_cannot_fill_is_refused(tmp_path):
    # issue 19: `zigzag(t, length, pad_value)` as the cp-slicer installed without an error and raised false
    # alarms on a correct run ("called with the thd rule in a bshd run"); it is refused at install now: a
    # configuration mistake, which stops the run before its first step in every mode (issue 27).
    config = tmp_path / "layoutcheck.toml"
    config.write_text('[runtime]\nlayout = "bshd"\n\n[runtime.hooks]\ncp-slicer = ["packthd.cp:zigzag"]\n')
    for mode in ("raise", "warn"):
        proc, results = job(tmp_path, LAYOUTCHECK=mode, LAYOUTCHECK_CONFIG=str(config), LAYOUTCHECK_TRACE="1")
        assert proc.returncode == 2 and results is None and "Traceback" not in proc.stderr, proc.stderr
        assert (f"layoutcheck: configuration error: runtime.hooks.cp-slicer in {config}: cannot hook "
                "`packthd.cp:zigzag` as the cp-slicer (a tracer role): it has no parameter `qkv_format`") in proc.stderr
        assert "found (t, length, pad_value)" in proc.stderr


def test_a_contract_naming_a_parameter_the_function_lacks_is_refused(tmp_path):
    config = tmp_path / "layoutcheck.toml"
    config.write_text(CONFIG.read_text().replace('args.length = "len P"', 'args.max_seq_len = "len P"'))
    for mode in ("raise", "record"):
        proc, results = job(tmp_path, LAYOUTCHECK=mode, LAYOUTCHECK_CONFIG=str(config))
        assert proc.returncode == 2 and results is None and "Traceback" not in proc.stderr, proc.stderr
        assert (f'runtime.boundaries."packthd.cp:zigzag" in {config}: cannot hook `packthd.cp:zigzag` under its '
                "boundary contract: `args.max_seq_len` reads the parameter `max_seq_len`, which it does not have") \
            in proc.stderr


@pytest.mark.parametrize("ctx", ["1", "4"])
def test_other_context_sizes_stay_clean_and_still_catch(tmp_path, ctx):
    proc, results = job(tmp_path, "--ctx", ctx, "--tensor", "1", LAYOUTCHECK="raise", LAYOUTCHECK_CONFIG=str(CONFIG))
    assert proc.returncode == 0, proc.stderr
    assert results["clean"]["type"] is None and results["clean again"]["type"] is None, results["clean"]
    assert results["rollout_wide_padding"]["invariants"] == ["B2"]
    assert results["cut_at_padded_offsets"]["type"] == "LayoutError"
