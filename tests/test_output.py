"""The output formats: concise, text, json, sarif (schema-valid), github, statistics."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator, FormatChecker

from layoutcheck import __version__
from layoutcheck.lint.findings import INTERNAL, INVALID_INPUT, MISSING_PATH, FileError, Finding
from layoutcheck.lint.output import (
    OUTPUT_FORMATS,
    artifact_uri,
    format_findings,
    format_statistics,
    github_command,
    sarif_log,
)
from layoutcheck.lint.registry import all_rules
from layoutcheck.lint.rule import Invalid, LintRule, Valid

SCHEMA_PATH = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
JSON_KEYS = ["rule", "code", "path", "line", "column", "end_line", "end_column", "message", "fixable", "fix"]


class WideningPad(LintRule):
    """Flags a pad widened to the batch maximum.

    ## What it does
    Finds `pad_to = max(lengths)` broadcast to every sample.

    ## Why it matters
    Every sample pays for the longest one.
    """

    code = "LC901"
    message = "pad target `max(lengths)` is shared by every sample; read `max_seq_lens` instead"
    valid = (Valid("x = 1\n"),)
    invalid = (Invalid("y = max(lengths)\n", replacement="y = max_seq_lens\n"),)


class QuietRule(LintRule):
    code = "LC902"
    message = "a rule without a docstring"
    default_enabled = False


RULES: tuple[type[LintRule], ...] = (WideningPad, QuietRule)


def finding(path: str = "pkg/trainer.py", line: int = 3, column: int = 5, *, code: str = "LC901",
            rule: str = "widening-pad", end_line: int | None = None, end_column: int | None = None,
            message: str = "pad target is shared", fixable: bool = False) -> Finding:
    return Finding(
        path=path, line=line, column=column, rule=rule, code=code,
        end_line=line if end_line is None else end_line,
        end_column=column + 4 if end_column is None else end_column,
        message=message, fixable=fixable,
    )


def render(fmt: str, findings: Sequence[Finding] = (), errors: Sequence[FileError] = (), **kw: Any) -> str:
    return format_findings(findings, errors, output_format=fmt, rules=RULES, **kw)


# ------------------------------------------------------------------ concise


def test_output_formats_are_the_documented_five() -> None:
    assert OUTPUT_FORMATS == ("text", "concise", "json", "sarif", "github")


def test_concise_is_one_greppable_line_per_finding_in_stable_order() -> None:
    findings = [
        finding("b.py", 1, 1),
        finding("a.py", 10, 2, code="LC902", rule="quiet-rule", message="second"),
        finding("a.py", 2, 7, message="first"),
    ]
    errors = [
        FileError("a.py", None, "file is not UTF-8"),
        FileError("c.py", 4, "syntax error: bad token", column=9),
        FileError("d.py", 2, "rule crashed", kind=INTERNAL),
    ]
    assert render("concise", findings, errors).splitlines() == [
        "a.py: error: file is not UTF-8",
        "a.py:2:7: LC901 [widening-pad] first",
        "a.py:10:2: LC902 [quiet-rule] second",
        "b.py:1:1: LC901 [widening-pad] pad target is shared",
        "c.py:4:9: error: syntax error: bad token",
        "d.py:2: error: rule crashed",
    ]


def test_line_formats_are_empty_when_nothing_is_reported() -> None:
    for fmt in ("text", "concise", "github"):
        assert render(fmt) == ""


def test_colour_only_when_asked() -> None:
    f = [finding()]
    e = [FileError("x.py", 1, "boom")]
    for fmt in ("text", "concise"):
        assert "\x1b[" not in render(fmt, f, e)
        coloured = render(fmt, f, e, color=True)
        assert "\x1b[1mpkg/trainer.py:3:5:\x1b[0m" in coloured
        assert "\x1b[1m\x1b[31mLC901\x1b[0m" in coloured
    for fmt in ("json", "sarif", "github"):
        assert "\x1b[" not in render(fmt, f, e, color=True)


# ------------------------------------------------------------------ text


def test_text_shows_the_source_line_with_carets(tmp_path: Path) -> None:
    src = tmp_path / "trainer.py"
    src.write_text("def f(lengths):\n    pad_to = max(lengths)\n    return pad_to\n")
    f = finding(str(src), 2, 14, end_column=26)
    lines = render("text", [f]).splitlines()
    assert lines[0] == f"{src}:2:14: LC901 [widening-pad] pad target is shared"
    assert lines[1] == "    2 |     pad_to = max(lengths)"
    assert lines[2] == "      |              ^^^^^^^^^^^^"


def test_text_underlines_a_multi_line_range_to_the_end_of_its_first_line(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("x = [\n  1,\n]\n")
    lines = render("text", [finding(str(src), 1, 5, end_line=3, end_column=2)]).splitlines()
    assert lines[1:] == ["    1 | x = [", "      |     ^"]


def test_text_keeps_tabs_so_carets_line_up(tmp_path: Path) -> None:
    src = tmp_path / "t.py"
    src.write_text("if x:\n\ty = max(n)\n")
    lines = render("text", [finding(str(src), 2, 6, end_column=12)]).splitlines()
    assert lines[1] == "    2 | \ty = max(n)"
    assert lines[2] == "      | \t    ^^^^^^"


def test_text_without_a_readable_file_is_the_concise_line(tmp_path: Path) -> None:
    missing = str(tmp_path / "gone.py")
    f = [finding(missing), finding(missing, 9)]
    assert render("text", f) == "\n\n".join(render("concise", f).splitlines())


def test_text_skips_context_for_a_line_past_the_end(tmp_path: Path) -> None:
    src = tmp_path / "short.py"
    src.write_text("x = 1\n")
    assert render("text", [finding(str(src), 5)]).splitlines() == [
        f"{src}:5:5: LC901 [widening-pad] pad target is shared"
    ]


# ------------------------------------------------------------------ json


def test_json_objects_have_the_documented_keys_in_order() -> None:
    f = finding("a.py", 3, 5, end_line=4, end_column=9, fixable=True, message="use `max_seq_lens`")
    items = json.loads(render("json", [f]))
    assert items == [{
        "rule": "widening-pad", "code": "LC901", "path": "a.py", "line": 3, "column": 5,
        "end_line": 4, "end_column": 9, "message": "use `max_seq_lens`", "fixable": True, "fix": None,
    }]
    assert list(items[0]) == JSON_KEYS


def test_json_file_errors_share_the_keys_with_their_kind_as_rule() -> None:
    errors = [
        FileError("bad.py", 7, "syntax error: unexpected indent", column=3),
        FileError("x.py", None, "no such file", kind=MISSING_PATH),
    ]
    items = json.loads(render("json", [finding("a.py")], errors))
    assert [i["path"] for i in items] == ["a.py", "bad.py", "x.py"]
    err = items[1]
    assert list(err) == JSON_KEYS
    assert err["rule"] == INVALID_INPUT and err["code"] is None
    assert err["line"] == 7 and err["column"] == 3 and err["end_line"] is None and err["fixable"] is False
    assert items[2]["rule"] == MISSING_PATH and items[2]["line"] is None and items[2]["column"] is None


def test_json_of_nothing_is_an_empty_list() -> None:
    assert json.loads(render("json")) == []


def test_json_keeps_non_ascii_readable() -> None:
    out = render("json", [finding("données.py", message="longueur « max »")])
    assert "données.py" in out and "« max »" in out


# ------------------------------------------------------------------ github


def test_github_annotation_carries_the_range_and_title() -> None:
    out = render("github", [finding("pkg/a.py", 3, 5, end_line=3, end_column=20)])
    assert out == (
        "::error file=pkg/a.py,line=3,col=5,endLine=3,endColumn=20,"
        "title=LC901 widening-pad::pad target is shared"
    )


def test_github_escapes_data_and_properties() -> None:
    f = finding("dir,with:odd%/a.py", message="100% of\r\nsamples: padded, twice")
    out = render("github", [f])
    assert out.startswith("::error file=dir%2Cwith%3Aodd%25/a.py,line=3,")
    assert out.endswith("::100%25 of%0D%0Asamples: padded, twice")
    assert "\n" not in out and "\r" not in out


def test_github_command_leaves_out_missing_properties() -> None:
    assert github_command([("file", "a.py"), ("line", None), ("title", "t:1")], "m") == "::error file=a.py,title=t%3A1::m"


def test_github_file_errors() -> None:
    errors = [FileError("a.py", 2, "syntax error", column=4), FileError("b.py", None, "unreadable")]
    assert render("github", errors=errors).splitlines() == [
        "::error file=a.py,line=2,col=4,title=invalid-input::syntax error",
        "::error file=b.py,title=invalid-input::unreadable",
    ]


# ------------------------------------------------------------------ sarif

_URI_CHARS = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?#\[\]]|%[0-9A-Fa-f]{2})*"


def _is_uri_reference(value: object) -> bool:
    return not isinstance(value, str) or re.fullmatch(_URI_CHARS, value) is not None


def _is_uri(value: object) -> bool:
    return not isinstance(value, str) or (
        re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:", value) is not None and _is_uri_reference(value)
    )


@pytest.fixture(scope="module")
def sarif_validator() -> Draft7Validator:
    """The official schema, with the URI formats checked (jsonschema checks them only with extras)."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft7Validator.check_schema(schema)
    checker = FormatChecker()
    checker.checks("uri")(_is_uri)
    checker.checks("uri-reference")(_is_uri_reference)
    return Draft7Validator(schema, format_checker=checker)


