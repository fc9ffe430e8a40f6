"""Whole runs: selection, parallelism, the result cache, bad files, fixes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from lint_test_rules import ALL_TEST_RULES, DEFAULT_TEST_RULES, CrashyRule, GlobalMax, PadCall, WhereAmI

from layoutcheck.configfile import resolve_config
from layoutcheck.errors import ConfigError
from layoutcheck.lint.findings import INTERNAL, INVALID_INPUT, MISSING_PATH
from layoutcheck.lint.rule import ModelRule
from layoutcheck.lint.runner import PARALLEL_THRESHOLD, run, worker_count
from layoutcheck.lint.selection import SelectionOverrides


def write(root: Path, name: str, text: str | bytes) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def tree(root: Path, files: int = 12) -> None:
    for i in range(files):
        write(root, f"pkg/m{i:02d}.py", f"a = pad_me({i})\nb = max(a, {i})\nc = noisy\n" * (1 + i % 3))
    write(root, "pkg/__init__.py", "")
    write(root, "pkg/clean.py", "x = 1\n")


def go(root: Path, *paths: str, rules=DEFAULT_TEST_RULES, **kwargs):
    return run(list(paths) or ["."], rules=rules, cwd=root, loaded=resolve_config(list(paths) or ["."], cwd=root),
               **kwargs)


def keyed(result) -> list[tuple]:
    return [(f.path, f.line, f.column, f.rule) for f in result.findings]


# ---------------------------------------------------------------- selection


def test_default_selection_and_overrides(tmp_path):
    write(tmp_path, "a.py", "x = max(pad_me)\ny = noisy\n")
    assert {f.rule for f in go(tmp_path).findings} == {"pad-call", "global-max"}  # noisy is off by default
    every = go(tmp_path, overrides=SelectionOverrides(select=("ALL",)), use_cache=False)
    assert {f.rule for f in every.findings} == {"pad-call", "global-max", "noisy-thing"}
    only = go(tmp_path, overrides=SelectionOverrides(select=("LC9",), ignore=("global-max",)), use_cache=False)
    assert {f.rule for f in only.findings} == {"pad-call", "noisy-thing"}
    extended = go(tmp_path, overrides=SelectionOverrides(extend_select=("noisy-thing",), ignore=("LC90",)),
                  use_cache=False)
    assert {f.rule for f in extended.findings} == {"noisy-thing"}


def test_more_specific_selector_wins_and_ties_go_to_ignore(tmp_path):
    write(tmp_path, "a.py", "x = max(pad_me)\n")
    kept = go(tmp_path, overrides=SelectionOverrides(select=("LC901",), ignore=("LC9",)), use_cache=False)
    assert {f.rule for f in kept.findings} == {"pad-call"}
    tie = go(tmp_path, overrides=SelectionOverrides(select=("pad-call",), ignore=("LC901",)), use_cache=False)
    assert tie.findings == []


def test_config_selection_and_per_file_ignores(tmp_path):
    write(tmp_path, "pyproject.toml", """
