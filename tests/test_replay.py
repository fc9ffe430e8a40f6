"""A repeated ``check`` replays its last output, and only while nothing it read has changed.

Each run is a real ``layoutcheck check`` in a fresh interpreter, which tells
on stderr whether the linter was imported: a replay never imports
``layoutcheck.lint.runner``. Trees are aged (their times set 10 s back), as a
checkout is by the time anybody lints it: a run whose inputs changed within
the file system's clock tick stores nothing (see `layoutcheck.lint.replay`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

from layoutcheck.lint import replay as replay_module
from layoutcheck.lint.replay import InputLog, racy_window_ns, replay, stat_key, store

BUG = "def pad(tokens):\n    max_seq_lens = [max(t.numel() for t in tokens)] * len(tokens)\n    return max_seq_lens\n"
CLEAN = "def add(a, b):\n    return a + b\n"

_PROBE = """
import json, sys
from layoutcheck.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
print(json.dumps({'code': code, 'linted': 'layoutcheck.lint.runner' in sys.modules}), file=sys.stderr)
"""


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def age(root: Path, seconds: float = 10.0) -> None:
    """Set every time under ``root`` ``seconds`` back: edits older than any clock tick."""
    past = time.time() - seconds
    for path in [root, *root.rglob("*")]:
        os.utime(path, (past, past), follow_symlinks=False)


def check(args: list[str], cwd: Path, **env: str) -> tuple[int, bool, str, str]:
    """(exit status, whether the linter ran, stdout, stderr without the probe's line)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    environ.update(env)
    # --preview: the bug below is global-max-padding's (LC101), a preview rule (`layoutcheck rules`).
    done = subprocess.run([sys.executable, "-c", _PROBE, "check", "--preview", *args], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=120)
    *lines, last = done.stderr.splitlines(keepends=True)
    seen = json.loads(last)
    return seen["code"], seen["linted"], done.stdout, "".join(lines)


def stamps(root: Path) -> list[str]:
    folder = root / ".layoutcheck_cache" / "replay"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/pad.py", BUG)
    write(tmp_path, "pkg/sub/__init__.py", "")
    write(tmp_path, "pkg/sub/ok.py", CLEAN)
    age(tmp_path)
    return tmp_path


def stamped(project: Path, args: list[str], **env: str) -> tuple[int, str, str]:
    """Run, age (the run created the cache folder), run again: the next identical run replays."""
    check(args, project, **env)
    age(project)
    code, linted, out, err = check(args, project, **env)
    assert linted and len(stamps(project)) >= 1
    assert check(args, project, **env) == (code, False, out, err)
    return code, out, err


def test_a_repeated_run_replays_the_same_output_and_status_without_linting(project):
    code, out, err = stamped(project, ["."])
    assert code == 1 and "global-max-padding" in out and "pkg/pad.py:2" in out
    again = check(["."], project)
    assert again == (code, False, out, err)


def test_the_console_script_replays_through_a_pipe_and_exits_with_the_stored_status(project):
    stamped(project, ["pkg", "--output-format", "json"])
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    done = subprocess.run([sys.executable, "-m", "layoutcheck", "check", "--preview", "pkg", "--output-format", "json"],
                          cwd=project, env=environ, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert [item["code"] for item in json.loads(done.stdout)] == ["LC101"]


def test_the_first_run_in_a_fresh_folder_stores_a_stamp_the_second_run_replays(project):
    # The first run creates the cache folder in the folder it lists: before listing it, so the
    # listing it records is the one the second run finds.
    assert not (project / ".layoutcheck_cache").exists()
    code, linted, out, err = check(["."], project)
    assert code == 1 and linted and len(stamps(project)) == 1
    assert check(["."], project) == (code, False, out, err)


def test_a_file_created_and_removed_again_in_a_listed_folder_still_replays(project):
    # An editor's swap file changes the folder's modification time, not what the run read.
    code, out, err = stamped(project, ["."])
    swap = project / "pkg/sub/.ok.py.swp"
    swap.write_text("")
    swap.unlink()
    assert check(["."], project) == (code, False, out, err)


def _edit_bug_away(root: Path) -> None:
    (root / "pkg/pad.py").write_text(CLEAN)


def _touch(root: Path) -> None:
    os.utime(root / "pkg/sub/ok.py")


def _add_file(root: Path) -> None:
    write(root, "pkg/sub/more.py", BUG)


def _remove_file(root: Path) -> None:
    (root / "pkg/pad.py").unlink()


def _add_config(root: Path) -> None:
    write(root, "layoutcheck.toml", 'ignore = ["LC101"]\n')


def _package_marker(root: Path) -> None:
    (root / "pkg/sub/__init__.py").unlink()  # module names change: pkg.sub.ok becomes ok


def _ignore_in_a_listed_folder(root: Path) -> None:
    write(root, "pkg/.gitignore", "pad.py\n")


def _ignore_above(root: Path) -> None:
    write(root, ".gitignore", "pad.py\n")


@pytest.mark.parametrize("change, findings", [
    (_edit_bug_away, 0), (_touch, 1), (_add_file, 2), (_remove_file, 0), (_add_config, 0),
    (_package_marker, 1), (_ignore_in_a_listed_folder, 0), (_ignore_above, 0),
])
def test_any_change_to_what_the_run_read_makes_the_next_run_lint(project, change, findings):
    stamped(project, ["."])
    change(project)
    code, linted, out, _ = check(["."], project)
    assert linted
    assert out.count("global-max-padding") == findings and code == (1 if findings else 0)


def test_a_config_file_appearing_where_the_search_looked_is_seen(project):
    # Only pkg/ is listed; the configuration search also looked (and found nothing) above it.
    stamped(project, ["pkg"])
    _add_config(project)
    code, linted, out, _ = check(["pkg"], project)
    assert linted and code == 0 and out == ""


def test_an_edited_ignore_file_is_seen_in_the_checked_folder_and_above_it(project):
    # The ignore files decide what is checked: editing one (not only adding it) makes the next run lint.
    write(project, ".gitignore", "unrelated/\n")
    write(project, "pkg/sub/.ignore", "nothing.py\n")
    write(project, "pkg/sub/bug.py", BUG)
    age(project)
    assert stamped(project, ["pkg/sub"])[0] == 1
    write(project, "pkg/sub/.ignore", "nothing.py\nbug.py\n")
    code, linted, out, _ = check(["pkg/sub"], project)
    assert linted and code == 0 and "global-max-padding" not in out
    assert stamped(project, ["."])[0] == 1
    write(project, ".gitignore", "unrelated/\npad.py\n")
    code, linted, out, _ = check(["."], project)
    assert linted and code == 0 and "global-max-padding" not in out


@pytest.mark.parametrize("args, env", [
    ([".", "--output-format", "concise"], {}),
    (["."], {"NO_COLOR": "1"}),
    (["pkg"], {}),
])
def test_another_command_line_or_environment_is_another_run(project, args, env):
    stamped(project, ["."])
    code, linted, _, _ = check(args, project, **env)
    assert linted and code == 1


def test_a_run_with_an_input_modified_within_its_clock_tick_stores_nothing(project):
    def stored() -> dict[str, bytes]:
        folder = project / ".layoutcheck_cache" / "replay"
        return {name: (folder / name).read_bytes() for name in stamps(project)}

    check(["."], project)
    age(project)
    before = stored()
    soon = time.time() + 5
    os.utime(project / "pkg/sub/ok.py", (soon, soon))  # as an edit in the tick of the run that follows
    code, linted, _, _ = check(["."], project)
    assert code == 1 and linted and stored() == before
    assert check(["."], project)[1]  # still linted: nothing replays a racy run


@pytest.mark.parametrize("extra", [["--no-cache"], ["--fix"], ["--diff"], ["--select", "NOPE"]])
def test_runs_that_write_bypass_the_cache_or_fail_store_nothing(project, extra):
    check([".", *extra], project)
    age(project)
    check([".", *extra], project)
    assert stamps(project) == []


def test_a_cache_folder_elsewhere_stores_nothing(project):
    write(project, "pyproject.toml", '[tool.layoutcheck]\ncache-dir = "build-cache"\n')
    age(project)
    check(["."], project)
    age(project)
    code, linted, _, _ = check(["."], project)
    assert code == 1 and linted and stamps(project) == []


def test_a_corrupt_stamp_is_ignored_and_replaced(project):
    code, out, err = stamped(project, ["."])
    (name,) = stamps(project)
    (project / ".layoutcheck_cache" / "replay" / name).write_bytes(b"\x00garbage")
    assert check(["."], project)[:2] == (code, True)
    assert check(["."], project) == (code, False, out, err)


# ---------------------------------------------------------------- the log and the stamp, in process


def test_the_log_records_missing_names_and_a_stamp_depends_on_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = InputLog()
    log.started_ns += 10 * 10**9  # as if the run started 10 s from now: nothing here is racy
    assert not log.is_file(str(tmp_path / "layoutcheck.toml"))
    assert store(["check", "."], log, [(0, "out\n"), (1, "err\n")], 1, str(tmp_path / ".layoutcheck_cache"))
    out, err = _Stream(), _Stream()
    assert replay(["check", "."], out, err) == 1 and (out.text, err.text) == ("out\n", "err\n")
    assert replay(["check", "x"], _Stream(), _Stream()) is None
    (tmp_path / "layoutcheck.toml").write_text("")
    assert replay(["check", "."], _Stream(), _Stream()) is None


def test_a_stamp_depends_on_the_layoutcheck_modules_the_run_loaded(tmp_path, monkeypatch):
    # An edited (editable install) or upgraded layoutcheck never replays an older one's output.
    monkeypatch.chdir(tmp_path)
    source = write(tmp_path, "rule_module.py", "X = 1\n")
    monkeypatch.setitem(sys.modules, "layoutcheck._replay_test_module",
                        types.SimpleNamespace(__file__=str(source)))
    log = InputLog()
    log.started_ns += 10 * 10**9
    assert store(["check"], log, [(0, "x\n")], 0, ".layoutcheck_cache")
    assert replay(["check"], _Stream(), _Stream()) == 0
    source.write_text("X = 2\n")
    assert replay(["check"], _Stream(), _Stream()) is None


def test_recent_times_are_distrusted_for_a_tick_of_their_clock():
    assert racy_window_ns(1_700_000_000_123_456_789) == replay_module.FINE_WINDOW_NS
    assert racy_window_ns(1_700_000_000_000_000_000) == replay_module.COARSE_WINDOW_NS  # whole seconds: FAT, HFS+
    log = InputLog()
    fine = (log.started_ns // 10**6) * 10**6 - 10**9 + 7  # nanoseconds: a fine clock; 1 s old
    log.paths["a"] = (8, 1, 1, fine, 0)
    assert not log.racy()
    log.paths["b"] = (8, 1, 1, (log.started_ns // 10**9) * 10**9, 0)  # a coarse clock, this second
    assert log.racy()


def test_old_stamps_are_pruned(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for i in range(replay_module.MAX_STAMPS + 5):
        log = InputLog()
        log.started_ns += 10 * 10**9
        assert store(["check", str(i)], log, [], 0, ".layoutcheck_cache")
    assert len(stamps(tmp_path)) == replay_module.MAX_STAMPS
    assert stat_key(str(tmp_path / "missing")) is None


class _Stream:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def isatty(self) -> bool:
        return False


def test_stamps_live_in_the_default_cache_folder():
    from layoutcheck.lint.settings import DEFAULT_CACHE_DIR

    assert replay_module.REPLAY_DIR == os.path.join(DEFAULT_CACHE_DIR, "replay")
