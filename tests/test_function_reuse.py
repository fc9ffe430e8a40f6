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


def test_functions_after_an_edit_are_reused_where_they_moved() -> None:
    # A line added in the middle function: it alone is walked; those after it are replayed a line down.
    source = (FIXTURE / "data.py").read_text()
    memo = _remembered(source)
    edited = _insert_line(source)
    assert _facts(edited, memo) == _facts(edited)
    middle = _middle_def(source)
    after = sum(1 for s in _units(source) if s.lineno > middle.end_lineno)
    assert after > 0 and memo.walked == 1 and memo.moved == after
    assert memo.reused == len(_units(source)) - 1


def _edited_middle(source: str, edit: str) -> str:
    """``source`` edited in its middle unit (the one `_middle_def` names, or the module-level statement
    there): lines added or removed, the function grown, a function added or removed."""
    tree = ast.parse(source)
    units = _units(source)
    middle = units[len(units) // 2]
    if edit == "remove-statement":  # the middle one of those that keep a statement, not the last
        long = [u for u in units[:-1] if len(u.body) >= 2]
        middle = long[len(long) // 2]
    body = middle.body  # type: ignore[attr-defined]
    first = body[1] if isinstance(body[0], ast.Expr) and len(body) > 1 else body[0]
    indent = " " * first.col_offset
    lines = source.split("\n")
    if edit == "three-lines":
        lines[first.lineno - 1:first.lineno - 1] = [indent + "_a = 1", indent + "_b = [_a] * 3", indent + "_c = _b"]
    elif edit == "remove-statement":
        last = body[-1]
        del lines[last.lineno - 1:last.end_lineno]
    elif edit == "grow":
        last = body[-1]
        lines.insert(last.end_lineno, " " * last.col_offset + "_tail = 0")
    elif edit in ("add-def", "remove-def"):
        top = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        chosen = top[len(top) // 2]
        at = min([chosen.lineno, *(d.lineno for d in chosen.decorator_list)])
        if edit == "add-def":
            lines[at - 1:at - 1] = ["def _added(x):", "    return x + 1", "", ""]
        else:
            del lines[at - 1:chosen.end_lineno]
    elif edit == "module-code":
        at = min([middle.lineno, *(d.lineno for d in middle.decorator_list)])  # type: ignore[attr-defined]
        if middle.col_offset == 0:  # type: ignore[attr-defined]
            lines.insert(at - 1, "max_seq_len = 4096")
        else:
            lines.insert(at - 1, " " * middle.col_offset + "pad_multiple = 8")  # type: ignore[attr-defined]
    else:
        raise AssertionError(edit)
    return "\n".join(lines)


MIDDLE_EDITS = ("three-lines", "remove-statement", "grow", "add-def", "remove-def", "module-code")


@pytest.mark.parametrize("name", ["data.py", "loss.py", "rollout.py", "actor.py", "model.py", "parallel.py"])
@pytest.mark.parametrize("edit", MIDDLE_EDITS)
def test_edits_in_the_middle_reuse_what_a_fresh_walk_finds(name: str, edit: str) -> None:
    source = (FIXTURE / name).read_text()
    memo = _remembered(source)
    edited = _edited_middle(source, edit)
    assert _facts(edited, memo) == _facts(edited), f"{name}, {edit}: reused facts differ from a fresh walk's"
    if edit in ("three-lines", "remove-statement", "grow"):
        # A def added or removed may change the module's own uses of names (a whole-module input): then
        # nothing is reused, and the comparison is of two fresh walks; these three edits keep them.
        assert memo.moved > 0 and memo.walked == 1, f"{name}, {edit}: the functions after the edit were walked"


def test_every_fixture_edited_in_the_middle_reuses_what_a_fresh_walk_finds() -> None:
    # The bulk oracle: each fixture file with three functions or more, each edit; reused facts are a
    # fresh walk's, and functions were moved (so the comparison is not of two fresh walks).
    moved = texts = 0
    for path in sorted((ROOT / "fixtures").rglob("*.py")):
        source = path.read_text()
        try:
            if len(_units(source)) < 3 or not any(len(u.body) >= 2 for u in _units(source)[:-1]):
                continue
        except SyntaxError:
            continue
        first = FunctionMemo()
        extract(source, LintSettings(), first)
        if first.entry() is None:
            continue  # its calls are rewritten: nothing is kept (test_a_file_whose_calls_are_rewritten_...)
        blob = marshal.dumps(first.entry())
        for edit in MIDDLE_EDITS:
            edited = _edited_middle(source, edit)
            memo = FunctionMemo(marshal.loads(blob))
            assert _facts(edited, memo) == _facts(edited), f"{path.name}, {edit}: reused facts differ"
            moved += memo.moved
            texts += 1
    assert texts > 200 and moved > 300, (texts, moved)


def test_the_records_a_reusing_run_leaves_are_reused_by_the_next() -> None:
    # Pre-commit runs follow one another: each leaves the records it replayed for the next, as they were.
    source = (FIXTURE / "data.py").read_text()
    memo = _remembered(source)
    edited = _insert_line(source)
    _facts(edited, memo)
    again = FunctionMemo(marshal.loads(marshal.dumps(memo.entry())))
    twice = _insert_line(edited)
    assert _facts(twice, again) == _facts(twice)
    assert again.walked == 1 and again.reused == len(_units(source)) - 1 and again.moved > 0


SMALL = '''"""A module."""
import torch
import torch.nn.functional as F

unit = 128
DOC = """
# one
"""


def first(batch):
    return batch["tokens"]


def middle(x):
    return x


def later(x):
    return torch.cat([x, x])


def calls(x):
    return scale(x)


def last(x, n):
    padded = (n + unit - 1) // unit * unit
    return F.pad(x, (0, padded - x.size(0)))
'''


def test_comments_between_functions_move_them_all() -> None:
    # A comment at the top and one between two functions: every function moves, but `last`, whose pad's
    # unit is decided at the module's level (`unit = 128`): its record points outside it, and is not moved.
    memo = _remembered(SMALL)
    edited = "# Copyright\n" + SMALL.replace("\n\ndef later", "\n# a note\n\ndef later")
    assert _facts(edited, memo) == _facts(edited)
    assert memo.walked == 1 and memo.moved == memo.reused == len(_units(SMALL)) - 1
    unmoved = _remembered(SMALL)
    assert _facts(SMALL + "\n# appended\n", unmoved) == _facts(SMALL + "\n# appended\n")
    assert unmoved.walked == 0 and unmoved.moved == 0  # where nothing moved, that record is taken too


def test_a_comment_line_inside_a_string_between_functions_walks_the_later_ones_again() -> None:
    # `# one` is a line of the string DOC, not a comment: changed, the functions after it are walked again.
    memo = _remembered(SMALL)
    edited = SMALL.replace("# one", "# two")
    assert _facts(edited, memo) == _facts(edited)
    assert memo.reused == 0 and memo.walked == len(_units(SMALL))


def test_a_function_added_is_walked_and_those_after_it_moved() -> None:
    memo = _remembered(SMALL)
    edited = SMALL.replace("def later(x):", "def helper(y):\n    return y + 1\n\n\ndef later(x):")
    assert _facts(edited, memo) == _facts(edited)
    assert memo.walked == 2 and memo.moved == 2  # `helper` and `last` (not movable) walked


def test_a_function_added_under_a_name_a_later_one_reads_walks_that_one_again() -> None:
    # `def scale()` binds the module's `scale`, which `calls` reads; `later` does not spell it and moves.
    memo = _remembered(SMALL)
    edited = SMALL.replace("def later(x):", "def scale(y):\n    return y * 2\n\n\ndef later(x):")
    assert _facts(edited, memo) == _facts(edited)
    assert memo.walked == 3 and memo.moved == 1  # `scale`, `calls` and `last` walked, `later` moved


def test_module_code_before_a_function_walks_it_again() -> None:
    # A module-level binding the functions after it may read: each of them is walked again.
    source = (FIXTURE / "data.py").read_text()
    memo = _remembered(source)
    edited = _edited_middle(source, "module-code")
    assert _facts(edited, memo) == _facts(edited)
    middle = _units(source)[len(_units(source)) // 2]
    before = sum(1 for s in _units(source) if s.end_lineno < middle.lineno)
    assert memo.moved == 0 and memo.reused == before and memo.walked == len(_units(source)) - before


def test_an_import_in_an_edited_function_walks_the_later_ones_again() -> None:
    # An import inside a function is the module's too (`Imports`): the functions after it read another
    # set of imports, and are walked again.
    source = (FIXTURE / "data.py").read_text()
    memo = _remembered(source)
    middle = _middle_def(source)
    lines = source.split("\n")
    first = middle.body[0]
    lines.insert(first.lineno - 1, " " * first.col_offset + "from torch.nn import functional as F2")
    edited = "\n".join(lines)
    assert _facts(edited, memo) == _facts(edited)
    assert memo.moved == 0 and memo.walked == sum(1 for s in _units(source) if s.lineno >= middle.lineno)


def test_every_place_the_facts_hold_is_moved() -> None:
    # A field added to the facts that holds a line, a tick or a function index must be moved when a record
    # is replayed at another place (`reuse.MOVED`); these are the fields that hold none.
    import dataclasses

    from layoutcheck.model import facts as facts_module
    from layoutcheck.model.reuse import MOVED

    placeless = {
        "Function": {"rounds", "sample_indices", "returns_tags", "returns_elements", "param_uses", "zero_elements"},
        "Pad": {"value_tags", "unit_tags"}, "Broadcast": {"value_tags"}, "EntryRead": {"index"},
        "Rewrite": {"tags"}, "FieldWrite": {"tags"}, "BucketLiteral": {"values", "max_length"},
        "Clash": set(), "PadSide": set(), "Record": set(), "MaxCall": set(), "Transform": set(), "Zip": set(),
    }
    for cls, moved in MOVED.items():
        hints = {f.name: str(f.type) for f in dataclasses.fields(cls)}
        numeric = {name for name, hint in hints.items() if "int" in hint or "Span" in hint}
        assert numeric - set(moved) <= placeless[cls.__name__], f"{cls.__name__}: a field holding a place not moved"
    import typing

    hints = typing.get_type_hints(facts_module.FileFacts)
    listed = {typing.get_args(hint)[0] for hint in hints.values() if typing.get_origin(hint) is list}
    assert listed == set(MOVED) == {getattr(facts_module, name) for name in placeless}


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