[tool.layoutcheck]
ignore = ["global-max"]
extend-select = ["LC951"]
per-file-ignores = { "tests/*" = ["pad-call"], "gen_*.py" = ["ALL"] }
""")
    write(tmp_path, "a.py", "x = max(pad_me)\ny = noisy\n")
    write(tmp_path, "tests/t.py", "x = max(pad_me)\ny = noisy\n")
    write(tmp_path, "sub/gen_x.py", "x = max(pad_me)\ny = noisy\n")
    result = go(tmp_path)
    assert keyed(result) == [("a.py", 1, 9, "pad-call"), ("a.py", 2, 5, "noisy-thing"),
                             ("tests/t.py", 2, 5, "noisy-thing")]


def test_unknown_rule_anywhere_is_a_config_error(tmp_path):
    write(tmp_path, "a.py", "x = 1\n")
    with pytest.raises(ConfigError, match=r"unknown rule 'pad-cal' in --select; valid: LC001 unused-suppression, "
                                          r"LC901 pad-call"):
        go(tmp_path, overrides=SelectionOverrides(select=("pad-cal",)))
    write(tmp_path, "layoutcheck.toml", 'per-file-ignores = { "a.py" = ["LC7"] }\n')
    with pytest.raises(ConfigError, match=r"unknown rule 'LC7' in per-file-ignores.\"a.py\" in .*layoutcheck.toml"):
        go(tmp_path)


def test_an_invalid_config_fails_even_with_nothing_to_lint(tmp_path):
    write(tmp_path, "layoutcheck.toml", "bucket-quantum = 0\n")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="bucket-quantum"):
        go(tmp_path, "empty")


# ---------------------------------------------------------------- parallelism


def test_worker_count():
    assert worker_count(None, PARALLEL_THRESHOLD) == 1  # a handful of files: no pool
    assert worker_count(None, 1) == 1 and worker_count(4, 1) == 1
    assert worker_count(3, 10) == 3 and worker_count(8, 2) == 2
    assert worker_count(None, 100) >= 1


def test_output_is_identical_whatever_the_parallelism(tmp_path):
    tree(tmp_path, files=PARALLEL_THRESHOLD + 4)
    serial = go(tmp_path, jobs=1, use_cache=False)
    parallel = go(tmp_path, jobs=2, use_cache=False)
    assert serial.stats.workers == 1 and parallel.stats.workers == 2
    assert serial.findings == parallel.findings and serial.errors == parallel.errors
    assert serial.findings == sorted(serial.findings)
    assert len(serial.findings) > 2 * PARALLEL_THRESHOLD


def test_a_crashing_rule_in_a_worker_is_reported_and_the_run_goes_on(tmp_path):
    tree(tmp_path, files=PARALLEL_THRESHOLD + 2)
    write(tmp_path, "pkg/boom.py", "explode()\nx = pad_me\n")
    result = go(tmp_path, rules=(*DEFAULT_TEST_RULES, CrashyRule), jobs=2, use_cache=False)
    assert result.stats.workers == 2
    [error] = result.errors
    assert error.path == "pkg/boom.py" and error.kind == INTERNAL and "crashy-rule" in error.message
    assert ("pkg/boom.py", 2, 5, "pad-call") in keyed(result)
    assert any(f.path == "pkg/m00.py" for f in result.findings)


def test_lint_edit_lint_reads_cached_facts_as_fresh_ones(tmp_path):
    # Issue 27: after `check .`, a comment appended to one file made LC113 crash on every file
    # (`unhashable type: 'list'`: a span read back from the cache), and so did `check .` then `check SUB`.
    import shutil

    from layoutcheck.lint.registry import all_rules

    root = tmp_path / "p"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures/lint/pairs/d7b_pad_sides", root)
    (root / "layoutcheck.toml").write_text("preview = true\n")  # LC113 is a preview rule
    first = go(root, ".", rules=all_rules())
    assert [f.rule for f in first.findings] == ["pad-sides-disagree"] and not first.errors
    with open(root / "flagged" / "replay.py", "a") as handle:
        handle.write("# an edit\n")
    again = go(root, ".", rules=all_rules())
    assert again.stats.cached and not again.errors and again.findings == first.findings
    sub = go(root, "flagged", rules=all_rules())
    assert not sub.errors and [f.rule for f in sub.findings] == ["pad-sides-disagree"]


class CrashingModelRule(ModelRule):
    """Raises on every file in the project phase, as LC113 did on cached facts."""

    code = "LC989"
    message = "never reported"

    def check(self, file):
        raise TypeError("unhashable type: 'list'")


def test_a_crashing_model_rule_leaves_every_other_finding_and_names_what_is_missing(tmp_path):
    # The real rules on a flagged project, plus one that crashes on every file: the others' findings
    # are all there, cached or not, and each file says which rule's findings it lacks.
    import shutil

    from layoutcheck.lint.registry import all_rules

    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures/lint/pairs/d7b_pad_sides/flagged", tmp_path / "p")
    root = tmp_path / "p"
    (root / "layoutcheck.toml").write_text("preview = true\n")  # LC113 is a preview rule
    alone = go(root, rules=all_rules(), use_cache=False)
    assert alone.findings and not alone.errors
    for use_cache in (True, True, False):  # cold, then warm: the crash is never cached away
        result = go(root, rules=(*all_rules(), CrashingModelRule), use_cache=use_cache)
        assert result.findings == alone.findings
        assert sorted(e.path for e in result.errors) == ["replay.py", "rollout.py"]
        for error in result.errors:
            assert error.kind == INTERNAL
            assert error.message.startswith("rule `crashing-model-rule` (LC989) crashed on this file: TypeError")
            assert error.message.endswith("its findings in this file are missing")


def test_module_names_reach_the_rules_through_the_runner(tmp_path):
    write(tmp_path, "src/pkg/__init__.py", "")
    write(tmp_path, "src/pkg/mod.py", "where_am_i\n")
    result = go(tmp_path, "src", rules=(WhereAmI,))
    assert [f.message for f in result.findings] == ["module is pkg.mod"]


# ---------------------------------------------------------------- cache


def test_warm_run_reuses_results_without_parsing(tmp_path):
    tree(tmp_path)
    cold = go(tmp_path, jobs=1)
    assert (cold.stats.cached, cold.stats.linted) == (0, cold.stats.files)
    assert cold.stats.parsed == cold.stats.files - 2  # __init__.py and clean.py: prefiltered
    warm = go(tmp_path, jobs=1)
    assert (warm.stats.cached, warm.stats.linted, warm.stats.parsed) == (warm.stats.files, 0, 0)
    assert warm.findings == cold.findings and warm.errors == cold.errors
    assert all(f.cached for f in warm.files)
    cache = tmp_path / ".layoutcheck_cache"
    assert (cache / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    entries = list((cache / "files").glob("*/*.marshal"))
    assert len(entries) == cold.stats.files
    assert all(len(e.parent.name) == 2 for e in entries)  # sharded


def _age(root: Path, seconds: float = 100) -> None:
    """Set every source's mtime ``seconds`` in the past: older than the stat index's racy window."""
    stamp = time.time() - seconds
    for path in root.rglob("*.py"):
        os.utime(path, (stamp, stamp))


def test_same_size_edit_with_a_new_mtime_is_seen_by_a_one_file_run(tmp_path):
    tree(tmp_path)
    _age(tmp_path)
    first = go(tmp_path, jobs=1)
    assert first.stats.read == first.stats.files  # nothing recorded yet: all read, stats recorded
    assert go(tmp_path, jobs=1).stats.read == 0  # unchanged: every digest from the stat index
    target = tmp_path / "pkg" / "m00.py"
    before = target.read_bytes()
    target.write_bytes(before.replace(b"pad_me", b"pad_no"))  # same size, other content
    assert target.stat().st_size == len(before)
    stamp = time.time() - 50
    os.utime(target, (stamp, stamp))
    staged = go(tmp_path, "pkg/m00.py", jobs=1)
    fresh = go(tmp_path, "pkg/m00.py", jobs=1, use_cache=False)
    assert staged.stats.read == 1 and staged.stats.linted == 1
    assert keyed(staged) == keyed(fresh)
    assert keyed(staged) != [k for k in keyed(first) if k[0].endswith("m00.py")]  # the edit changed findings


def test_touched_unchanged_file_hits_the_cache_and_its_stat_is_refreshed(tmp_path):
    tree(tmp_path)
    _age(tmp_path)
    go(tmp_path, jobs=1)
    target = tmp_path / "pkg" / "m01.py"
    stamp = time.time() - 50
    os.utime(target, (stamp, stamp))  # touched: new mtime, same bytes
    touched = go(tmp_path, "pkg/m01.py", jobs=1)
    assert (touched.stats.read, touched.stats.cached, touched.stats.linted) == (1, 1, 0)  # read, hashed, hit
    again = go(tmp_path, "pkg/m01.py", jobs=1)
    assert (again.stats.read, again.stats.cached, again.stats.linted) == (0, 1, 0)  # stat refreshed
    assert keyed(again) == keyed(touched)
    # A file changed within the racy window is never recorded: read and hashed on every run.
    os.utime(target, None)
    assert go(tmp_path, "pkg/m01.py", jobs=1).stats.read == 1
    assert go(tmp_path, "pkg/m01.py", jobs=1).stats.read == 1


def test_no_cache_neither_reads_nor_writes(tmp_path):
    tree(tmp_path, files=2)
    result = go(tmp_path, use_cache=False)
    assert result.stats.cached == 0 and not (tmp_path / ".layoutcheck_cache").exists()
    go(tmp_path)
    again = go(tmp_path, use_cache=False)
    assert again.stats.cached == 0 and again.stats.linted == again.stats.files


def test_changing_a_file_relints_only_that_file(tmp_path):
    tree(tmp_path, files=3)
    go(tmp_path)
    write(tmp_path, "pkg/m01.py", "changed = pad_me\n")
    result = go(tmp_path)
    assert result.stats.linted == 1 and result.stats.cached == result.stats.files - 1
    assert ("pkg/m01.py", 1, 11, "pad-call") in keyed(result)


def test_changing_the_config_or_selection_relints_everything(tmp_path):
    tree(tmp_path, files=3)
    go(tmp_path)
    write(tmp_path, "layoutcheck.toml", 'ignore = ["global-max"]\n')
    result = go(tmp_path)
    assert result.stats.cached == 0 and "global-max" not in {f.rule for f in result.findings}
    assert go(tmp_path).stats.linted == 0
    overridden = go(tmp_path, overrides=SelectionOverrides(extend_select=("noisy-thing",)))
    assert overridden.stats.cached == 0 and "noisy-thing" in {f.rule for f in overridden.findings}
    other_rules = go(tmp_path, rules=(PadCall, GlobalMax))
    assert other_rules.stats.cached == 0


def test_a_corrupt_cache_entry_is_a_miss_not_a_crash(tmp_path):
    tree(tmp_path, files=2)
    cold = go(tmp_path)
    cache = tmp_path / ".layoutcheck_cache"
    for run_entry in (cache / "runs").glob("*/*.json"):
        run_entry.write_text('{"v": 2, "results": {"pkg/m00.py": 3}}')
    entries = sorted((cache / "files").glob("*/*.marshal"))
    entries[0].write_text("{not json")
    entries[1].write_text(json.dumps({"v": 2, "findings": [[1, 2]], "errors": [], "parsed": True, "facts": None}))
    entries[2].write_bytes(b"\x00\xff")
    result = go(tmp_path)
    assert result.stats.linted == 3 and result.findings == cold.findings
    assert go(tmp_path).stats.linted == 0  # rewritten


def test_same_content_in_two_places_has_two_entries(tmp_path):
    write(tmp_path, "a/x.py", "x = pad_me\n")
    write(tmp_path, "b/x.py", "x = pad_me\n")
    write(tmp_path, "layoutcheck.toml", 'per-file-ignores = { "b/*" = ["pad-call"] }\n')
    go(tmp_path)
    result = go(tmp_path)
    assert result.stats.cached == 2 and keyed(result) == [("a/x.py", 1, 5, "pad-call")]


def test_cached_paths_follow_the_working_folder(tmp_path):
    write(tmp_path, "pkg/x.py", "x = pad_me\n")
    write(tmp_path, "layoutcheck.toml", "\n")
    run(["pkg"], rules=DEFAULT_TEST_RULES, cwd=tmp_path)
    inner = run(["."], rules=DEFAULT_TEST_RULES, cwd=tmp_path / "pkg")
    assert inner.stats.cached == 1 and keyed(inner) == [("x.py", 1, 5, "pad-call")]


def test_unwritable_cache_dir_warns_and_the_run_goes_on(tmp_path):
    write(tmp_path, "blocker", "a file where the cache folder should go")
    write(tmp_path, "layoutcheck.toml", 'cache-dir = "blocker/cache"\n')
    write(tmp_path, "a.py", "x = pad_me\n")
    result = go(tmp_path)
    assert keyed(result) == [("a.py", 1, 5, "pad-call")]
    assert result.warnings and "cache disabled" in result.warnings[0]


# ---------------------------------------------------------------- bad input


def test_bad_files_are_each_reported_and_the_others_still_checked(tmp_path):
    write(tmp_path, "good.py", "x = pad_me\n")
    write(tmp_path, "syntax.py", "def f(:\n    pass\n")
    write(tmp_path, "latin.py", b"x = '\xe9'\n")
    write(tmp_path, "empty.py", "")
    write(tmp_path, "huge.py", "x = 1\n" * 200)
    (tmp_path / "dangling.py").symlink_to(tmp_path / "gone.py")
    result = go(tmp_path, ".", "missing_dir", max_file_bytes=1000)
    assert keyed(result) == [("good.py", 1, 5, "pad-call")]
    errors = {e.path: e for e in result.errors}
    assert set(errors) == {"syntax.py", "latin.py", "huge.py", "dangling.py", "missing_dir"}
    assert (errors["syntax.py"].line, errors["syntax.py"].kind) == (1, INVALID_INPUT)
    assert "not valid UTF-8" in errors["latin.py"].message and errors["latin.py"].line == 1
    assert errors["huge.py"].message == "file is 1.2 kB, over the 1000 bytes limit: not checked"
    assert "broken symbolic link" in errors["dangling.py"].message
    assert errors["missing_dir"].kind == MISSING_PATH
    assert result.stats.files == 4  # good, syntax, latin, empty (read); huge was refused


def test_syntax_errors_are_cached_like_findings(tmp_path):
    write(tmp_path, "syntax.py", "def f(:\n")
    first = go(tmp_path)
    second = go(tmp_path)
    assert second.stats.cached == 1 and second.errors == first.errors


def test_internal_errors_are_not_cached(tmp_path):
    write(tmp_path, "boom.py", "explode()\n")
    go(tmp_path, rules=(CrashyRule,))
    again = go(tmp_path, rules=(CrashyRule,))
    assert again.stats.cached == 0 and again.errors[0].kind == INTERNAL


# ---------------------------------------------------------------- fixes


def test_fix_writes_files_and_a_second_fix_changes_nothing(tmp_path):
    source = "a = pad_me(1)\nb = max(2)\n"
    path = write(tmp_path, "f.py", source)
    fixed = go(tmp_path, fix=True)
    assert path.read_text() == "a = padded(1)\nb = max(2)\n"
    assert fixed.stats.fixed == 1 and [f.rule for f in fixed.findings] == ["global-max"]
    again = go(tmp_path, fix=True)
    assert again.fixed_files == [] and path.read_text() == "a = padded(1)\nb = max(2)\n"
    assert again.stats.cached == 1  # the fixed content was cached when written


def test_fix_redoes_a_cached_file_with_fixable_findings(tmp_path):
    path = write(tmp_path, "f.py", "a = pad_me\n")
    go(tmp_path)
    go(tmp_path, fix=True)
    assert path.read_text() == "a = padded\n"


def test_diff_mode_computes_fixes_without_writing_or_caching_them(tmp_path):
    path = write(tmp_path, "f.py", "a = pad_me\n")
    result = go(tmp_path, fix=True, write_fixes=False)
    [changed] = result.fixed_files
    assert changed.fix.fixed == "a = padded\n" and path.read_text() == "a = pad_me\n"
    # The on-disk content still has its finding: a plain run must not see a stale cached "fixed" result.
    assert keyed(go(tmp_path)) == [("f.py", 1, 5, "pad-call")]


def test_fix_keeps_the_file_encoding(tmp_path):
    source = "# -*- coding: latin-1 -*-\nname = 'caf\xe9'\nx = pad_me\n"
    path = write(tmp_path, "l.py", source.encode("latin-1"))
    go(tmp_path, fix=True)
    assert path.read_bytes() == source.replace("pad_me", "padded").encode("latin-1")


@pytest.mark.parametrize("rule", ALL_TEST_RULES)
def test_every_test_rule_passes_through_a_run(tmp_path, rule):
    write(tmp_path, "a.py", "x = 1\n")
    assert go(tmp_path, rules=(rule,), use_cache=False).errors == []


def test_a_missing_path_is_an_error_and_its_parent_is_not_read_as_its_project(tmp_path):
    # `check /nope` once took `/` as the project around `/nope` and read the whole filesystem.
    for i in range(3):
        (tmp_path / f"sibling{i}.py").write_text("x = 1\n")
    result = run([str(tmp_path / "nope.py")], rules=DEFAULT_TEST_RULES, cwd=tmp_path, use_cache=False)
    assert [(e.kind, Path(e.path).name) for e in result.errors] == [(MISSING_PATH, "nope.py")]
    assert result.stats.files == 0


def _cached_facts(root: Path) -> list[str]:
    """Every file entry's facts in ``root``'s cache, decoded with their calls, as sorted reprs."""
    import marshal

    from layoutcheck.model.facts import ensure_calls, from_cache_data

    out = []
    for path in root.glob(".layoutcheck_cache/files/*/*.marshal"):
        entry = marshal.loads(path.read_bytes())
        facts = from_cache_data(entry.pop("facts"))
        ensure_calls(facts)
        out.append(repr((facts, sorted(entry.items()))))
    return sorted(out)


def test_the_workers_send_facts_in_the_cache_form_and_the_cache_keeps_them_as_sent(tmp_path):
    """Facts come back from the workers as `marshal` bytes, read back with their calls pending;
    the run's output and the cache entries it writes are those of a run in one process."""
    corpus = Path(__file__).resolve().parents[1] / "fixtures" / "lint" / "corpus"
    sources = sorted(corpus.rglob("*.py"))[:PARALLEL_THRESHOLD + 6]
    for root in (tmp_path / "serial", tmp_path / "pool"):
        for i, source in enumerate(sources):
            write(root, f"pkg/m{i:02d}.py", source.read_text())
    serial = run(["."], cwd=tmp_path / "serial", loaded=resolve_config(["."], cwd=tmp_path / "serial"), jobs=1)
    pool = run(["."], cwd=tmp_path / "pool", loaded=resolve_config(["."], cwd=tmp_path / "pool"), jobs=2)
    assert pool.stats.workers == 2 and serial.stats.workers == 1
    assert [(f.path, f.line, f.rule, f.message) for f in pool.findings] == \
        [(f.path, f.line, f.rule, f.message) for f in serial.findings]
    written = _cached_facts(tmp_path / "pool")
    assert len(written) == len(sources) and written == _cached_facts(tmp_path / "serial")
    assert any("Call(" in facts for facts in written)  # calls were cached, not left out as pending
