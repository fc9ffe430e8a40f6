"""A pre-commit run (one changed file, the rest of its project in the cache) answers as a fresh run.

`layoutcheck check FILE` after a run that cached every file's facts reads the
other files' facts from the cache and extracts only the changed one; the
project phase then runs over the whole project again. What it prints must be
what `layoutcheck check FILE --no-cache` prints, and what a full fresh run of
the project reports on that file, for edits that change what the project
knows, not only for a comment: a call added, a pad changed, a function renamed
that another file imports, a guard added. Each edit is checked to change the
findings somewhere (on the edited file or on its importer), so the comparison
is not of two unchanged answers.
"""

from __future__ import annotations

import contextlib
import io
import json
import marshal
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from layoutcheck.cli import main

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "minitrainer"


def _check(cwd: Path, *args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["check", *args])
    return code, out.getvalue()


def _findings(cwd: Path, *args: str) -> list[tuple]:
    code, text = _check(cwd, *args, "--output-format", "json")
    assert code in (0, 1), text
    # Everything a finding says (its fix included), the path as the file's name.
    return sorted((d["path"].replace("\\", "/").rsplit("/", 1)[-1], d["line"], d["column"], d["code"],
                   json.dumps({k: v for k, v in d.items() if k != "path"}, sort_keys=True))
                  for d in json.loads(text))


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} no longer holds {old!r}: update the edit"
    path.write_text(text.replace(old, new, 1))


def _add_call(root: Path) -> None:
    # A second CP helper call without its geometry (LC104 where it is added).
    _edit(root / "data.py", '    unconcat = batch["tokens"]\n',
          '    unconcat = batch["tokens"]\n    extra = slice_with_cp(unconcat[0], 0, qkv_format)\n')


def _change_pad(root: Path) -> None:
    # The per-sample padded lengths become one rollout-wide maximum: the owner's store changes.
    _edit(root / "data.py", 'rollout_data["max_seq_lens"] = [_round_up(t, unit) for t in totals]',
          'rollout_data["max_seq_lens"] = [_round_up(max(totals), unit) for t in totals]')


def _rename_imported(root: Path) -> None:
    # `data.py` imports `slice_with_cp`; renamed in its module only, its calls reach no `def`.
    _edit(root / "cp_utils.py", "def slice_with_cp(", "def slice_with_cp_renamed(")


def _add_guard(root: Path) -> None:
    _edit(root / "data.py", '        max_seqlen = batch["max_seq_lens"][0]\n',
          '        assert len(set(batch["max_seq_lens"])) == 1\n        max_seqlen = batch["max_seq_lens"][0]\n')


def _drop_param(root: Path) -> None:
    # The helper loses the parameter its callers are told to pass.
    _edit(root / "cp_utils.py", "    max_seq_len: int | None = None,\n    parallel_state: Any = None,",
          "    parallel_state: Any = None,")


EDITS: dict[str, tuple[Callable[[Path], None], str]] = {
    "add a call": (_add_call, "data.py"),
    "change a pad": (_change_pad, "data.py"),
    "rename an imported function": (_rename_imported, "cp_utils.py"),
    "add a guard": (_add_guard, "data.py"),
    "drop a parameter callers pass": (_drop_param, "cp_utils.py"),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_staged_run_matches_a_fresh_run(tmp_path: Path, name: str) -> None:
    edit, changed = EDITS[name]
    root = tmp_path / "minitrainer"
    shutil.copytree(FIXTURE, root)
    (root / "__init__.py").touch()
    before = _findings(root, ".", "--no-cache")
    _check(root, ".")  # fills the cache with every file's facts, as the last commit's run did
    edit(root)
    after = _findings(root, ".", "--no-cache")
    assert after != before, f"{name}: the edit changes no finding, so it tests nothing"
    for target in dict.fromkeys((changed, "data.py", "cp_utils.py")):
        expected = [f for f in after if f[0] == target]
        # The changed file first (a pre-commit run), then its neighbours, each against the cache
        # that the runs before it left.
        staged = _findings(root, target)
        fresh = _findings(root, target, "--no-cache")
        assert staged == fresh, f"{name}: `check {target}` with the cache differs from --no-cache"
        assert staged == expected, f"{name}: `check {target}` differs from a full run's findings there"
        code_cached, text_cached = _check(root, target)
        code_fresh, text_fresh = _check(root, target, "--no-cache")
        assert (code_cached, text_cached) == (code_fresh, text_fresh)



def test_readers_of_cached_facts_are_the_decoded_facts_readers() -> None:
    """`ProjectGraph.readers_of` leaves a cached file's calls undecoded when their bytes hold no
    string equal to the field: for every field the fixture reads, the readers are those every call decoded
    gives (`fields_read` of the same project as extracted)."""
    from layoutcheck.lint.runner import run
    from layoutcheck.model.facts import cache_data, from_cache_data
    from layoutcheck.model.project import FileModel, Project

    with contextlib.chdir(FIXTURE):
        fresh = run(["."], use_cache=False, keep_project=True).project
    assert fresh is not None

    def cached(facts):  # as a one-file run reads it from the cache: calls still `marshal` bytes
        return from_cache_data(marshal.loads(marshal.dumps(cache_data(facts))))

    staged = Project([FileModel(f.display, f.relpath, f.module, cached(f.facts), f.checked, is_package=f.is_package)
                      for f in fresh.files], fresh.settings)
    keys = sorted({k for fields in fresh.fields_read.values() for k in fields})
    assert len(keys) > 20
    undecoded = 0
    for key in keys:
        expected = {ref for ref, fields in fresh.fields_read.items() if key in fields}
        assert set(staged.readers_of(key)) == expected, key
        undecoded = max(undecoded, sum("pending_calls" in f.facts.__dict__ for f in staged.files))
    assert undecoded, "every file's calls were decoded: the skip was not exercised"
