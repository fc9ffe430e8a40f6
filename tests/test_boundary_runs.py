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


# --- fields of any array kind (issue 29) ---------------------------------------------------------------------

ARRAYS = ROOT / "fixtures" / "arraykinds.toml"
ARRAY_FAULTS = {
    # fault: (invariant, boundary, field, a phrase of the message)
    "experts_at_true_offsets": ("B6", "arraykinds.collate:pack_experts", "returns", "should hold a pad"),
    "ids_padded_left": ("B6", "arraykinds.collate:pad_ids", "returns", "should hold a true position"),
    "routed_left_unpadded": ("B1", "arraykinds.collate:collate", "returns.non_tensor_batch.routed",
                             "P_i disagrees with `returns.cu_seqlens`"),
}


def array_job(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "fixtures"), str(ROOT)])
    environ.update(env)
    proc = subprocess.run([sys.executable, "-m", "arraykinds.job", "out.json"], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=300)
    out = tmp_path / "out.json"
    return proc, json.loads(out.read_text()) if out.exists() else None


def test_numpy_arrays_python_lists_and_a_nested_batch_object_catch_each_bug_and_are_clean_on_the_fix(tmp_path):
    # numpy routed experts packed into a numpy stream, pydantic episodes padded as Python lists of ints, and a
    # DataProto-like batch (a TensorDict-like `.batch`, numpy object arrays in `.non_tensor_batch`): each was
    # "could not check ...: 'numpy.ndarray' object has no attribute 'movedim'" and raise mode exited 0
    sys.path.insert(0, str(ROOT / "fixtures"))
    try:
        from arraykinds.faults import FAULTS
    finally:
        sys.path.remove(str(ROOT / "fixtures"))
    assert set(FAULTS) == set(ARRAY_FAULTS)
    proc, results = array_job(tmp_path)
    assert proc.returncode == 0 and all(r["type"] is None for r in results.values()), results  # silent without
    proc, results = array_job(tmp_path, LAYOUTCHECK="raise", LAYOUTCHECK_CONFIG=str(ARRAYS))
    assert proc.returncode == 0, proc.stderr
    assert results["clean"] == results["clean again"] == {"type": None, "invariants": []}
    for fault, (invariant, boundary, field, phrase) in ARRAY_FAULTS.items():
        got = results[fault]
        assert got["type"] == "LayoutError" and got["invariants"] == [invariant], (fault, got)
        head = got["message"].splitlines()[1]
        assert head.startswith(f"[{invariant}] {boundary} (call ") and f"field `{field}`" in head, (fault, head)
        assert phrase in head, (fault, head)
    assert "could not check" not in proc.stderr and "could not run" not in proc.stderr, proc.stderr
    assert results["experts_at_true_offsets"]["message"].splitlines()[2:4] == ["    seen:     [2, 9]",
                                                                              "    expected: [0, 0]"]
    # each fix names what to do for the spaces that met: a packed stream without CP, samples padded to P
    assert ("fix:      write each sample at its padded offset (the running sum of P_i, never of T_i)"
            in results["experts_at_true_offsets"]["message"])
    assert ("fix:      pad each sample on the right to its own P_i with the pad value, its tokens in order and flush "
            "left") in results["ids_padded_left"]["message"]


def test_a_field_no_contract_can_read_fails_raise_mode_at_exit_with_one_message_saying_what_to_write(tmp_path):
    config = tmp_path / "layoutcheck.toml"
    text = ARRAYS.read_text().replace('args."data.non_tensor_batch.routed" = "T"\n',
                                      'args."data.non_tensor_batch.routed" = "T"\nargs.data = "T"\n')
    config.write_text(text)
    proc, results = array_job(tmp_path, LAYOUTCHECK="raise", LAYOUTCHECK_CONFIG=str(config))
    assert proc.returncode == 1, proc.stderr  # was: "no layout violations; 1 check could not run", exit 0
    assert results["routed_left_unpadded"]["invariants"] == ["B1"]  # the rest of the contract is still checked
    key = 'runtime.boundaries."arraykinds.collate:collate".args.data'
    problem = (f"{key} in {config}: arraykinds.collate:collate: `args.data` should hold per-sample data")
    assert proc.stderr.count(problem) == 1, proc.stderr  # raise mode's error lists it; the summary counts it
    assert "; 1 configuration problem (below)\n" in proc.stderr
    assert ("but the call passed an `arraykinds.batch.Batch`; it holds 3 array fields: name the one meant, such as "
            "`args.data.batch.input_ids`, `args.data.batch.attention_mask`, `args.data.non_tensor_batch.routed`"
            ) in proc.stderr
    assert "1 field could not be read (configuration problem)" in proc.stderr
    assert "exit status 1: raise mode, and the run was not checked as configured" in proc.stderr
    assert "could not check" not in proc.stderr and "Traceback" not in proc.stderr
    proc, _ = array_job(tmp_path, LAYOUTCHECK="warn", LAYOUTCHECK_CONFIG=str(config))
    assert proc.returncode == 0 and proc.stderr.count("1 configuration problem: " + problem) == 1, proc.stderr


