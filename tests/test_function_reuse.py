"""A one-file run reuses the facts of its file's unchanged leading functions, and answers as a fresh run.

`layoutcheck.model.reuse`: where the text of a file up to the end of a
module-level ``def`` is what the file's previous one-file run extracted, that
function's facts are taken from the record that run left, not walked again.
The facts must be exactly those of a fresh extraction, and a staged run must
print what ``--no-cache`` prints, for edits that move the lines below them,
that keep every line where it was, that change what a function tells callers
in another file, and that only append. Each test also checks that functions
were in fact reused, so no comparison is of two fresh walks.
"""

from __future__ import annotations

import ast
import contextlib
import marshal
import shutil
from pathlib import Path

import pytest

from layoutcheck.lint.runner import run
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.extract import extract
from layoutcheck.model.facts import cache_data, ensure_calls
from layoutcheck.model.reuse import FunctionMemo

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "minitrainer"


def _facts(source: str, memo: FunctionMemo | None = None) -> tuple:
    """The facts of ``source`` as the cache writes them, every call decoded."""
    facts = extract(source, LintSettings(), memo)
    ensure_calls(facts)
    data = cache_data(facts)
    return data["core"], marshal.loads(data["calls"]), data["names"]


def _remembered(source: str) -> FunctionMemo:
    """The records a one-file run of ``source`` leaves, read back as the next run reads them."""
    memo = FunctionMemo()
    extract(source, LintSettings(), memo)
    entry = memo.entry()
    assert entry is not None
    return FunctionMemo(marshal.loads(marshal.dumps(entry)))


def _units(source: str) -> list[ast.AST]:
    """What a record is kept for: the module's ``def`` s and its classes' methods."""
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    out: list[ast.AST] = []
    for statement in ast.parse(source).body:
        if isinstance(statement, defs):
            out.append(statement)
        elif isinstance(statement, ast.ClassDef):
            out.extend(s for s in statement.body if isinstance(s, defs))
    return out


def _middle_def(source: str) -> ast.FunctionDef:
    defs = [s for s in ast.parse(source).body if isinstance(s, ast.FunctionDef)]
    assert len(defs) >= 3
    return defs[len(defs) // 2]


def _insert_line(source: str) -> str:
    """A statement added at the top of the middle function: every line below moves down one."""
    first = _middle_def(source).body[0]
    lines = source.split("\n")
    lines.insert(first.lineno - 1, " " * first.col_offset + "_added = len([])")
    return "\n".join(lines)


def _same_lines(source: str) -> str:
    """The middle function's first statement gains a call on its own line: no line moves."""
    first = _middle_def(source).body[0]
    lines = source.split("\n")
    lines[first.lineno - 1] += "; _added = len([])"
    return "\n".join(lines)


def _append(source: str) -> str:
    return source + "\n# staged change\n"


@pytest.mark.parametrize("name", ["data.py", "loss.py", "rollout.py", "actor.py", "model.py", "parallel.py"])
@pytest.mark.parametrize("edit", [_insert_line, _same_lines, _append], ids=["insert", "same-lines", "append"])
def test_reused_facts_are_a_fresh_extractions(name: str, edit) -> None:
    source = (FIXTURE / name).read_text()
    memo = _remembered(source)
    edited = edit(source)
    assert _facts(edited, memo) == _facts(edited), f"{name}: reused facts differ from a fresh walk's"
    assert memo.reused > 0, f"{name}: no function was reused, so nothing was compared"
    if edit is _append:
        assert memo.reused == len(_units(source)) and memo.walked == 0


def test_an_edit_that_keeps_every_offset_is_seen() -> None:
    # `max(units)` to `min(units)`: the same length, the same lines, the same offsets after it; LC106's fact goes.
    source = (FIXTURE / "data.py").read_text()
    assert source.count("return max(units)") == 1
    edited = source.replace("return max(units)", "return min(units)")
    memo = _remembered(source)
    assert _facts(edited, memo) == _facts(edited) != _facts(source)
    assert memo.reused > 0 and memo.walked > 0


def test_functions_after_an_edit_are_walked_again() -> None:
    source = (FIXTURE / "data.py").read_text()
    memo = _remembered(source)
    _facts(_insert_line(source), memo)
    middle = _middle_def(source)
    units = _units(source)
    before = sum(1 for s in units if s.end_lineno < middle.lineno)
    assert before > 0 and memo.reused == before and memo.walked == len(units) - before


def test_a_file_whose_calls_are_rewritten_reuses_nothing() -> None:
    # cp_utils.py's tuple returns are read by element (`calls.rewrite_calls`): a rewrite reads the whole
    # module, so no function's facts stand on the text before its end.
    source = (FIXTURE / "cp_utils.py").read_text()
    memo = FunctionMemo()
    extract(source, LintSettings(), memo)
    assert memo.entry() is None or not memo.records
    again = FunctionMemo(memo.entry())
    assert _facts(_append(source), again) == _facts(_append(source))
    assert again.reused == 0


def test_records_of_another_text_before_the_function_are_not_used() -> None:
    source = (FIXTURE / "data.py").read_text()
    memo = _remembered(source)
    edited = "import os\n" + source  # every function moves, and the text before each changed
    assert _facts(edited, memo) == _facts(edited)
    assert memo.reused == 0


# ---------------------------------------------------------------- whole runs


def _findings(root: Path, target: str, use_cache: bool) -> tuple[list[tuple], int]:
    with contextlib.chdir(root):
        result = run([target], use_cache=use_cache)
    rows = sorted((f.path.replace("\\", "/").rsplit("/", 1)[-1], f.line, f.column, f.code, f.end_line,
                   f.end_column, f.message, f.fixable, repr(f.fix)) for f in result.findings)
    return rows, result.stats.functions_reused


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} no longer holds {old!r}: update the edit"
    path.write_text(text.replace(old, new, 1))