def assert_valid(validator: Draft7Validator, log: dict[str, Any]) -> None:
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


def test_vendored_schema_is_the_official_one() -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    assert schema["properties"]["version"]["enum"] == ["2.1.0"]
    assert len(SCHEMA_PATH.read_text(encoding="utf-8")) == 112318


def test_the_validator_rejects_broken_logs(sarif_validator: Draft7Validator) -> None:
    log = sarif_log([finding()], [], RULES)
    log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    assert not sarif_validator.is_valid(log)
    log = sarif_log([finding()], [], RULES)
    log["runs"][0]["results"][0]["level"] = "fatal"
    assert not sarif_validator.is_valid(log)
    log = sarif_log([finding("has space.py")], [], RULES)
    log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] = "has space.py"
    assert not sarif_validator.is_valid(log)


def test_sarif_output_is_valid(sarif_validator: Draft7Validator) -> None:
    findings = [
        finding("pkg/trainer.py", 3, 5, fixable=True),
        finding("pkg/other file.py", 1, 1, code="LC902", rule="quiet-rule", message="second"),
    ]
    errors = [
        FileError("pkg/broken.py", 2, "syntax error", column=5),
        FileError("pkg/latin1.py", None, "not UTF-8"),
        FileError("pkg/gone.py", None, "no such file", kind=MISSING_PATH),
    ]
    log = json.loads(render("sarif", findings, errors))
    assert_valid(sarif_validator, log)


