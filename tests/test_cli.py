"""The command line: exit codes, output streams, flags, rule docs, and what it imports.

In-process calls of `cli.main` (with the test rules patched into the
registry) cover behaviour; a few real subprocess runs cover what only a
process shows: the exit status of ``python -m layoutcheck`` and the modules
a run imports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from lint_test_rules import DEFAULT_TEST_RULES, use_rules

from layoutcheck import cli

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A folder to check, as the working folder, with the test rules as the registry."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    use_rules(monkeypatch)
    return tmp_path


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def command(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``layoutcheck ARGV`` in this process: exit status, stdout, stderr."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def check(capsys, *args: str) -> tuple[int, str, str]:
    return command(capsys, "check", *args)


def config(capsys, *args: str) -> tuple[int, str, str]:
    return command(capsys, "config", *args)


# ---------------------------------------------------------------- exit codes and streams


def test_clean_run_exits_0_with_the_summary_on_stderr(project, capsys):
    write(project, "a.py", "x = 1\n")
    assert check(capsys) == (0, "", "All checks passed!\n")


NO_FILES = "layoutcheck: warning: no Python files found under the given path(s)\n"


@pytest.mark.parametrize("contents", ["empty", "no-python"])
def test_a_folder_without_python_files_is_a_warning_and_no_pass(project, capsys, contents):
    # ruff warns "No Python files found" and exits 0 (and prints "All checks passed!"); a check of nothing is
    # no pass, so layoutcheck exits 1, as for findings, and 0 only under --exit-zero.
    (project / "src").mkdir()
    if contents == "no-python":
        write(project, "src/README.md", "# no code here\n")
        write(project, "src/data/lengths.txt", "128\n")
    assert check(capsys, "src") == (1, "", NO_FILES)
    assert check(capsys, "src", "--exit-zero") == (0, "", NO_FILES)
    assert check(capsys, "src", "-q") == (1, "", NO_FILES)  # the reason for the status, even when quiet
    assert check(capsys, "src", "-q", "--exit-zero") == (0, "", "")
    assert check(capsys, "src", "--output-format", "json") == (1, "[]\n", NO_FILES)
    write(project, "src/a.py", "x = 1\n")
    assert check(capsys, "src") == (0, "", "All checks passed!\n")


def test_files_excluded_by_the_configuration_are_not_a_missing_project(project, capsys):
    # The pre-commit hook names staged files that `exclude` may drop: nothing left to check is still a pass.
    write(project, "pyproject.toml", '[tool.layoutcheck]\nexclude = ["generated"]\n')
    write(project, "generated/a.py", "y = pad_me\n")
    assert check(capsys, "--force-exclude", "generated/a.py") == (0, "", "All checks passed!\n")
    assert check(capsys, "generated/../generated/a.py", "--force-exclude")[0] == 0


def test_a_symbolic_link_loop_named_on_the_command_line_exits_2_like_a_missing_path(project, capsys):
    (project / "loop_a").symlink_to(project / "loop_b")
    (project / "loop_b").symlink_to(project / "loop_a")
    write(project, "a.py", "x = 1\n")
    missing = check(capsys, "a.py", "gone.py")
    assert missing == (2, "gone.py: error: no such file or directory\n",
                       "1 path could not be checked (errors above).\n")
    code, out, err = check(capsys, "a.py", "loop_a")
    assert (code, err) == missing[::2] and out == "loop_a: error: symbolic link loop: the path resolves to nothing\n"
    code, out, _ = check(capsys, "loop_a", "--output-format", "json")
    assert code == 2 and [(e["rule"], e["path"]) for e in json.loads(out)] == [("missing-path", "loop_a")]


def test_findings_exit_1_sorted_on_stdout_with_a_summary(project, capsys):
    write(project, "b.py", "m = max(pad_me)\n")
    write(project, "a.py", "x = 1\ny = pad_me\n")
    code, out, err = check(capsys, "--output-format", "concise")
    assert code == 1
    assert out.splitlines() == [
        "a.py:2:5: LC901 [pad-call] `pad_me` pads by hand; use `padded`.",
        "b.py:1:5: LC902 [global-max] `max` over lengths; read `max_seq_lens` instead.",
        "b.py:1:9: LC901 [pad-call] `pad_me` pads by hand; use `padded`.",
    ]
    assert err == "Found 3 findings in 2 files (2 fixable with --fix).\n"
    assert "\x1b[" not in out  # not a terminal: no colour


def test_a_check_leaves_the_collector_as_it_found_it(project, capsys):
    """`check` freezes what its run built while it shows the findings (no full collection scans it
    again); a process that runs many checks (the tests, an editor) gets the collector back as it was."""
    import gc

    write(project, "a.py", "y = pad_me\n")
    assert (gc.isenabled(), gc.get_freeze_count()) == (True, 0)
    assert check(capsys, "--no-cache")[0] == 1
    assert (gc.isenabled(), gc.get_freeze_count()) == (True, 0)
    gc.disable()
    try:
        assert check(capsys, "--no-cache")[0] == 1
        assert (gc.isenabled(), gc.get_freeze_count()) == (False, 0)  # off stays off, nothing frozen
    finally:
        gc.enable()


def test_exit_zero_and_quiet(project, capsys):
    write(project, "a.py", "y = pad_me\n")
    code, out, err = check(capsys, "--exit-zero", "--quiet", "--output-format", "concise")
    assert (code, err) == (0, "") and out.startswith("a.py:1:5:")


def test_a_syntax_error_is_a_finding_exit_1(project, capsys):
    write(project, "bad.py", "def f(:\n")
    code, out, err = check(capsys, "--output-format", "concise")
    assert code == 1 and "bad.py:1" in out and "syntax error" in out
    assert "could not be checked" in err


def test_a_syntax_error_is_a_sarif_result_exit_1(project, capsys):
    write(project, "bad.py", "def f(:\n")
    write(project, "a.py", "y = pad_me\n")
    code, out, _ = check(capsys, "--output-format", "sarif")
    run = json.loads(out)["runs"][0]
    assert code == 1 and run["invocations"][0]["executionSuccessful"] is True
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]) for r in run["results"]] \
        == [("LC901", "a.py"), ("invalid-input", "bad.py")]
    assert run["results"][1]["locations"][0]["physicalLocation"]["region"]["startLine"] == 1
    assert run["tool"]["driver"]["rules"][run["results"][1]["ruleIndex"]]["id"] == "invalid-input"


def test_a_missing_path_exits_2_but_the_rest_is_still_reported(project, capsys):
    write(project, "a.py", "y = pad_me\n")
    code, out, err = check(capsys, "a.py", "nope.py", "--output-format", "concise")
    assert code == 2
    assert "a.py:1:5: LC901" in out and "nope.py" in out and "no such file or directory" in out


def test_a_crashing_rule_exits_2(project, capsys, monkeypatch):
    from lint_test_rules import CrashyRule

    use_rules(monkeypatch, (*DEFAULT_TEST_RULES, CrashyRule))
    write(project, "a.py", "explode()\ny = pad_me\n")
    code, out, _ = check(capsys, "--output-format", "concise")
    assert code == 2 and "crashy-rule" in out and "a.py:2:5: LC901" in out


def test_unknown_rule_in_select_exits_2_listing_valid_names(project, capsys):
    write(project, "a.py", "x = 1\n")
    code, out, err = check(capsys, "--select", "pad-cal")
    assert code == 2 and out == ""
    assert err.startswith("layoutcheck: error: unknown rule 'pad-cal' in --select; valid: LC001 unused-suppression, "
                          "LC901 pad-call, LC902 global-max, LC951 noisy-thing")


def test_bad_config_exits_2_naming_key_value_and_file(project, capsys):
    write(project, "pyproject.toml", "[tool.layoutcheck]\nbucket-quantum = 'big'\n")
    write(project, "a.py", "x = 1\n")
    code, out, err = check(capsys)
    assert code == 2
    assert f"1 error in {project / 'pyproject.toml'}:" in err
    assert "tool.layoutcheck.bucket-quantum" in err and '[value: "big", type: string]' in err


@pytest.mark.parametrize("args", [["--output-format", "xml"], ["--jobs", "-1"], ["--bogus"]])
def test_argument_errors_exit_2(project, capsys, args):
    assert cli.main(["check", *args]) == 2
    assert "usage: layoutcheck" in capsys.readouterr().err


def test_no_command_and_help(capsys):
    assert cli.main([]) == 2
    assert cli.main(["--help"]) == 0
    assert "check" in capsys.readouterr().out


# ---------------------------------------------------------------- flags


def test_select_ignore_extend_select_accept_codes_prefixes_names_and_commas(project, capsys):
    write(project, "a.py", "m = max(pad_me)\nn = noisy\n")
    code, out, _ = check(capsys, "--select", "LC9", "--ignore", "pad-call,LC902", "--output-format", "concise")
    assert [line.split()[1] for line in out.splitlines()] == ["LC951"]
    code, out, _ = check(capsys, "--extend-select", "noisy-thing", "--output-format", "concise")
    assert [line.split()[1] for line in out.splitlines()] == ["LC902", "LC901", "LC951"]


def _codes(out: str) -> list[str]:
    return [line.split()[1] for line in out.splitlines()]


@pytest.mark.parametrize(("args", "config", "runs"), [
    ([], "", False),  # on by default, but in preview: left out
    (["--select", "LC9"], "", False),  # a prefix does not reach a preview rule (ruff)
    (["--select", "ALL"], "", False),  # nor does ALL
    (["--select", "LC952"], "", True),  # its exact code does
    (["--extend-select", "preview-thing"], "", True),  # and its name
    (["--preview"], "", True),  # preview on: the default set holds it
    (["--preview", "--select", "LC9"], "", True),  # and prefixes reach it
    (["--preview", "--ignore", "LC952"], "", False),  # ignore still wins
    ([], "preview = true\n", True),  # the configured setting
    (["--no-preview"], "preview = true\n", False),  # the command line over it
    ([], 'extend-select = ["LC952"]\n', True),  # a configured exact selector
])
def test_a_preview_rule_runs_under_preview_or_when_named_exactly(project, capsys, monkeypatch, args, config, runs):
    from lint_test_rules import PreviewThing

    use_rules(monkeypatch, (*DEFAULT_TEST_RULES, PreviewThing))
    write(project, "layoutcheck.toml", config)
    write(project, "a.py", "x = fresh\ny = pad_me\n")
    code, out, err = check(capsys, "--output-format", "concise", *args)
    assert ("LC952" in _codes(out)) == runs, (args, config, out, err)
    if not args[:1] == ["--select"] and "--ignore" not in args:
        assert "LC901" in _codes(out)  # the stable rules run either way


def test_preview_changes_the_cached_result(project, capsys, monkeypatch):
    # The cache key holds --preview: a cached run without it must not answer a run with it.
    from lint_test_rules import PreviewThing

    use_rules(monkeypatch, (*DEFAULT_TEST_RULES, PreviewThing))
    write(project, "layoutcheck.toml", "")
    write(project, "a.py", "x = fresh\n")
    assert check(capsys, "--output-format", "concise")[0] == 0
    assert "LC952" in _codes(check(capsys, "--output-format", "concise", "--preview")[1])


def test_json_output_is_a_sorted_list(project, capsys):
    write(project, "a.py", "m = max(pad_me)\n")
    code, out, _ = check(capsys, "--output-format", "json")
    items = json.loads(out)
    assert code == 1 and [(i["rule"], i["line"], i["column"]) for i in items] == [
        ("global-max", 1, 5), ("pad-call", 1, 9)]
    assert items[0]["path"] == "a.py" and items[0]["code"] == "LC902"


def test_statistics(project, capsys):
    write(project, "a.py", "m = max(pad_me)\nn = pad_me\n")
    code, out, err = check(capsys, "--statistics")
    assert code == 1
    assert [line.split() for line in out.splitlines()] == [["2", "LC901", "[*]", "pad-call"],
                                                          ["1", "LC902", "[", "]", "global-max"]]


def test_statistics_honour_the_json_output_format_as_ruff_does(project, capsys):
    write(project, "a.py", "m = max(pad_me)\nn = pad_me\n")
    code, out, err = check(capsys, "--statistics", "--output-format", "json")
    assert code == 1 and err == "Found 3 findings in 1 file (2 fixable with --fix).\n"
    assert json.loads(out) == [  # ruff's fields
        {"code": "LC901", "name": "pad-call", "count": 2, "fixable": True, "fixable_count": 2},
        {"code": "LC902", "name": "global-max", "count": 1, "fixable": False, "fixable_count": 0},
    ]
    assert check(capsys, "--statistics", "--output-format", "concise")[1] == check(capsys, "--statistics")[1]
    write(project, "a.py", "x = 1\n")
    assert check(capsys, "--statistics", "--output-format", "json")[:2] == (0, "[]\n")
    for output_format in ("github", "sarif"):  # no statistics form: a usage error, as in ruff
        code, out, err = check(capsys, "--statistics", "--output-format", output_format)
        assert (code, out) == (2, "") and err == (
            f"layoutcheck: error: --statistics prints counts as text or concise or json; --output-format "
            f"{output_format} has no statistics form\n")


def test_jobs_do_not_change_the_output(project, capsys):
    for i in range(12):
        write(project, f"m{i:02d}.py", "m = max(pad_me)\n" * (i % 3 + 1))
    one = check(capsys, "--jobs", "1", "--no-cache")
    two = check(capsys, "--jobs", "2", "--no-cache")
    assert one == two and one[0] == 1


def test_fix_then_clean(project, capsys):
    path = write(project, "a.py", "x = pad_me\nm = max(1)\n")
    code, out, err = check(capsys, "--fix", "--output-format", "concise")
    assert path.read_text() == "x = padded\nm = max(1)\n"
    assert code == 1 and out.splitlines() == [
        "a.py:2:5: LC902 [global-max] `max` over lengths; read `max_seq_lens` instead."]
    assert err.splitlines() == ["Fixed 1 finding in 1 file.", "Found 1 finding in 1 file."]
    code, _, err = check(capsys, "--fix", "--ignore", "global-max")
    assert code == 0 and err == "All checks passed!\n"


def test_diff_prints_a_unified_diff_and_writes_nothing(project, capsys):
    path = write(project, "a.py", "x = pad_me\ny = 2\n")
    code, out, err = check(capsys, "--diff")
    assert code == 1 and path.read_text() == "x = pad_me\ny = 2\n"
    assert out == "--- a.py\n+++ a.py\n@@ -1,2 +1,2 @@\n-x = pad_me\n+x = padded\n y = 2\n"
    assert err == "Would fix 1 finding in 1 file.\n"
    path.write_text("y = 2\n")
    assert check(capsys, "--diff") == (0, "", "No fixes available.\n")


def test_report_unused_suppressions(project, capsys):
    write(project, "a.py", "x = 1  # layoutcheck: ignore[pad-call]\ny = pad_me  # layoutcheck: ignore[pad-call]\n")
    assert check(capsys)[0] == 0
    code, out, _ = check(capsys, "--report-unused-suppressions", "--output-format", "concise")
    assert code == 1 and out.startswith("a.py:1:8: LC001 [unused-suppression] Unused suppression: no `pad-call`")
    assert len(out.splitlines()) == 1


def test_config_outside_the_tree_is_honoured(project, capsys, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "layoutcheck.toml"
    outside.write_text('ignore = ["pad-call"]\n')
    write(project, "pyproject.toml", '[tool.layoutcheck]\nselect = ["ALL"]\n')
    write(project, "a.py", "y = pad_me\n")
    assert check(capsys, "--config", str(outside))[0] == 0
    assert check(capsys)[0] == 1
    code, _, err = check(capsys, "--config", str(project / "nope.toml"))
    assert code == 2 and "does not exist" in err


def test_explicit_excluded_file_is_checked(project, capsys):
    write(project, "pyproject.toml", '[tool.layoutcheck]\nexclude = ["generated"]\n')
    write(project, "generated/a.py", "y = pad_me\n")
    assert check(capsys) == (0, "", "All checks passed!\n")
    code, out, _ = check(capsys, "generated/a.py", "--output-format", "concise")
    assert code == 1 and out.startswith("generated/a.py:1:5:")


def test_force_exclude_skips_named_excluded_files_and_folders(project, capsys):
    # What the pre-commit hook runs: pre-commit names the staged files.
    write(project, "pyproject.toml", '[tool.layoutcheck]\nexclude = ["generated"]\n')
    write(project, "generated/a.py", "y = pad_me\n")
    write(project, "src/b.py", "x = 1\n")
    assert check(capsys, "--force-exclude", "generated/a.py", "src/b.py") == (0, "", "All checks passed!\n")
    assert check(capsys, "--force-exclude", "generated") == (0, "", "All checks passed!\n")
    write(project, "src/c.py", "z = pad_me\n")
    code, out, _ = check(capsys, "--force-exclude", "generated/a.py", "src/c.py", "--output-format", "concise")
    assert code == 1 and out.splitlines() == ["src/c.py:1:5: LC901 [pad-call] `pad_me` pads by hand; use `padded`."]


def test_the_pre_commit_hook_passes_force_exclude():
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text()
    entries = [line.split(":", 1)[1].strip() for line in hooks.splitlines() if line.strip().startswith("entry:")]
    assert entries == ["layoutcheck check --force-exclude"]


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    class Tty:
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    assert cli._use_color(Tty()) is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert cli._use_color(Tty()) is False
    monkeypatch.delenv("NO_COLOR")
    assert cli._use_color(sys.stderr) in (False, True)  # whatever pytest gives; must not raise


# ---------------------------------------------------------------- rules, rule, demo


def test_rules_table(project, capsys):
    assert cli.main(["rules"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["Code", "Name", "Status", "Default", "Precision", "Fix", "Summary"]
    assert lines[1].split()[:6] == ["LC001", "unused-suppression", "stable", "off", "-", "no"]
    assert lines[2].split()[:6] == ["LC901", "pad-call", "stable", "on", "-", "safe"]
    assert lines[4].split()[:6] == ["LC951", "noisy-thing", "stable", "off", "-", "no"]


def test_rules_table_shows_each_real_rules_status_and_measured_precision(capsys):
    # The real registry: every rule's status and precision come from the precision table.
    from layoutcheck.lint.precision import MEASURED

    assert cli.main(["rules"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("LC")}
    for code, measured in MEASURED.items():
        status, default, precision = rows[code][2:5]
        assert status == measured.status, code
        assert (default == "on") == (measured.status == "stable"), code
        assert precision == (f"{measured.true}/{measured.findings}" if measured.findings else "0/0"), code
    assert rows["LC112"][2] == "preview" and rows["LC104"][2] == "stable"


def test_rule_names_a_preview_rules_status_and_how_to_run_it(capsys):
    assert cli.main(["rule", "LC112"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("Status: preview (precision on the corpus: ")
    assert "runs with --preview, or when selected as LC112 or partner-field-left-out" in out
    assert "Default: off." in out
    assert cli.main(["rule", "LC104", "--output-format", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["status"] == "stable" and record["default_enabled"] is True
    assert record["precision"]["findings"] >= record["precision"]["true"] > 0


def test_rule_by_name_or_code_prints_docs_message_and_examples(project, capsys):
    assert cli.main(["rule", "LC901"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("pad-call (LC901)\nStatus: stable.\nDefault: on. Autofix: safe (--fix).")
    assert "## What it does" in out and "`pad_me` pads by hand; use `padded`." in out
    assert "Flagged (1):\n    pad_me(x)\n  fixed to (safe fix):\n    padded(x)" in out
    assert cli.main(["rule", "pad-call"]) == 0 and capsys.readouterr().out == out


def test_rule_all_json_dumps_every_rule(project, capsys):
    assert cli.main(["rule", "--all", "--output-format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["code"] for r in records] == ["LC001", "LC901", "LC902", "LC951"]
    pad = records[1]
    assert set(pad) >= {"code", "name", "message", "default_enabled", "fixable", "docs", "examples"}
    assert pad["fixable"] is True and pad["examples"]["invalid"][0]["replacement"] == "padded(x)\n"


def test_rule_errors(project, capsys):
    assert cli.main(["rule", "nope"]) == 2
    assert "unknown rule 'nope'; valid: LC001 unused-suppression, LC901 pad-call" in capsys.readouterr().err
    assert cli.main(["rule"]) == 2
    assert cli.main(["rule", "pad-call", "--all"]) == 2


def test_demo_passes_its_arguments_through(monkeypatch):
    import types

    seen = []
    fake = types.ModuleType("layoutcheck.demo")
    fake.main = lambda argv=None: seen.append(argv) or 7  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "layoutcheck.demo", fake)
    assert cli.main(["demo", "--bug", "global-padding", "--help"]) == 7
    assert seen == [["--bug", "global-padding", "--help"]]


def test_config_without_a_table_says_defaults_and_lists_every_key(project, capsys):
    import dataclasses
    import tomllib

    from layoutcheck.lint.settings import CheckSettings, kebab

    code, out, err = config(capsys)
    assert (code, err) == (0, "")
    assert out.splitlines()[:2] == ["# layoutcheck configuration for .", "# no [tool.layoutcheck] table: defaults"]
    values = tomllib.loads(out)  # the text format is TOML
    for f in dataclasses.fields(CheckSettings):
        assert kebab(f.name) in values or f"# {kebab(f.name)}: not set" in out, f.name
    assert values["sources"] == [] and values["owners"] == {"bshd": [], "thd": []}  # names are hints: none by default
    assert values["runtime"]["mode"] == "raise" and values["runtime"]["hooks"] == {}  # the debug mode's defaults


def test_config_names_its_file_and_shows_the_resolved_values(project, capsys):
    file = write(project, "pyproject.toml", """\
        [tool.layoutcheck]
        select = ["LC9"]
        exclude = ["generated"]
        per-file-ignores = { "tests/*" = ["pad-call"] }
        owners = { thd = ["pkg.mod:pack"] }
        bucket-quantum = 256

        [tool.layoutcheck.runtime]
        mode = "warn"
        """)
    write(project, "pkg/a.py", "x = 1\n")
    code, out, err = config(capsys, "pkg")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:3] == ["# layoutcheck configuration for pkg", f"# from {file} [tool.layoutcheck]",
                         f"# relative paths are relative to {project}"]
    assert 'select = ["LC9"]' in lines and 'exclude = ["generated"]' in lines and "bucket-quantum = 256" in lines
    assert '[per-file-ignores]\n"tests/*" = ["pad-call"]' in out
    assert '[owners]\nthd = ["pkg.mod:pack"]' in out and '[runtime]\nmode = "warn"' in out


def test_config_shows_the_hooks_a_preset_installs(project, capsys):
    write(project, "pyproject.toml", """\
        [tool.layoutcheck.runtime]
        preset = "miles"
        hooks = { producer = ["mytrainer.data:get_rollout_data"] }
        """)
    code, out, err = config(capsys, "--output-format", "json")
    assert (code, err) == (0, "")
    runtime = json.loads(out)["settings"]["runtime"]
    assert runtime["hooks"]["producer"] == ["mytrainer.data:get_rollout_data"]  # the explicit role wins
    assert runtime["hooks"]["batch-builder"] == ["miles.backends.training_utils.data:get_batch"]
    assert runtime["parallel-state"] == "miles.backends.training_utils.parallel:get_parallel_state"
    write(project, "pyproject.toml", "[tool.layoutcheck.runtime]\nmode = 'loud'\n")
    code, out, err = config(capsys)
    assert code == 2 and "tool.layoutcheck.runtime.mode" in err


def test_config_json_round_trips_to_the_settings(project, capsys):
    from layoutcheck.lint.settings import CheckSettings

    write(project, "layoutcheck.toml", 'ignore = ["noisy-thing"]\ncache-dir = "var/cache"\n')
    code, out, _ = config(capsys, "--output-format", "json")
    data = json.loads(out)
    assert code == 0
    assert (data["path"], data["file"], data["table"], data["root"]) == (
        ".", str(project / "layoutcheck.toml"), "", str(project))
    settings = {key.replace("-", "_"): value for key, value in data["settings"].items() if key != "runtime"}
    assert CheckSettings.from_json(settings) == CheckSettings(ignore=("noisy-thing",), cache_dir="var/cache")
    assert data["settings"]["runtime"]["hooks"] == {} and data["settings"]["runtime"]["mode"] == "raise"
    write(project, "layoutcheck.toml", "")
    code, out, _ = config(capsys, "--output-format", "json")
    assert code == 0 and json.loads(out)["file"] == str(project / "layoutcheck.toml")


def test_config_text_output_is_a_layoutcheck_toml_that_reads_back_the_same(project, capsys):
    from layoutcheck.configfile import load_config

    write(project, "pyproject.toml", """\
        [tool.layoutcheck]
        ignore = ["LC902"]
        per-file-ignores = { "tests/*" = ["pad-call"], "a b.py" = ["LC9"] }
        length-names = ["*seq_len*", 'quoted"name']
        """)
    code, out, _ = config(capsys)
    assert code == 0
    write(project, "elsewhere/layoutcheck.toml", out)
    original = load_config(project / "pyproject.toml").settings(use_cache=False)
    assert load_config(project / "elsewhere/layoutcheck.toml").settings(use_cache=False) == original


def test_config_errors_exit_2_as_in_check(project, capsys):
    write(project, "pyproject.toml", "[tool.layoutcheck]\nbucket-quantum = 'big'\n")
    code, out, err = config(capsys)
    assert (code, out) == (2, "")
    assert f"1 error in {project / 'pyproject.toml'}:" in err and '[value: "big", type: string]' in err
    assert err == check(capsys)[2]  # the same message as `check`
    write(project, "pyproject.toml", '[tool.layoutcheck]\nignore = ["pad-cal"]\n')
    code, _, err = config(capsys)
    assert code == 2 and err.startswith(
        f"layoutcheck: error: unknown rule 'pad-cal' in tool.layoutcheck.ignore in {project / 'pyproject.toml'}")
    write(project, "pyproject.toml", "[tool.layoutcheck\n")
    assert config(capsys)[0] == 2
    assert config(capsys, "--config", "nope.toml")[0] == 2
    code, _, err = config(capsys, "nowhere")
    assert code == 2 and "nowhere: no such file or directory" in err


def test_config_of_a_project_writes_nothing_into_it_and_accepts_no_cache(project, capsys):
    # `layoutcheck config PATH` asks a question; it used to leave a validated-config cache in the project.
    write(project, "proj/pyproject.toml", '[tool.layoutcheck]\nlint-tests = true\nexclude = ["gen"]\n')
    before = sorted(p.relative_to(project) for p in project.rglob("*"))
    for args in (("proj",), ("proj", "--no-cache"), ("--output-format", "json", "proj"), ("proj",)):
        code, out, err = config(capsys, *args)
        assert (code, err) == (0, "") and ("lint-tests = true" in out or '"lint-tests": true' in out)
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == before
    write(project, "proj/pyproject.toml", '[tool.layoutcheck]\nlint-tests = "yes"\n')  # validated afresh each time
    code, _, err = config(capsys, "proj")
    assert code == 2 and "tool.layoutcheck.lint-tests" in err


@pytest.mark.parametrize("command_name", ["check", "config"])
def test_config_naming_a_folder_says_to_name_the_file_in_it(project, capsys, command_name):
    write(project, "a.py", "x = 1\n")
    write(project, "pyproject.toml", '[tool.layoutcheck]\nignore = ["pad-call"]\n')
    code, out, err = command(capsys, command_name, "--config", ".")
    assert (code, out) == (2, "")
    assert err == (f"layoutcheck: error: {project} is a folder, not a configuration file: name the file in it "
                   f"({project / 'pyproject.toml'})\n")
    (project / "pyproject.toml").unlink()
    code, _, err = command(capsys, command_name, "--config", ".")
    assert code == 2 and err.endswith(f"({project / 'layoutcheck.toml'} or {project / 'pyproject.toml'}); "
                                      "that folder has neither\n")


def test_config_reference_lists_every_key(project, capsys):
    import dataclasses

    from layoutcheck.lint.settings import CheckSettings, kebab
    from layoutcheck.runtime.hooks.settings import RuntimeSettings

    code, out, _ = config(capsys, "--reference")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "| Key | Type | Default | Description |"
    named = [line.split("|")[1].strip().strip("`") for line in lines[2:]]
    runtime = [f"runtime.{kebab(f.name)}" for f in dataclasses.fields(RuntimeSettings)]
    assert sorted(named) == sorted([kebab(f.name) for f in dataclasses.fields(CheckSettings)] + runtime)
    assert "one of `raise`, `warn`, `record`" in out and "| `runtime.cross-rank-timeout` | positive number |" in out
    code, out, _ = config(capsys, "--reference", "--output-format", "json")
    records = {r["key"]: r for r in json.loads(out)}
    assert records["bucket-quantum"] == {
        "key": "bucket-quantum", "type": "positive integer", "default": 128,
        "description": "Bucket lengths must be multiples of this.",
    }
    assert config(capsys, "--reference", ".")[0] == 2


def _python(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("NO_COLOR", None)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=120)


def test_python_m_layoutcheck_exit_codes(tmp_path):
    write(tmp_path, "ok/a.py", "x = 1\n")
    write(tmp_path, "bad/b.py", "def f(:\n")
    clean = _python(["-m", "layoutcheck", "check", "ok"], tmp_path)
    assert (clean.returncode, clean.stdout, clean.stderr) == (0, "", "All checks passed!\n")
    broken = _python(["-m", "layoutcheck", "check", "bad", "--output-format", "concise"], tmp_path)
    assert broken.returncode == 1 and broken.stdout.startswith("bad/b.py:1:")
    missing = _python(["-m", "layoutcheck", "check", "nowhere"], tmp_path)
    assert missing.returncode == 2
    usage = _python(["-m", "layoutcheck", "check", "--output-format", "xml"], tmp_path)
    assert usage.returncode == 2 and "invalid choice" in usage.stderr


_PROBE = """
import json, sys
from layoutcheck.cli import main
code = main(sys.argv[1:])
heavy = sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in ('torch', 'typeguard', 'libcst', 'pydantic', 'numpy')})
codemod = 'libcst.codemod' in sys.modules
print(json.dumps({'code': code, 'heavy': heavy, 'codemod': codemod}), file=sys.stderr)
"""


def _probe(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict:
    done = _python(["-c", _PROBE, *args], cwd, env)
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_check_never_imports_torch_or_typeguard_even_in_workers(tmp_path):
    # A sentinel torch/typeguard first on the path records any import, from the
    # main process or a pool worker, even one a `try: import torch` would hide.
    sentinel = tmp_path / "sentinel"
    marker = tmp_path / "imported.txt"
    for name in ("torch", "typeguard"):
        write(sentinel, f"{name}/__init__.py",
              f"open({str(marker)!r}, 'a').write('{name}\\n')\nraise ImportError('sentinel {name}')\n")
    for i in range(12):
        write(tmp_path, f"tree/m{i}.py",
              "import torch\nmax_seq_lens = [max(total_lengths)] * len(tokens)\n"
              "x = torch.full((n,), max_seq_lens[0])\n")
    env = {"PYTHONPATH": os.pathsep.join([str(sentinel), os.environ.get("PYTHONPATH", "")])}
    seen = _probe(["check", "tree", "--jobs", "2", "--no-cache", "--exit-zero"], tmp_path, env)
    assert seen["code"] in (0, 1) and "torch" not in seen["heavy"] and "typeguard" not in seen["heavy"]
    assert not seen["codemod"]
    assert not marker.exists(), marker.read_text()


def test_help_imports_neither_pydantic_nor_libcst(tmp_path):
    seen = _probe(["--help"], tmp_path)
    assert seen == {"code": 0, "heavy": [], "codemod": False}


def test_config_imports_pydantic_only_to_validate_a_table_and_never_libcst(tmp_path):
    assert _probe(["config"], tmp_path) == {"code": 0, "heavy": [], "codemod": False}
    assert _probe(["config", "--reference"], tmp_path) == {"code": 0, "heavy": [], "codemod": False}
    write(tmp_path, "pyproject.toml", '[tool.layoutcheck]\nbucket-quantum = 256\n')
    assert _probe(["config"], tmp_path) == {"code": 0, "heavy": ["pydantic"], "codemod": False}
    # `config` stores nothing, so it validates again; once a `check` stored the validated table, it reads that.
    assert _probe(["config"], tmp_path) == {"code": 0, "heavy": ["pydantic"], "codemod": False}
    assert _probe(["check", "--exit-zero"], tmp_path)["code"] == 0
    assert _probe(["config"], tmp_path) == {"code": 0, "heavy": [], "codemod": False}
    assert _probe(["config", "--no-cache"], tmp_path) == {"code": 0, "heavy": ["pydantic"], "codemod": False}


def test_a_warm_run_imports_neither_libcst_nor_pydantic(tmp_path):
    # The padding rules query the model, which `ast` builds: not even a cold run needs libcst.
    write(tmp_path, "pyproject.toml", '[tool.layoutcheck]\nexclude = ["skipped"]\n')
    for i in range(3):
        write(tmp_path, f"pkg/m{i}.py", "max_seq_lens = [max(total_lengths)] * len(tokens)\n")
    cold = _probe(["check", "pkg", "--exit-zero"], tmp_path)
    assert cold["code"] == 0 and "libcst" not in cold["heavy"] and "pydantic" in cold["heavy"]
    warm = _probe(["check", "pkg", "--exit-zero"], tmp_path)
    if warm["heavy"]:  # someone saved a rule between the two runs: its stat changed the fingerprint
        warm = _probe(["check", "pkg", "--exit-zero"], tmp_path)
    assert warm == {"code": 0, "heavy": [], "codemod": False}