def _lcm_to_max_moving_lines(root: Path) -> None:
    # LC106 goes, and every line below `alignment_unit` moves up one (the findings after it name lines).
    _edit(root / "data.py", "    if bugs.is_on(args, \"alignment_max_not_lcm\"):\n        return max(units)",
          "    if False: return max(units)")


def _guard_in_place(root: Path) -> None:
    # LC103 goes; no line moves (the guard joins the line before).
    _edit(root / "data.py", '        max_seqlen = batch["max_seq_lens"][0]\n',
          '        assert len(set(batch["max_seq_lens"])) == 1; max_seqlen = batch["max_seq_lens"][0]\n')


def _owner_stops_building(root: Path) -> None:
    # `get_batch` no longer builds `cu_seqlens`: what it tells the project as an owner changes, and with it
    # the findings of its callers' module `replay_data.py`.
    for _ in range(2):
        _edit(root / "data.py", 'batch["cu_seqlens"] = ', 'batch["cu_bounds"] = ')


EDITS = {
    "an edit that moves the lines below": (_lcm_to_max_moving_lines, "data.py"),
    "an edit that keeps every line": (_guard_in_place, "data.py"),
    "a summary another file's callers read": (_owner_stops_building, "replay_data.py"),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_staged_run_with_reused_functions_matches_a_fresh_run(tmp_path: Path, name: str) -> None:
    edit, neighbour = EDITS[name]
    root = tmp_path / "minitrainer"
    shutil.copytree(FIXTURE, root)
    (root / "__init__.py").touch()
    with contextlib.chdir(root):
        run(["."])  # every file's facts cached, as the last commit's run left them
    data = root / "data.py"
    data.write_text(data.read_text() + "\n# an earlier commit's edit\n")
    first, reused = _findings(root, "data.py", True)  # a one-file run: it leaves the function records
    assert reused == 0 and first == _findings(root, "data.py", False)[0]
    before = {target: _findings(root, target, False)[0] for target in ("data.py", neighbour)}
    edit(root)
    staged, reused = _findings(root, "data.py", True)
    assert reused > 0, f"{name}: no function was reused, so nothing was compared"
    fresh = _findings(root, "data.py", False)[0]
    assert staged == fresh, f"{name}: the staged run differs from --no-cache"
    # The other file, its project read from the cache that the staged run left (data.py's facts as reused).
    after = {target: _findings(root, target, False)[0] for target in ("data.py", neighbour)}
    assert after != before, f"{name}: the edit changes no finding, so it tests nothing"
    assert _findings(root, neighbour, True)[0] == after[neighbour]


def test_a_damaged_record_is_walked_again() -> None:
    source = (FIXTURE / "data.py").read_text()
    memo = FunctionMemo()
    extract(source, LintSettings(), memo)
    entry = marshal.loads(marshal.dumps(memo.entry()))
    for record in entry["records"].values():
        record["facts"] = {"core": [], "calls": b"junk", "names": []}
        record["gathering"] = (("not", "a", "row", "at all"),)
    damaged = FunctionMemo(entry)
    assert _facts(_append(source), damaged) == _facts(_append(source))
    assert damaged.reused == 0