def test_sarif_of_nothing_is_valid(sarif_validator: Draft7Validator) -> None:
    log = json.loads(render("sarif"))
    assert_valid(sarif_validator, log)
    run = log["runs"][0]
    assert run["results"] == []
    assert run["invocations"] == [{"executionSuccessful": True, "toolExecutionNotifications": []}]


def test_sarif_driver_lists_the_rules_with_their_docs() -> None:
    log = json.loads(render("sarif", [finding()]))
    driver = log["runs"][0]["tool"]["driver"]
    assert log["version"] == "2.1.0"
    assert driver["name"] == "layoutcheck" and driver["version"] == __version__
    by_id = {r["id"]: r for r in driver["rules"]}
    assert list(by_id) == ["LC901", "LC902"]
    wide = by_id["LC901"]
    assert wide["name"] == "widening-pad"
    assert wide["shortDescription"] == {"text": WideningPad.message}
    assert wide["help"]["markdown"].startswith("Flags a pad widened to the batch maximum.\n\n## What it does")
    assert "Every sample pays for the longest one." in wide["fullDescription"]["text"]
    assert wide["defaultConfiguration"] == {"enabled": True, "level": "error"}
    assert wide["properties"] == {"fixable": True}
    quiet = by_id["LC902"]
    assert quiet["help"]["text"] == QuietRule.message
    assert quiet["defaultConfiguration"]["enabled"] is False


