"""Fixes (issue 16): text edits and their overlap rule, each rule's fix on renamed and declined cases,
fixes across a project, and `--fix` / `--unsafe-fixes` / `--diff` on the command line.

The rules' own examples (tests/test_rules.py) pin each fix's exact output; these tests show the
fixes fit code that does not use the examples' names, decline where the values are not known,
and that the command line behaves as ruff's does.
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest

from layoutcheck import cli
from layoutcheck.configfile import resolve_config
from layoutcheck.lint.edits import SAFE, UNSAFE, Edit, Fix, apply_fixes
from layoutcheck.lint.fix import MAX_PASSES, fix_source
from layoutcheck.lint.findings import INTERNAL
from layoutcheck.lint.registry import rule_by_name
from layoutcheck.lint.runner import run
from layoutcheck.lint.settings import LintSettings

GLOBAL_MAX = rule_by_name("global-max-padding")
UNGUARDED = rule_by_name("unguarded-rectangular-batch")
CP_HELPER = rule_by_name("cp-helper-without-geometry")
BUCKETS = rule_by_name("bucket-spec")
SETTINGS = LintSettings()

# The linter finds layouts by what code does (issue 21): a one-file snippet is judged in the project a
# real tree gives it. These are the other files of that project.
PRODUCER = {"data.py": """
def get_rollout_data(rollout, unit):
    rollout["max_seq_lens"] = [(t + unit - 1) // unit * unit for t in rollout["total_lengths"]]
    return rollout
"""}
"""A producer that stores each sample's rounded-up length in `max_seq_lens` (the padded-length field)."""
BUCKET_USES = {"buckets.py": """
def smallest_fitting(tokens, sampler):
    n = tokens.size(0)  # a sequence length: the buckets searched must hold it
    first = next(b for b in TOKEN_BUCKETS if b >= n)
    second = min(b for b in SEQ_LEN_BUCKETS if b >= n)
    third = min(b for b in token_buckets if b >= n)
    fourth = min(b for b in seq_len_buckets if b >= n)
    for b in sampler.buckets:
        if n <= b:
            return first, second, third, fourth, b
    return first, second, third, fourth, None
"""}
"""Where the project searches its bucket lists for the smallest entry that fits a length."""


def fixed(rule, code: str, *, unsafe: bool = True, settings: LintSettings = SETTINGS, files=None):
    result = fix_source(textwrap.dedent(code), "pkg/m.py", [rule], settings, unsafe=unsafe, files=files)
    assert not result.errors, result.errors
    return result


def text_of(result) -> str | None:
    return result.fix.fixed if result.fix is not None else None


# ---------------------------------------------------------------- edits


def test_edits_apply_outside_in_and_keep_everything_else():
    text = "a = 1  # one\nb = 2\n"
    out, chosen = apply_fixes(text, [
        Fix((Edit(4, 5, "10"),), SAFE, "ten"),
        Fix((Edit(13, 13, "c = 3\n"), Edit(17, 18, "20")), SAFE, "twenty"),
    ])
    assert out == "a = 10  # one\nc = 3\nb = 20\n" and len(chosen) == 2


def test_overlapping_fixes_wait_for_the_next_pass_whatever_their_order():
    one = Fix((Edit(0, 5, "x"),), SAFE, "one")
    two = Fix((Edit(3, 8, "y"),), SAFE, "two")
    inside = Fix((Edit(4, 4, "z"),), SAFE, "insert inside")
    for fixes in ([one, two, inside], [inside, two, one]):
        out, chosen = apply_fixes("0123456789", fixes)
        assert (out, chosen) == ("x56789", [one])


def test_two_insertions_at_one_place_and_one_isolation_key_are_one_per_pass():
    first = Fix((Edit(2, 2, "A"),), UNSAFE, "a", isolation="f")
    second = Fix((Edit(2, 2, "B"),), UNSAFE, "b")
    third = Fix((Edit(5, 5, "C"),), UNSAFE, "c", isolation="f")
    out, chosen = apply_fixes("0123456", [third, second, first])
    assert out == "01A23456" and chosen == [first]


def test_a_fix_is_checked_when_it_is_made():
    with pytest.raises(ValueError, match="overlap"):
        Fix((Edit(0, 4, "a"), Edit(2, 6, "b")), SAFE, "bad")
    with pytest.raises(ValueError, match="applicability"):
        Fix((Edit(0, 1, "a"),), "maybe", "bad")
    with pytest.raises(ValueError, match="at least one edit"):
        Fix((), SAFE, "nothing")


# ---------------------------------------------------------------- global-max-padding


def test_the_per_sample_rewrite_fits_any_names_crlf_and_keeps_what_else_reads_the_maximum():
    source = ("def produce(batch, align):\r\n"
              "    biggest = max(batch['seq_lens'])  # longest\r\n"
              "    P = -(-biggest // align) * align\r\n"
              "    batch['max_seq_lens'] = [P] * len(batch['tokens'])  # per sample\r\n"
              "    return P\r\n")
    result = fix_source(source, "m.py", [GLOBAL_MAX], SETTINGS, unsafe=True)
    # `P` is still returned, so its assignment (and the maximum it reads) stays.
    assert text_of(result) == (
        "def produce(batch, align):\r\n"
        "    biggest = max(batch['seq_lens'])  # longest\r\n"
        "    P = -(-biggest // align) * align\r\n"
        "    batch['max_seq_lens'] = [\r\n"
        "        -(-length // align) * align for length in batch['seq_lens']\r\n"
        "    ]  # per sample\r\n"
        "    return P\r\n")


def test_a_generators_own_variable_and_a_count_on_the_left():
    result = fixed(GLOBAL_MAX, """
        def produce(samples, unit):
            top = max(s.numel() for s in samples)
            return {"max_seq_lens": len(samples) * [top + (-top) % unit]}
        """)
    assert text_of(result) == textwrap.dedent("""
        def produce(samples, unit):
            return {"max_seq_lens": [s.numel() + (-s.numel()) % unit for s in samples]}
        """)


@pytest.mark.parametrize("body", [
    # assigned in one branch only: which value reaches the broadcast depends on the path
    """
    longest = max(lengths)
    if shrink:
        longest = longest // 2
    out["max_seq_lens"] = [longest] * len(lengths)
    """,
    # the same on one line
    """
    longest = 0
    if shrink: longest = max(lengths)
    out["max_seq_lens"] = [longest] * len(lengths)
    """,
    # the unit changes between the round-up and the broadcast
    """
    padded = (max(lengths) + unit - 1) // unit * unit
    unit = 64
    out["max_seq_lens"] = [padded] * len(lengths)
    """,
    # the lengths are rewritten between the maximum and the broadcast
    """
    longest = max(lengths)
    lengths[0] = 0
    out["max_seq_lens"] = [longest] * len(lengths)
    """,
    # two maxima of different lists: which one is per sample?
    """
    longest = max(max(lengths), max(others))
    out["max_seq_lens"] = [longest] * len(lengths)
    """,
    # a configured length repeated, no maximum at all
    """
    out["max_seq_lens"] = [unit] * len(lengths)
    """,
])
def test_no_per_sample_rewrite_when_the_chain_is_not_certain(body):
    code = "def produce(out, lengths, others, unit, shrink):" + textwrap.indent(textwrap.dedent(body), "    ")
    result = fixed(GLOBAL_MAX, code, files=PRODUCER)
    assert result.fix is None
    assert [f.fix for f in result.findings] == [None]


def test_a_broadcast_in_a_loop_whose_body_rebinds_the_maximum_is_left_alone():
    result = fixed(GLOBAL_MAX, """
        def produce(rollouts, unit):
            longest = 0
            for rollout in rollouts:
                rollout["max_seq_lens"] = [longest] * len(rollout["tokens"])
                longest = max(rollout["total_lengths"])
        """)
    assert result.fix is None


# ---------------------------------------------------------------- unguarded-rectangular-batch


def test_the_guard_names_any_list_and_goes_in_once_per_function():
    settings = LintSettings(sources=["padded_lens"])
    result = fixed(UNGUARDED, """
        def collate(mb, layout):
            if layout == "rect":
                width = mb.padded_lens[0]
                again = mb.padded_lens[-1]
                return width, again
        """, settings=settings)
    assert text_of(result) == textwrap.dedent("""
        def collate(mb, layout):
            if layout == "rect":
                assert len(set(mb.padded_lens)) == 1, (
                    f"rectangular micro-batch mixes padded lengths {mb.padded_lens} (`padded_lens`); "
                    "use one sample per micro-batch or group samples by padded length"
                )
                width = mb.padded_lens[0]
                again = mb.padded_lens[-1]
                return width, again
        """)
    assert result.fix.applied == 1 and result.findings == []


def test_the_guard_runs_what_it_checks_and_fails_closed_with_the_lengths():
    result = fixed(UNGUARDED, """
        def batch_length(batch):
            return batch["max_seq_lens"][0]
        """, files=PRODUCER)
    namespace: dict = {}
    exec(compile(text_of(result), "fixed.py", "exec"), namespace)
    assert namespace["batch_length"]({"max_seq_lens": [256, 256]}) == 256
    with pytest.raises(AssertionError, match=r"mixes padded lengths \[256, 384\] \(`max_seq_lens`\); use one sample"):
        namespace["batch_length"]({"max_seq_lens": [256, 384]})


@pytest.mark.parametrize("code", [
    # the list comes from a call: the check would call it again
    'def f(it, keys):\n    return it.get_next(keys)["max_seq_lens"][0]\n',
    # the read runs only on one path of its statement
    'def f(batch, bshd):\n    return batch["max_seq_lens"][0] if bshd else None\n',
    'def f(batch, bshd):\n    return bshd and batch["max_seq_lens"][0]\n',
    # a one-line suite: before the `if` the check would run on every path
    'def f(batch, bshd):\n    if bshd: return batch["max_seq_lens"][0]\n',
    # a key the f-string cannot quote on Python 3.10
    'def f(batch):\n    return batch["it\'s"]["max_seq_lens"][0]\n',
])
def test_no_guard_where_it_would_change_more_than_the_check(code):
    result = fix_source(code, "m.py", [UNGUARDED], SETTINGS, unsafe=True, files=PRODUCER)
    assert [f.rule for f in result.findings] == ["unguarded-rectangular-batch"] and result.fix is None


# ---------------------------------------------------------------- cp-helper-without-geometry

CP_UTILS = """
def slice_log_prob_with_cp(log_prob, total_length, response_length, qkv_format="thd", max_token_len=None):
    length = total_length if qkv_format == "thd" else max_token_len
    return log_prob[length - response_length:length]


def shard_offsets(n, layout="thd", padded_seqlen=None):
    return n if layout == "thd" else padded_seqlen
"""
"""Layout helpers: each takes the layout kind and uses a sample's padded length under BSHD."""
SOURCES = LintSettings(sources=["max_seq_lens"])
"""The padded lengths' source named (a hint): its singular, `max_seq_len`, may fill a padded-length parameter."""


def test_a_renamed_helper_gets_its_own_parameter_names():
    settings = LintSettings(cp_helpers={"shard_offsets": {"layout": 1, "padded_seqlen": 2}})
    result = fixed(CP_HELPER, """
        from cp_utils import shard_offsets

        def offsets(n, layout, padded_seqlen):
            return shard_offsets(n)
        """, settings=settings, files={"cp_utils.py": CP_UTILS})
    assert "return shard_offsets(n, layout=layout, padded_seqlen=padded_seqlen)" in text_of(result)
    assert result.fix.applied == 1


def test_one_argument_per_line_stays_so_and_a_source_singular_fills_another_name():
    result = fix_source(textwrap.dedent("""
        from cp_utils import slice_log_prob_with_cp

        def gather(lp, t, r, qkv_format, max_seq_len):
            return slice_log_prob_with_cp(
                lp,
                t,
                r,  # the response
            )
        """), "pkg/m.py", [CP_HELPER], SOURCES, files={"cp_utils.py": CP_UTILS})  # safe: no --unsafe-fixes
    assert text_of(result) == textwrap.dedent("""
        from cp_utils import slice_log_prob_with_cp

        def gather(lp, t, r, qkv_format, max_seq_len):
            return slice_log_prob_with_cp(
                lp,
                t,
                r,  # the response
                qkv_format=qkv_format,
                max_token_len=max_seq_len,
            )
        """)


@pytest.mark.parametrize("header, extra", [
    ("qkv_format, max_token_len, max_seq_len", ""),  # two values for the padded length
    ("args, max_seq_len, flag", "    if flag:\n        qkv_format = args.fmt\n"),  # bound on one path only
    ("args, max_seq_len, flag", "    if flag: qkv_format = args.fmt\n"),  # the same, on one line
    ("max_seq_len", ""),  # no layout anywhere in scope: no partial fix either
])
def test_no_fix_when_a_value_is_ambiguous_or_unknown(header, extra):
    code = (f"from cp_utils import slice_log_prob_with_cp\n\n\ndef gather(lp, t, r, {header}):\n{extra}"
            "    return slice_log_prob_with_cp(lp, t, r)\n")
    result = fix_source(code, "pkg/m.py", [CP_HELPER], SOURCES, unsafe=True, files={"cp_utils.py": CP_UTILS})
    assert result.fix is None and [f.fix for f in result.findings] == [None]


# ---------------------------------------------------------------- bucket-spec


@pytest.mark.parametrize("code, expected, applicability", [
    ("token_buckets = (\n    4096,\n    1024,\n    2000,\n)\n", "token_buckets = (\n    1024,\n    2048,\n    4096,\n)\n",
     UNSAFE),
    ("seq_len_buckets = [4_096, 1_024]\n", "seq_len_buckets = [1_024, 4_096]\n", SAFE),
    ("s = Sampler(buckets=(1024, 2048), max_length=4096)\n", None, None),  # valid: the max need not be listed
    ("s = Sampler(buckets=(8192, 4096), max_length=4096)\n", "s = Sampler(buckets=(4096,), max_length=4096)\n", UNSAFE),
    ("s = Sampler(buckets=(2048, 1024), max_length=4000)\n", None, None),  # no valid list: 4000 is off the grid
    ("token_buckets = [\n    4096,  # long\n    1024,\n]\n", None, None),  # a comment would change bucket
])
def test_bucket_lists(code, expected, applicability):
    result = fix_source(code, "m.py", [BUCKETS], SETTINGS, unsafe=True, files=BUCKET_USES)
    assert text_of(result) == expected
    if expected is not None:
        safe = fix_source(code, "m.py", [BUCKETS], SETTINGS, files=BUCKET_USES)
        assert (safe.fix is not None) == (applicability == SAFE)


# ---------------------------------------------------------------- passes and errors


def test_fixes_of_one_statement_go_in_over_passes_and_a_second_fix_changes_nothing():
    code = textwrap.dedent("""
        def build(batch, unit):
            longest = max(batch["total_lengths"])
            batch["max_seq_lens"] = [(longest + unit - 1) // unit * unit] * len(batch["tokens"])
            return batch["max_seq_lens"][0]
        """)
    result = fix_source(code, "m.py", [GLOBAL_MAX, UNGUARDED], SETTINGS, unsafe=True)
    assert result.findings == [] and result.fix.applied == 2
    ast.parse(result.fix.fixed)
    assert fix_source(result.fix.fixed, "m.py", [GLOBAL_MAX, UNGUARDED], SETTINGS, unsafe=True).fix is None


def test_a_fix_that_raises_is_an_error_naming_the_rule_and_the_others_still_apply(monkeypatch):
    def boom(self, site):
        raise RuntimeError("fix bug on purpose")

    monkeypatch.setattr(UNGUARDED, "fix", boom)
    code = 'def f(batch):\n    return batch["max_seq_lens"][0]\n\nSEQ_LEN_BUCKETS = [2048, 1024]\n'
    result = fix_source(code, "m.py", [UNGUARDED, BUCKETS], SETTINGS, unsafe=True, files=PRODUCER | BUCKET_USES)
    assert result.fix is not None and "SEQ_LEN_BUCKETS = [1024, 2048]" in result.fix.fixed
    [error] = result.errors
    assert error.kind == INTERNAL and "`unguarded-rectangular-batch`" in error.message and "fix bug" in error.message


def test_passes_are_bounded():
    assert 2 <= MAX_PASSES <= 100


# ---------------------------------------------------------------- a project and the command line


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


TRAINER = {
    # preview: global-max-padding (LC101) and bucket-spec (LC201) are preview rules (`layoutcheck rules`)
    "layoutcheck.toml": "preview = true\n",
    "trainer/__init__.py": "",
    "trainer/cp_utils.py": """
        def slice_with_cp(tokens, pad_value, qkv_format="thd", max_seq_len=None):
            length = len(tokens) if qkv_format == "thd" else max_seq_len
            return tokens[:length]
        """,
    "trainer/data.py": """
        from trainer.cp_utils import slice_with_cp


        def produce(rollout, unit):
            top = max(rollout["total_lengths"])
            rollout["max_seq_lens"] = [-(-top // unit) * unit] * len(rollout["tokens"])


        def get_batch(batch, qkv_format, pad_id):
            if qkv_format == "bshd":
                max_seq_len = batch["max_seq_lens"][0]
                return [slice_with_cp(t, pad_id, qkv_format) for t in batch["tokens"]]
            return batch["tokens"]
        """,
}


@pytest.fixture
def trainer(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, text in TRAINER.items():
        write(tmp_path, name, text)
    return tmp_path


def check(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_helper_defined_in_another_file_is_fixed_through_a_run(trainer):
    result = run(["trainer"], cwd=trainer, loaded=resolve_config(["trainer"], cwd=trainer), fix=True)
    data = (trainer / "trainer/data.py").read_text()
    assert "slice_with_cp(t, pad_id, qkv_format, max_seq_len=max_seq_len)" in data  # safe: applied
    assert "[-(-top // unit) * unit] * len" in data and "assert len(set(" not in data  # unsafe: not applied
    assert result.stats.fixed == 1 and result.stats.unsafe_hidden == 2
    assert sorted(f.fix for f in result.findings) == ["unsafe", "unsafe"]


def test_fix_applies_safe_fixes_and_counts_the_unsafe_ones(trainer, capsys):
    code, out, err = check(capsys, "--fix", "--output-format", "concise", "--no-cache")
    assert code == 1 and "LC104" not in out and out.count("LC10") == 2
    assert err.splitlines() == ["Fixed 1 finding in 1 file.", "Found 2 findings in 1 file.",
                                "2 fixes available with --unsafe-fixes."]


def test_unsafe_fixes_apply_everything_and_a_second_run_changes_nothing(trainer, capsys):
    code, out, err = check(capsys, "--fix", "--unsafe-fixes", "--output-format", "concise")
    assert (code, out) == (0, "")
    assert err.splitlines() == ["Fixed 3 findings in 1 file.", "All checks passed!"]
    text = (trainer / "trainer/data.py").read_text()
    ast.parse(text)
    assert '-(-length // unit) * unit for length in rollout["total_lengths"]' in text
    assert "top = max(" not in text
    assert check(capsys, "--fix", "--unsafe-fixes") == (0, "", "All checks passed!\n")
    assert (trainer / "trainer/data.py").read_text() == text


def test_diff_shows_safe_fixes_and_counts_the_rest_and_exits_1(trainer, capsys):
    before = (trainer / "trainer/data.py").read_text()
    code, out, err = check(capsys, "--diff")
    assert code == 1 and out.startswith("--- trainer/data.py\n+++ trainer/data.py\n")
    assert "+        return [slice_with_cp(t, pad_id, qkv_format, max_seq_len=max_seq_len)" in out
    assert "assert len(set(" not in out
    assert err == "Would fix 1 finding in 1 file (2 fixes available with --unsafe-fixes).\n"
    code, out, err = check(capsys, "--diff", "--unsafe-fixes")
    assert code == 1 and "+        assert len(set(batch[\"max_seq_lens\"])) == 1, (" in out
    assert err == "Would fix 3 findings in 1 file.\n"
    assert (trainer / "trainer/data.py").read_text() == before  # --diff writes nothing


def test_diff_with_only_unsafe_fixes_exits_0_and_says_how_to_see_them(trainer, capsys):
    check(capsys, "--fix")  # the safe one goes in
    assert check(capsys, "--diff") == (0, "", "No fixes available (2 fixes available with --unsafe-fixes).\n")


def test_a_plain_check_counts_only_findings_that_have_a_fix_and_shows_each_fix_in_json(trainer, capsys):
    code, out, err = check(capsys, "--output-format", "json")
    assert code == 1
    assert err == "Found 3 findings in 1 file (1 fixable with --fix).\n2 fixes available with --unsafe-fixes.\n"
    items = json.loads(out)
    assert [(f["fixable"], f["fix"]["applicability"]) for f in items] == [
        (f["fix"]["applicability"] == "safe", f["fix"]["applicability"]) for f in items]
    assert sorted(f["fix"]["applicability"] for f in items) == ["safe", "unsafe", "unsafe"]
    # Each fix is what --fix would write: applying its edits to the file gives the fixed text's lines.
    text = (trainer / "trainer/data.py").read_text()
    starts = [0, *(i + 1 for i, c in enumerate(text) if c == "\n")]
    safe = next(f for f in items if f["fixable"])
    edits = sorted(safe["fix"]["edits"], key=lambda e: (e["location"]["row"], e["location"]["column"]))
    for edit in reversed(edits):
        a = starts[edit["location"]["row"] - 1] + edit["location"]["column"] - 1
        b = starts[edit["end_location"]["row"] - 1] + edit["end_location"]["column"] - 1
        text = text[:a] + edit["content"] + text[b:]
    assert safe["fix"]["message"]
    check(capsys, "--fix")
    assert (trainer / "trainer/data.py").read_text() == text
    code, out, err = check(capsys, "--output-format", "json", "--unsafe-fixes")
    assert {f["fixable"] for f in json.loads(out)} == {True} and len(json.loads(out)) == 2
    assert err == "Found 2 findings in 1 file (2 fixable with --fix).\n"


def test_statistics_count_fixable_findings_as_the_summary_does(trainer, capsys):
    write(trainer, "trainer/buckets.py", "LENGTH_BUCKETS = [4096, 1024]\n")
    code, out, _ = check(capsys, "--statistics", "--output-format", "json")
    counts = {row["code"]: (row["count"], row["fixable"], row["fixable_count"]) for row in json.loads(out)}
    code, listed, err = check(capsys, "--output-format", "json")
    fixable = {}
    for f in json.loads(listed):
        fixable[f["code"]] = fixable.get(f["code"], 0) + f["fixable"]
    assert {c: n for c, (_, _, n) in counts.items()} == fixable
    assert sum(fixable.values()) >= 1 and f"({sum(fixable.values())} fixable with --fix)" in err
    code, text, _ = check(capsys, "--statistics")
    marked = {line.split("\t")[1].strip() for line in text.splitlines() if "[*]" in line}
    assert marked == {c for c, n in fixable.items() if n}


def test_a_syntax_error_left_by_a_fix_is_refused(trainer, monkeypatch):
    def broken(text, fixes):
        return text + "def (:\n", list(fixes)

    monkeypatch.setattr("layoutcheck.lint.fix.apply_fixes", broken)
    before = (trainer / "trainer/data.py").read_text()
    result = run(["trainer"], cwd=trainer, loaded=resolve_config(["trainer"], cwd=trainer), fix=True,
                 unsafe_fixes=True, use_cache=False)
    assert (trainer / "trainer/data.py").read_text() == before
    [error] = [e for e in result.errors if e.kind == INTERNAL]
    assert "autofix by" in error.message and "left unchanged" in error.message


# ---------------------------------------------------------------- what a run imports


def _imports(path: Path, module: str, known: set[str]) -> set[str]:
    """Every module of ``known`` that ``path`` imports, at any depth (in functions, under TYPE_CHECKING)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out |= {name for name in (base, *(f"{base}.{a.name}" for a in node.names)) if name in known}
    return out


def test_the_fix_modules_are_in_no_import_circle():
    # engine <-> fix was one (issue 16): the engine no longer imports the fix module.
    root = Path(__file__).resolve().parents[1]
    paths = {".".join(p.relative_to(root).with_suffix("").parts): p for p in (root / "layoutcheck/lint").glob("*.py")}
    paths |= {f"layoutcheck.rules.{p.stem}": p for p in (root / "rules").glob("*.py")}
    known = set(paths)
    graph = {name: _imports(path, name, known) for name, path in paths.items()}

    def reaches(start: str, goal: str) -> bool:
        seen, stack = set(), list(graph[start])
        while stack:
            name = stack.pop()
            if name == goal:
                return True
            if name not in seen:
                seen.add(name)
                stack.extend(graph.get(name, ()))
        return False

    ours = ["engine", "fix", "fixsite", "fixscope", "edits", "noqa", "suppressions", "rule", "syntaxrule", "walk", "runner"]
    for name in (f"layoutcheck.lint.{m}" for m in ours):
        assert not reaches(name, name), name
    assert "layoutcheck.lint.fix" not in graph["layoutcheck.lint.engine"]


_PROBE = """
import json, sys
from layoutcheck.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "libcst": "libcst" in sys.modules, "torch": "torch" in sys.modules}), file=sys.stderr)
"""


def _probe(tree: Path, *args: str) -> dict:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _PROBE, "check", "--no-cache", *args], cwd=tree,
                          capture_output=True, text=True, timeout=120)
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_libcst_is_imported_only_for_fixes_to_apply_or_show_and_torch_never(trainer):
    write(trainer, "trainer/buckets.py", "SEQ_LEN_BUCKETS = [2048, 1024]\n")
    # A plain check computes the fixes of the findings it shows (which have one, how to apply it)...
    assert _probe(trainer, "trainer") == {"code": 1, "libcst": True, "torch": False}
    assert _probe(trainer, "trainer", "--diff") == {"code": 1, "libcst": True, "torch": False}
    assert _probe(trainer, "trainer", "--add-noqa") == {"code": 0, "libcst": False, "torch": False}
    write(trainer, "trainer/buckets.py", "SEQ_LEN_BUCKETS = [1024, 2048]\n")
    (trainer / "trainer/data.py").write_text("x = 1\n")
    assert _probe(trainer, "trainer") == {"code": 0, "libcst": False, "torch": False}  # ...and only those


def test_fix_after_a_cached_plain_check_still_fixes(trainer, capsys):
    assert check(capsys)[0] == 1  # fills the run cache (findings marked "may be fixable")
    assert check(capsys)[0] == 1  # served from it
    code, _, err = check(capsys, "--fix", "--unsafe-fixes")
    assert (code, err) == (0, "Fixed 3 findings in 1 file.\nAll checks passed!\n")
    assert check(capsys) == (0, "", "All checks passed!\n")


def test_a_list_changed_in_place_between_the_maximum_and_the_broadcast_gets_no_rewrite():
    result = fixed(GLOBAL_MAX, """
        def produce(out, lengths, unit):
            longest = max(lengths)
            lengths.append(unit)
            out["max_seq_lens"] = [longest] * len(lengths)
        """)
    assert result.fix is None


# ---------------------------------------------------------------- the lint fixtures, fixed

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lint"
FIXTURE_PROJECTS = [FIXTURES / "flagged", FIXTURES / "lookalikes",
                    *(p / kind for p in sorted((FIXTURES / "pairs").iterdir()) if p.is_dir()
                      for kind in ("flagged", "lookalike"))]


@pytest.mark.parametrize("project", FIXTURE_PROJECTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixing_the_lint_fixtures_parses_resolves_each_fixed_finding_and_is_stable(project, tmp_path):
    import shutil
    from collections import Counter

    tree = tmp_path / project.name  # the fixtures' configuration names files by this folder
    shutil.copytree(project, tree)
    for config in (project.parent / "pyproject.toml", project.parent.parent / "layoutcheck.toml"):
        if config.is_file():
            shutil.copy(config, tmp_path / config.name)
    before = run([tree], cwd=tmp_path, use_cache=False, jobs=1)
    texts = {p: p.read_text() for p in tree.rglob("*.py")}
    fixed = run([tree], cwd=tmp_path, use_cache=False, jobs=1, fix=True, unsafe_fixes=True)
    assert not fixed.errors, fixed.errors
    changed = [p for p in texts if p.read_text() != texts[p]]
    for path in changed:
        ast.parse(path.read_text())
    assert len(changed) == len(fixed.fixed_files)
    # Every offered fix went in, and a fix never adds a finding: per file and rule, only fewer.
    assert [f for f in fixed.findings if f.fix is not None] == []
    counts = Counter((f.path, f.rule) for f in fixed.findings)
    assert all(n <= Counter((f.path, f.rule) for f in before.findings)[key] for key, n in counts.items())
    assert len(before.findings) - len(fixed.findings) >= fixed.stats.fixed
    if "lookalike" in project.name:
        assert changed == []
    again = run([tree], cwd=tmp_path, use_cache=False, jobs=1, fix=True, unsafe_fixes=True)
    assert again.fixed_files == [] and again.findings == fixed.findings
