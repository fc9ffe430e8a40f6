"""`# noqa` as a ruff user writes it, unused ones reported (LC001), and `--add-noqa` (issue 16).

The engine-level cases use the small test rules (`lint_test_rules`: LC901 flags `pad_me`,
LC902 a call of `max`), so they pin the suppression semantics whatever the padding rules
detect; the command-line cases run `layoutcheck check` in this process.
"""

from __future__ import annotations

import textwrap

import pytest
from lint_test_rules import GlobalMax, PadCall, use_rules

from layoutcheck import cli
from layoutcheck.lint.engine import lint_source
from layoutcheck.lint.noqa import add_noqa, lex_noqa, line_map
from layoutcheck.lint.settings import LintSettings
from layoutcheck.lint.suppressions import UnusedSuppression, rule_names

SETTINGS = LintSettings()
KNOWN = rule_names([PadCall, GlobalMax, UnusedSuppression])


def lint(code: str, *, unused: bool = False):
    rules = (PadCall, GlobalMax, UnusedSuppression) if unused else (PadCall, GlobalMax)
    return lint_source(textwrap.dedent(code), "m.py", rules, SETTINGS, known_rules=KNOWN)


def codes(result) -> list[tuple[int, str]]:
    return sorted((f.line, f.code) for f in result.findings)


# ---------------------------------------------------------------- reading the comment, as ruff does


@pytest.mark.parametrize("comment, expected", [
    ("# noqa", None),
    ("# NOQA", None),
    ("#noqa", None),
    ("# noqa because of reasons", None),  # words after a space: still blanket (ruff)
    ("# noqa# and a comment", None),
    ("# noqa: LC101", ("LC101",)),
    ("#noqa:LC101,LC103", ("LC101", "LC103")),
    ("# noqa: LC101, LC103  E501", ("LC101", "LC103", "E501")),
    ("# noqa   : LC101", ("LC101",)),
    ("# noqa: LC101 the reason", ("LC101",)),  # a reason after the codes
    ("# noqa: global-max-padding, LC103", ("global-max-padding", "LC103")),
    ("# type: ignore[misc]  # noqa: LC101", ("LC101",)),
])
def test_well_formed_directives(comment, expected):
    found = lex_noqa(comment)
    assert found is not None and found.codes == expected
    assert comment[found.start:found.end].lstrip("#").strip().lower().startswith("noqa")


@pytest.mark.parametrize("comment", ["# noqa:", "# noqa: unused", "# noqa; LC101", "#noqaLC101", "# noqa: LC101x",
                                     "# noqa: lc101", "# no qa", "# see noqa docs"])
def test_malformed_or_absent_directives_are_ignored_as_ruff_ignores_them(comment):
    assert lex_noqa(comment) is None


# ---------------------------------------------------------------- what it suppresses


@pytest.mark.parametrize("comment, left", [
    ("# noqa: LC901", [(1, "LC902")]),
    ("# noqa: LC902", [(1, "LC901")]),
    ("# noqa: LC901, LC902", []),
    ("# noqa:LC902 LC901", []),
    ("# noqa", []),
    ("# NoQA", []),
    ("# noqa: pad-call", [(1, "LC902")]),  # a rule name, as the layoutcheck directive takes
    ("# noqa: E501", [(1, "LC901"), (1, "LC902")]),  # another tool's code suppresses nothing of ours
    ("# noqa:", [(1, "LC901"), (1, "LC902")]),  # malformed: ignored
    ("# noqa: lc901", [(1, "LC901"), (1, "LC902")]),  # codes are upper case, as ruff reads them
])
def test_a_noqa_suppresses_the_codes_it_names_on_its_line(comment, left):
    assert codes(lint(f"m = max(pad_me)  {comment}\n")) == left


def test_a_noqa_covers_its_line_not_the_statement_but_a_string_or_continuation_it_ends():
    # A finding that starts on line 1 of a bracketed statement needs the comment on line 1 (ruff) ...
    assert codes(lint("m = max(\n    1,\n)  # noqa: LC902\n")) == [(1, "LC902")]
    # ... while the layoutcheck directive there covers the statement.
    assert codes(lint("m = max(  # layoutcheck: ignore[global-max]\n    1,\n)\n")) == []
    # Inside a multi-line string and across a backslash, only the last line can hold a comment.
    assert codes(lint('m = max("""\nlong\n""")  # noqa: LC902\n')) == []
    assert codes(lint("m = max(1) + \\\n    2  # noqa: LC902\n")) == []
    assert line_map('s = """\na\nb"""\nx = 1\n').covering(1) == 3


# ---------------------------------------------------------------- unused ones (LC001)


@pytest.mark.parametrize("line, problem", [
    ("x = 1  # noqa: LC901", "no `LC901` finding here"),
    ("y = pad_me  # noqa: LC901, LC902", "no `LC902` finding here"),
    ("y = pad_me  # noqa: LC901, LC977", "unknown rule `LC977`"),
    ("x = 1  # noqa: pad-call", "no `pad-call` finding here"),
])
def test_unused_layoutcheck_codes_in_a_noqa_are_reported(line, problem):
    [finding] = lint(line + "\n", unused=True).findings
    assert finding.code == "LC001" and problem in finding.message
    assert (finding.line, finding.column) == (1, line.index("#") + 1)


@pytest.mark.parametrize("line", [
    "x = 1  # noqa",  # bare: may be another tool's
    "x = 1  # noqa: E501",  # another tool's code
    "x = 1  # noqa: E501, F401  # both another tool's",
    "y = pad_me  # noqa: LC901, E501",  # ours used, theirs not ours to judge
])
def test_other_tools_noqa_codes_are_never_reported_as_unused(line):
    assert lint(line + "\n", unused=True).findings == []


# ---------------------------------------------------------------- --add-noqa


def test_add_noqa_writes_merges_and_keeps_what_is_there():
    source = textwrap.dedent("""\
        a = max(pad_me)
        b = pad_me  # why
        c = max(1)  # noqa: E501 too long
        d = pad_me  # noqa
        e = max(\"\"\"
        text
        \"\"\")
        """).replace("\n", "\r\n")
    findings = lint(source).findings
    text, count = add_noqa(source, findings)
    assert count == 4
    assert text == textwrap.dedent("""\
        a = max(pad_me)  # noqa: LC901, LC902
        b = pad_me  # why  # noqa: LC901
        c = max(1)  # noqa: E501, LC902 too long
        d = pad_me  # noqa
        e = max(\"\"\"
        text
        \"\"\")  # noqa: LC902
        """).replace("\n", "\r\n")
    assert lint(text).findings == []
    assert add_noqa(text, lint(text).findings) == (text, 0)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    use_rules(monkeypatch)
    return tmp_path


def test_the_add_noqa_command_as_ruff_users_know_it(project, capsys):
    (project / "a.py").write_text("x = pad_me\nm = max(pad_me)  # noqa: E501\n")
    (project / "b.py").write_text("clean = 1\n")
    assert cli.main(["check", "--add-noqa"]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == ("", "Added 2 noqa directives.\n")
    assert (project / "a.py").read_text() == "x = pad_me  # noqa: LC901\nm = max(pad_me)  # noqa: E501, LC901, LC902\n"
    assert cli.main(["check", "--report-unused-suppressions"]) == 0
    assert cli.main(["check", "--add-noqa"]) == 0
    assert capsys.readouterr().err.endswith("Added 0 noqa directives.\n")
    assert cli.main(["check", "--add-noqa", "--fix"]) == 2
    assert "cannot be combined" in capsys.readouterr().err