def test_sarif_results_point_at_their_rule_and_region() -> None:
    findings = [finding("b.py", 2, 1, code="LC902", rule="quiet-rule"), finding("a.py", 4, 9, end_line=5, end_column=3)]
    run = sarif_log(findings, [], RULES)["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["ruleId"] for r in run["results"]] == ["LC901", "LC902"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] == "error"
    first = run["results"][0]
    assert first["message"] == {"text": "pad target is shared"}
    physical = first["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"] == {"uri": "a.py", "uriBaseId": "%SRCROOT%"}
    assert physical["region"] == {"startLine": 4, "startColumn": 9, "endLine": 5, "endColumn": 3}
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"].startswith("file://")
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"].endswith("/")


def test_sarif_adds_a_descriptor_for_a_rule_it_was_not_given(sarif_validator: Draft7Validator) -> None:
    log = sarif_log([finding(code="LC999", rule="from-a-plugin")], [], RULES)
    run = log["runs"][0]
    rule = run["tool"]["driver"]["rules"][run["results"][0]["ruleIndex"]]
    assert rule["id"] == "LC999" and rule["name"] == "from-a-plugin"
    assert_valid(sarif_validator, log)


def test_sarif_reports_bad_input_as_results_of_the_invalid_input_rule(sarif_validator: Draft7Validator) -> None:
    # A syntax error fails the check like a finding (exit 1): code-scanning UIs
    # show results, not notifications, so it must be a result.
    findings = [finding("x.py", 5, 1)]
    errors = [FileError("x.py", 3, "syntax error: invalid syntax", column=7), FileError("y.py", None, "not UTF-8")]
    log = sarif_log(findings, errors, RULES)
    assert_valid(sarif_validator, log)
    run = log["runs"][0]
    invocation = run["invocations"][0]
    # Bad input is reported, but the tool itself ran fine.
    assert invocation == {"executionSuccessful": True, "toolExecutionNotifications": []}
    assert [(r["ruleId"], r["message"]["text"]) for r in run["results"]] == [
        (INVALID_INPUT, "syntax error: invalid syntax"), ("LC901", "pad target is shared"), (INVALID_INPUT, "not UTF-8"),
    ]
    first, _, third = run["results"]
    assert first["level"] == "error" and first["properties"] == {"name": INVALID_INPUT, "fixable": False}
    assert first["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "x.py", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 3, "startColumn": 7},
    }
    assert third["locations"][0]["physicalLocation"] == {"artifactLocation": {"uri": "y.py", "uriBaseId": "%SRCROOT%"}}
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == ["LC901", "LC902", INVALID_INPUT]  # added once, after the real rules
    assert first["ruleIndex"] == third["ruleIndex"] == 2
    assert rules[2]["name"] == INVALID_INPUT and "syntax error" in rules[2]["help"]["text"]


def test_sarif_lists_the_invalid_input_rule_only_when_it_occurs() -> None:
    rules = sarif_log([finding()], [FileError("y.py", None, "gone", kind=MISSING_PATH)], RULES)
    assert [r["id"] for r in rules["runs"][0]["tool"]["driver"]["rules"]] == ["LC901", "LC902"]


@pytest.mark.parametrize("kind", [MISSING_PATH, INTERNAL])
def test_sarif_tool_errors_are_notifications_and_make_the_execution_unsuccessful(
    kind: str, sarif_validator: Draft7Validator
) -> None:
    errors = [FileError("x.py", 3, "syntax error"), FileError("y.py", None, "trouble", kind=kind),
              FileError("z.py", 2, "rule crashed", column=4, kind=kind)]
    log = sarif_log([], errors, RULES)
    assert_valid(sarif_validator, log)
    run = log["runs"][0]
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is False
    notes = invocation["toolExecutionNotifications"]
    assert [(n["descriptor"]["id"], n["level"], n["message"]["text"]) for n in notes] == [
        (kind, "error", "trouble"), (kind, "error", "rule crashed")]
    assert "region" not in notes[0]["locations"][0]["physicalLocation"]
    assert notes[1]["locations"][0]["physicalLocation"]["region"] == {"startLine": 2, "startColumn": 4}
    assert [r["ruleId"] for r in run["results"]] == [INVALID_INPUT]  # the syntax error stays a result


def test_artifact_uris(tmp_path: Path) -> None:
    assert artifact_uri("pkg/a b.py", root=tmp_path) == ("pkg/a%20b.py", True)
    assert artifact_uri(str(tmp_path / "sub" / "x.py"), root=tmp_path) == ("sub/x.py", True)
    outside = tmp_path.parent / "elsewhere.py"
    uri, relative = artifact_uri(str(outside), root=tmp_path)
    assert not relative and uri == outside.resolve().as_uri()


def test_sarif_with_the_real_rules_is_valid(sarif_validator: Draft7Validator) -> None:
    rules = all_rules()
    findings = [finding(code=r.code, rule=r.name, line=i + 1) for i, r in enumerate(rules)]
    log = json.loads(format_findings(findings, [], output_format="sarif", rules=rules))
    assert_valid(sarif_validator, log)
    assert [r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]] == [r.code for r in rules]


