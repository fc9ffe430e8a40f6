"""The per-file engine: findings, suppressions, rule crashes, bad input, fixes."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from lint_test_rules import ALL_TEST_RULES, BrokenFix, CrashyRule, GlobalMax, NoisyThing, PadCall, WhereAmI

from layoutcheck.lint.engine import lint_bytes, lint_source
from layoutcheck.lint.findings import INTERNAL, INVALID_INPUT
from layoutcheck.lint.fix import fix_source
from layoutcheck.lint.rule import Invalid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.lint.suppressions import UnusedSuppression, parse_suppressions, rule_names

SETTINGS = LintSettings()
KNOWN = rule_names([*ALL_TEST_RULES, UnusedSuppression])


def lint(code: str, rules=(PadCall, GlobalMax), *, unused: bool = False, path: str = "m.py"):
    rules = (*rules, UnusedSuppression) if unused else tuple(rules)
    return lint_source(textwrap.dedent(code), path, rules, SETTINGS, known_rules=KNOWN)


def where(result) -> list[tuple[int, int, str]]:
    return [(f.line, f.column, f.rule) for f in result.findings]


# ---------------------------------------------------------------- findings


def test_findings_are_sorted_with_one_based_columns_and_ranges():
    result = lint("""\
        m = max(pad_me(1), 2)
        x = 1; y = pad_me
    """)
    assert where(result) == [(1, 5, "global-max"), (1, 9, "pad-call"), (2, 12, "pad-call")]
    first = result.findings[0]
    assert (first.end_line, first.end_column) == (1, 22)
    assert first.code == "LC902" and "max_seq_lens" in first.message
    assert result.findings[1].fixable and not first.fixable
    assert result.errors == [] and result.error is None


def test_prefilter_skips_the_parse_but_syntax_is_still_checked():
    clean = lint("x = 1\n")
    assert clean.findings == [] and not clean.parsed
    broken = lint("def f(:\n    pass\n")
    assert not broken.parsed
    [error] = broken.errors
    assert (error.line, error.column, error.kind) == (1, 7, INVALID_INPUT)
    assert error.message.startswith("syntax error")


def test_the_verdict_on_unparsed_files_is_libcsts_as_for_parsed_ones():
    # CPython's symbol table rejects this, libcst (and so a parsed file) accepts it.
    assert lint("def f():\n    nonlocal q\n").errors == []
    assert lint("def f():\n    nonlocal q\n    pad_me\n").errors == []
    [error] = lint("x = 1\0\n").errors
    assert error.line == 1 and "null bytes" in error.message


def test_syntax_error_in_a_parsed_file_names_line_and_column():
    result = lint("x = pad_me(\n\nclass :\n")
    [error] = result.errors
    assert error.path == "m.py" and error.line is not None and error.kind == INVALID_INPUT
    assert "syntax error" in error.message and result.error == error.message


def test_module_name_reaches_the_rules():
    result = lint_source("where_am_i\n", "pkg/mod.py", [WhereAmI], SETTINGS, module_name="pkg.mod")
    assert result.findings[0].message == "module is pkg.mod"


def test_empty_file_is_clean_not_an_error():
    # An empty file is valid Python (every empty __init__.py): reporting it would fail every repo.
    for source in ("", "\n", "   \n"):
        result = lint_source(source, "e.py", [PadCall, GlobalMax, WhereAmI], SETTINGS)
        assert result.findings == [] and result.errors == []


# ---------------------------------------------------------------- rule crashes


def test_a_crashing_rule_becomes_an_error_naming_it_and_the_others_still_report():
    result = lint("explode()\nm = max(pad_me)\n", rules=(CrashyRule, PadCall, GlobalMax))
    assert where(result) == [(2, 5, "global-max"), (2, 9, "pad-call")]
    [error] = result.errors
    assert error.kind == INTERNAL
    assert "`crashy-rule` (LC990) crashed" in error.message
    assert "RuntimeError: rule bug on purpose" in error.message
    assert "lint_test_rules.py" in error.message


def test_a_crashing_prefilter_is_contained_too():
    class BadPrefilter(PadCall):
        """Prefilter raises."""

        code = "LC991"

        @classmethod
        def could_match(cls, source, settings):
            raise KeyError("nope")

    result = lint("m = max(1)\n", rules=(BadPrefilter, GlobalMax))
    assert where(result) == [(1, 5, "global-max")]
    assert "prefilter" in result.errors[0].message and "bad-prefilter" in result.errors[0].message


# ---------------------------------------------------------------- suppressions


def test_line_suppression_by_name_code_or_bare():
    result = lint("""\
        a = pad_me  # layoutcheck: ignore[pad-call]
        b = pad_me  # layoutcheck: ignore[LC901]
        c = pad_me  # layoutcheck: ignore[lc901, global-max]
        d = pad_me  # layoutcheck: ignore
        e = pad_me  # layoutcheck: ignore[global-max]
        f = pad_me  # noqa: E501  # layoutcheck: ignore[pad-call] because the test says so
    """)
    assert where(result) == [(5, 5, "pad-call")]


def test_suppression_on_the_first_line_covers_the_whole_statement_only():
    result = lint("""\
        x = call(  # layoutcheck: ignore[pad-call]
            pad_me,
            max(pad_me),
        )
        y = pad_me
        def f(a=pad_me,  # layoutcheck: ignore[pad-call]
              b=pad_me):
            return pad_me
    """)
    assert where(result) == [(3, 5, "global-max"), (5, 5, "pad-call"), (8, 12, "pad-call")]


def test_suppression_on_a_later_line_covers_only_that_line():
    result = lint("""\
        x = call(
            pad_me,  # layoutcheck: ignore[pad-call]
            pad_me,
        )
    """)
    assert where(result) == [(3, 5, "pad-call")]


def test_suppression_text_inside_a_string_is_not_a_suppression():
    result = lint('x = pad_me("# layoutcheck: ignore")\n')
    assert where(result) == [(1, 5, "pad-call")]


def test_file_level_suppression_in_the_first_comment_block():
    result = lint("""\
        #!/usr/bin/env python
        # Generated file.
        # layoutcheck: ignore-file[pad-call]
        a = pad_me
        m = max(1)
    """)
    assert where(result) == [(5, 5, "global-max")]
    everything = lint("# layoutcheck: ignore-file\na = max(pad_me)\n")
    assert everything.findings == []


def test_file_level_suppression_below_code_does_nothing_and_is_reported():
    result = lint('"""Doc."""\n# layoutcheck: ignore-file\na = pad_me\n', unused=True)
    assert where(result) == [(2, 1, "unused-suppression"), (3, 5, "pad-call")]
    assert "first comment block" in result.findings[0].message


def test_unused_suppressions_are_reported_with_what_is_unused():
    result = lint("""\
        a = pad_me  # layoutcheck: ignore[pad-call]
        b = 1  # layoutcheck: ignore[pad-call]
        c = 1  # layoutcheck: ignore
        d = pad_me  # layoutcheck: ignore[pad-call, global-max]
        e = 1  # layoutcheck: ignore[no-such-rule]
        f = 1  # layoutcheck: ignore[noisy-thing]
    """, unused=True)
    found = [(f.line, f.column, f.rule, f.code) for f in result.findings]
    assert found == [
        (2, 8, "unused-suppression", "LC001"),
        (3, 8, "unused-suppression", "LC001"),
        (4, 13, "unused-suppression", "LC001"),
        (5, 8, "unused-suppression", "LC001"),
    ]  # line 6: noisy-thing did not run here, so its suppression cannot be judged
    messages = [f.message for f in result.findings]
    assert "no `pad-call` finding here" in messages[0]
    assert "no finding here" in messages[1]
    assert "`global-max`" in messages[2] and "pad-call" not in messages[2]
    assert "unknown rule `no-such-rule`" in messages[3]


def test_unused_report_needs_no_parse_when_no_rule_matches():
    result = lint("x = 1  # layoutcheck: ignore[pad-call]\n", unused=True)
    assert not result.parsed
    assert where(result) == [(1, 8, "unused-suppression")]


def test_suppressions_of_a_crashed_rule_are_not_called_unused():
    result = lint("explode()  # layoutcheck: ignore[crashy-rule]\n", rules=(CrashyRule,), unused=True)
    assert result.findings == [] and result.errors[0].kind == INTERNAL


def test_files_without_a_directive_are_never_tokenized():
    assert parse_suppressions("x = 1  # no qa, layoutcheck\n") is None
    assert parse_suppressions("x = 1  # noqa\n") is not None  # ruff's form counts (issue 16)


def test_tokenize_failure_falls_back_to_line_suppressions(monkeypatch):
    # Code libcst accepts but this Python's tokenize rejects (newer syntax) must not crash.
    import tokenize

    def refuse(readline):
        raise tokenize.TokenError("unsupported", (1, 0))

    monkeypatch.setattr(tokenize, "generate_tokens", refuse)
    source = '# layoutcheck: ignore-file[global-max]\ns = "#"  # layoutcheck: ignore[pad-call]\n'
    parsed = parse_suppressions(source)
    assert parsed is not None
    assert [(s.line, s.column, s.names, s.file_level) for s in parsed.items] == [
        (1, 1, ("global-max",), True), (2, 10, ("pad-call",), False),
    ]


# ---------------------------------------------------------------- bad input (bytes)


def test_non_utf8_bytes_are_an_error_naming_line_and_byte():
    result = lint_bytes(b"x = 1\ny = '\xff'\n", "bad.py", [PadCall], SETTINGS)
    [error] = result.errors
    assert (error.path, error.line, error.column) == ("bad.py", 2, 6)
    assert "not valid UTF-8" in error.message and "0xff" in error.message


def test_declared_encoding_and_bom_are_honoured():
    latin = "# -*- coding: latin-1 -*-\nname = 'caf\xe9'\npad_me\n".encode("latin-1")
    result = lint_bytes(latin, "latin.py", [PadCall], SETTINGS)
    assert result.errors == [] and where(result) == [(3, 1, "pad-call")]
    bom = b"\xef\xbb\xbfpad_me\n"
    assert where(lint_bytes(bom, "bom.py", [PadCall], SETTINGS)) == [(1, 1, "pad-call")]


def test_null_byte_is_a_syntax_error_with_its_position():
    result = lint_bytes(b"x = 1\ny = pad_me\x00\n", "nul.py", [PadCall], SETTINGS)
    [error] = result.errors
    assert error.line == 2 and "null" in error.message


# ---------------------------------------------------------------- fixes


def test_fix_applies_safe_replacements_reparses_and_is_stable():
    source = "a = pad_me(pad_me)\nb = max(1)  # keep\nc = pad_me  # layoutcheck: ignore[pad-call]\n"
    result = fix_source(source, "f.py", [PadCall, GlobalMax], SETTINGS)
    assert result.fix is not None
    assert result.fix.fixed == "a = padded(padded)\nb = max(1)  # keep\nc = pad_me  # layoutcheck: ignore[pad-call]\n"
    assert result.fix.applied == 2
    cst.parse_module(result.fix.fixed)
    # What is left is what no safe fix covers.
    assert where(result) == [(2, 5, "global-max")]
    again = fix_source(result.fix.fixed, "f.py", [PadCall, GlobalMax], SETTINGS)
    assert again.fix is None


def test_fix_keeps_crlf_newlines():
    result = fix_source("a = pad_me\r\nb = 2\r\n", "crlf.py", [PadCall], SETTINGS)
    assert result.fix is not None and result.fix.fixed == "a = padded\r\nb = 2\r\n"


def test_fix_is_offered_only_by_rules_whose_examples_prove_it():
    class UnprovenFix(PadCall):
        """Same replacement, but no example shows it: not applied."""

        code = "LC909"
        invalid = (Invalid("pad_me\n"),)

    result = fix_source("pad_me\n", "u.py", [UnprovenFix], SETTINGS)
    assert result.fix is None and not result.findings[0].fixable


def test_a_fix_that_does_not_parse_is_refused():
    result = fix_source("break_me\n", "b.py", [BrokenFix], SETTINGS)
    assert result.fix is None
    [error] = result.errors
    assert error.kind == INTERNAL and "`broken-fix`" in error.message and "unchanged" in error.message


def test_noisy_rule_runs_when_passed():
    # Selection is the runner's job: lint_source runs whatever it is given.
    assert where(lint("noisy\n", rules=(NoisyThing,))) == [(1, 1, "noisy-thing")]


@pytest.mark.parametrize("rule", ALL_TEST_RULES)
def test_the_test_rules_have_distinct_codes_and_names(rule):
    assert sum(r.code == rule.code for r in ALL_TEST_RULES) == 1
    assert sum(r.name == rule.name for r in ALL_TEST_RULES) == 1