# --- row-padded batches (issue 29) ---------------------------------------------------------------------------

ROWPAD = ROOT / "fixtures" / "rowpad.toml"


def rowpad_job(tmp_path: Path, config: Path | None = None) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "fixtures"), str(ROOT)])
    if config is not None:
        environ.update(LAYOUTCHECK="raise", LAYOUTCHECK_CONFIG=str(config))
    proc = subprocess.run([sys.executable, "-m", "rowpad.job", "out.json"], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=300)
    out = tmp_path / "out.json"
    return proc, json.loads(out.read_text()) if out.exists() else None


def test_a_row_padded_batch_contract_checks_functions_that_remove_left_padding(tmp_path):
    proc, plain = rowpad_job(tmp_path)
    assert proc.returncode == 0 and all(r["type"] is None for r in plain.values()), plain  # silent without
    proc, results = rowpad_job(tmp_path, ROWPAD)
    assert proc.returncode == 0, proc.stderr
    assert results["clean"] == results["clean again"] == {"type": None, "invariants": []}  # the fix is clean
    # one roll for the whole batch: the rows with more padding keep some in front of their tokens
    got = results["one_shift_for_the_batch"]
    assert got["invariants"] == ["B1", "B6"], got
    lines = got["message"].splitlines()
    assert lines[1] == ("[B1] rowpad.strip:strip_left_padding (call 2), sample 0, field `returns.1` (space mask of "
                        "rows of T, padded right): row 0's mask is not padded right: position 0 should be a true "
                        "position (the row's 5 true positions sit first in its 12)")
    assert lines[2:4] == ["    seen:     true at 4-8", "    expected: true at 0-4"]
    assert "never one shift or width for the whole batch" in lines[5]
    b6 = lines.index(next(line for line in lines if line.startswith("[B6]")))
    assert lines[b6].endswith("row 0 is not sample 0's data from `args.input_ids` padded right: position 0 of the "
                              "row should hold a true position")
    assert lines[b6 + 1:b6 + 3] == ["    seen:     0", "    expected: 11"]
    # lengths instead of a mask: each row's true tokens are its last T_i
    got = results["cut_on_the_wrong_side"]
    assert got["invariants"] == ["B6"] and "rowpad.strip:unpad_rows (call 2), sample 0, field `returns`" in got["message"]
    assert "take each row's last T_i positions (the source is padded left)" in got["message"]


def test_rows_padded_on_the_other_side_than_the_contract_says_are_named(tmp_path):
    # the same job, its input declared right-padded: the input's mask (B1) and its pads (B6) are on the wrong
    # side, and the correct output is not blamed for the misreading
    config = tmp_path / "layoutcheck.toml"
    config.write_text(ROWPAD.read_text().replace('args.input_ids = { space = "rows T left", mask',
                                                 'args.input_ids = { space = "rows T right", mask'))
    proc, results = rowpad_job(tmp_path, config)
    assert proc.returncode == 0, proc.stderr
    got = results["clean"]
    assert got["invariants"] == ["B1", "B6"], got
    heads = [line for line in got["message"].splitlines() if line.startswith("[")]
    assert len(heads) == 2 and all("field `args." in head for head in heads), heads
    assert ("field `args.attention_mask` (space mask of rows of T, padded right): row 0's mask is not padded right"
            in heads[0])
    assert "field `args.input_ids` (space rows of T, padded right): row 0 is not padded right" in heads[1]