# ------------------------------------------------------------------ statistics and errors


def test_statistics_count_per_rule_most_first() -> None:
    findings = [
        finding(code="LC902", rule="quiet-rule"),
        finding(code="LC901", line=1, fixable=True),
        finding(code="LC901", line=2),
        finding(code="LC903", rule="third-rule"),
    ]
    assert format_statistics(findings).splitlines() == [
        "2\tLC901\t[*] widening-pad",
        "1\tLC902\t[ ] quiet-rule",
        "1\tLC903\t[ ] third-rule",
    ]


def test_statistics_without_fixable_findings_have_no_marker_column() -> None:
    findings = [finding(code="LC902", rule="quiet-rule", line=n) for n in range(1, 12)] + [finding()]
    assert format_statistics(findings).splitlines() == ["11\tLC902\tquiet-rule", " 1\tLC901\twidening-pad"]


def test_statistics_of_nothing_is_empty() -> None:
    assert format_statistics([]) == ""


def test_unknown_format_names_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown output format 'xml'; choose one of text, concise, json"):
        render("xml")


# ------------------------------------------------------------------ fixes in json, from a real lint run


def test_json_carries_each_findings_fix_in_ruffs_shape_computed_on_a_real_run(tmp_path) -> None:
    import subprocess
    import sys

    (tmp_path / "uses.py").write_text(
        "def fit(tokens, config):\n"
        "    n = max(t.size(0) for t in tokens)\n"
        "    return next(b for b in SEQ_LEN_BUCKETS if b >= n), min(b for b in config.seq_len_buckets if b >= n)\n")
    (tmp_path / "a.py").write_text("SEQ_LEN_BUCKETS = [1024, 512, 2048]\nseq_len_buckets = [1000, 2048]\n")
    # bucket-spec (LC201) is a preview rule: selected by its code, as a user would.
    proc = subprocess.run([sys.executable, "-m", "layoutcheck", "check", ".", "--no-cache", "--output-format", "json",
                           "--select", "LC201"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    items = json.loads(proc.stdout)
    assert [list(i) for i in items] == [JSON_KEYS, JSON_KEYS]
    reorder, rounded = items
    assert reorder["fixable"] is True and reorder["fix"] == {
        "applicability": "safe", "message": "use the valid buckets `[512, 1024, 2048]`",
        "edits": [{"content": "512", "location": {"row": 1, "column": 20}, "end_location": {"row": 1, "column": 24}},
                  {"content": "1024", "location": {"row": 1, "column": 26}, "end_location": {"row": 1, "column": 29}}],
    }
    assert rounded["fixable"] is False and rounded["fix"]["applicability"] == "unsafe"  # --unsafe-fixes applies it
    assert rounded["fix"]["edits"] == [
        {"content": "1024", "location": {"row": 2, "column": 20}, "end_location": {"row": 2, "column": 24}}]
    assert proc.stderr == "Found 2 findings in 1 file (1 fixable with --fix).\n1 fix available with --unsafe-fixes.\n"
