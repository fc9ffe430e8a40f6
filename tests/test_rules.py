"""Every rule's inline examples, run as tests: the examples are the rules' specification.

A valid example must produce no finding of its rule; an invalid one exactly
one, at the line, column and with the message fragment it names. For a rule
with fixes, an invalid example with a ``replacement`` must be fixed to
exactly that text (with ``--unsafe-fixes`` when its ``applicability`` is
unsafe, and not without), the finding must be gone, and fixing again must
change nothing; an invalid example without one is a case the fix declines.
"""

from __future__ import annotations

import ast

import pytest

from layoutcheck.config import validate_table
from layoutcheck.lint.engine import lint_source
from layoutcheck.lint.fix import fix_source
from layoutcheck.lint.registry import all_rules, rule_by_name
from layoutcheck.lint.rule import Invalid, LintRule, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.idioms import match_agreement, match_pad_amount, match_round_up
from layoutcheck.model.imports import Imports

PRODUCER = """
def get_rollout_data(args, rollout_data):
    rollout_data["total_lengths"] = [len(t) for t in rollout_data["tokens"]]
    unit = args.data_pad_size_multiplier
    rollout_data["max_seq_lens"] = [-(-t // unit) * unit for t in rollout_data["total_lengths"]]
    return rollout_data
"""
"""An owner of `max_seq_lens` elsewhere in the project (it writes each sample's rounded-up length,
measured from the rollout's tokens): what makes a pad of those lengths a second owner."""


def expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def text_of(node: ast.AST) -> str:
    return ast.unparse(node)

CASES = [
    pytest.param(rule, case, id=f"{rule.name}-{kind}-{number}")
    for rule in all_rules()
    for kind, cases in (("valid", rule.valid), ("invalid", rule.invalid))
    for number, case in enumerate(cases, start=1)
]


def _findings(rule: type[LintRule], case: Valid | Invalid):
    result = lint_source(case.code, case.path, [rule], LintSettings(**case.settings), files=case.files)
    assert not result.errors, result.errors
    return [f for f in result.findings if f.rule == rule.name]


@pytest.mark.parametrize(("rule", "case"), CASES)
def test_example(rule: type[LintRule], case: Valid | Invalid) -> None:
    found = _findings(rule, case)
    if isinstance(case, Valid):
        assert found == [], [f"{f.line}:{f.column} {f.message}" for f in found]
        return
    assert len(found) == 1, [f"{f.line}:{f.column} {f.message}" for f in found]
    finding = found[0]
    if case.line is not None:
        assert finding.line == case.line, finding
    if case.column is not None:
        assert finding.column == case.column, finding
    if case.message is not None:
        assert case.message in finding.message
    # A plain lint never computes a model rule's fix (it would import libcst): it only says one may exist.
    assert finding.fix == ("unknown" if rule.has_autofix() else None), finding
    assert not finding.fixable


FIX_CASES = [
    pytest.param(rule, case, id=f"{rule.name}-invalid-{number}")
    for rule in all_rules() if rule.has_autofix()
    for number, case in enumerate(rule.invalid, start=1)
]


@pytest.mark.parametrize(("rule", "case"), FIX_CASES)
def test_example_fix(rule: type[LintRule], case: Invalid) -> None:
    """Each invalid example of a rule with fixes is fixed to exactly its ``replacement`` with the
    applicability it names (or left alone when it names none); the fixed code no longer has the
    finding, and fixing it again changes nothing."""
    settings = LintSettings(**case.settings)
    everything = fix_source(case.code, case.path, [rule], settings, unsafe=True, files=case.files)
    assert not everything.errors, everything.errors
    if case.replacement is None:
        assert everything.fix is None, everything.fix and everything.fix.fixed
        [left] = [f for f in everything.findings if f.rule == rule.name]
        assert left.fix is None and not left.fixable
        return
    assert everything.fix is not None, rule.name
    assert everything.fix.fixed == case.replacement
    assert not [f for f in everything.findings if f.rule == rule.name]
    again = fix_source(case.replacement, case.path, [rule], settings, unsafe=True, files=case.files)
    assert again.fix is None and not [f for f in again.findings if f.rule == rule.name]
    safe_only = fix_source(case.code, case.path, [rule], settings, files=case.files)
    if case.applicability == "safe":
        assert safe_only.fix is not None and safe_only.fix.fixed == case.replacement
    else:  # shown as available, never applied without --unsafe-fixes
        assert safe_only.fix is None
        [left] = [f for f in safe_only.findings if f.rule == rule.name]
        assert left.fix == "unsafe" and not left.fixable


def test_every_rule_has_enough_examples() -> None:
    for rule in all_rules():
        assert 5 <= len(rule.valid) <= 14, rule.name
        assert 4 <= len(rule.invalid) <= 10, rule.name


def test_all_rules_together_agree_with_each_rule_alone() -> None:
    """The rules query one shared model (`layoutcheck.model`): running them together
    must give each one the findings it gives alone."""
    rules = list(all_rules())
    for rule in rules:
        for case in (*rule.invalid, *rule.valid):
            settings = LintSettings(**case.settings)
            alone = lint_source(case.code, case.path, [rule], settings, files=case.files).findings
            together = lint_source(case.code, case.path, rules, settings, files=case.files).findings
            assert [f for f in together if f.rule == rule.name] == alone, (rule.name, case.code)


# --- the shared recognisers (layoutcheck.model.idioms), spelling by spelling ---

ROUND_UPS = [
    "(n + m - 1) // m * m",
    "m * ((n + m - 1) // m)",
    "(n + (m - 1)) // m * m",
    "(n - 1 + m) // m * m",
    "-(-n // m) * m",
    "math.ceil(n / m) * m",
    "int(math.ceil(n / m)) * m",
    "((n - 1) // m + 1) * m",
    "triton.cdiv(n, m) * m",
    "(n + 2 * cp - 1) // (2 * cp) * (2 * cp)",
]
LIBRARY_ROUND_UPS = [
    ("from triton import cdiv", "cdiv(n, m) * m"),
    ("from layoutcheck.geometry import round_up", "round_up(n, m)"),
    ("from layoutcheck import geometry", "geometry.round_up(n, m)"),
    ("import megatron.core.utils as mu", "mu.align(n, m)"),
    ("from flash_attn.utils import pad_to_multiple", "pad_to_multiple(n, m)"),
]
"""Helpers read by their names: a library's API name is its meaning (`idioms.LIBRARY_ROOTS`)."""
PAD_AMOUNTS = ["(m - n % m) % m", "(-n) % m", "-n % m", "m - n % m"]
NEITHER = [
    "(n + m - 1) // m",  # a count (grid size, micro-batches), not a padded length
    "n // m * m",  # rounds down
    "math.ceil(n / m)",
    "(n + m) // m * m",
    "n % m",
    "(n + k - 1) // m * m",
    "round_up(n)",
    "round_up(n, m)",  # the project's own helper, unimported: judged by its body (see below)
    "align(n, m)",
]


@pytest.mark.parametrize("text", ROUND_UPS)
def test_round_up_spellings(text: str) -> None:
    found = match_round_up(expr(text), Imports())
    assert found is not None
    assert [text_of(v) for v in found.values] == ["n"]


@pytest.mark.parametrize(("line", "text"), LIBRARY_ROUND_UPS)
def test_library_round_up_helpers(line: str, text: str) -> None:
    imports = Imports()
    imports.add(ast.parse(line).body[0])  # type: ignore[arg-type]
    found = match_round_up(expr(text), imports)
    assert found is not None and [text_of(v) for v in found.values] == ["n"]


def test_the_projects_own_round_up_helper_is_read_from_its_body() -> None:
    """Any name: `snap` returns its first parameter rounded up to its second, so its calls are
    round-ups (here of the rollout's lengths, which the producer pads: a second owner)."""
    code = """
def snap(n, m):
    return (n + m - 1) // m * m


def lengths(rollout_data, unit):
    return [snap(t, unit) for t in rollout_data["total_lengths"]]
"""
    rule = rule_by_name("padding-outside-owner")
    found = lint_source(code, "example.py", [rule], LintSettings(), files={"data.py": PRODUCER}).findings
    assert [(f.line, f.column) for f in found] == [(7, 13)]


@pytest.mark.parametrize("text", PAD_AMOUNTS)
def test_pad_amount_spellings(text: str) -> None:
    found = match_pad_amount(expr(text))
    assert found is not None and text_of(found.unit) == "m"


@pytest.mark.parametrize("text", NEITHER)
def test_not_a_round_up(text: str) -> None:
    node = expr(text)
    assert match_round_up(node, Imports()) is None and match_pad_amount(node) is None


@pytest.mark.parametrize(
    ("imports", "call"),
    [
        ("import torch.nn.functional as F", "F.pad"),
        ("from torch.nn import functional as Fn", "Fn.pad"),
        ("import torch", "torch.nn.functional.pad"),
        ("from torch import nn", "nn.functional.pad"),
        ("from torch.nn.functional import pad", "pad"),
        ("from torch.nn.functional import pad as tpad", "tpad"),
    ],
)
def test_f_pad_is_recognised_under_any_alias(imports: str, call: str) -> None:
    code = f"""{imports}

def collate(batch):
    tokens = batch["tokens"]
    longest = max(t.size(0) for t in tokens)
    return [{call}(t, (0, longest - t.size(0))) for t in tokens]
"""
    rule = rule_by_name("padding-outside-owner")
    found = lint_source(code, "example.py", [rule], LintSettings(), files={"data.py": PRODUCER}).findings
    assert [(f.line, f.column) for f in found] == [(5, 15)]


def test_tokenizer_pad_is_not_torch_pad() -> None:
    code = """
def collate(tokenizer, tokens):
    longest = max(len(t) for t in tokens)
    return tokenizer.pad(tokens, (0, longest))
"""
    rule = rule_by_name("padding-outside-owner")
    assert lint_source(code, "example.py", [rule], LintSettings(), files={"data.py": PRODUCER}).findings == []


# --- agreement checks (unguarded-rectangular-batch's guards), spelling by spelling ---

AGREEMENTS = [
    ("len(set(xs)) == 1", False, "agree"),
    ("len(set(xs)) <= 1", False, "agree"),
    ("1 == len(frozenset(xs))", False, "agree"),
    ("min(xs) == max(xs)", False, "agree"),
    ("all(p == xs[0] for p in xs)", False, "agree"),
    ("xs.count(xs[0]) == len(xs)", False, "agree"),
    ("len(xs) == 1", False, "single"),
    ("qkv_format != 'bshd' or len(set(xs)) == 1", False, "agree"),
    ("len(set(xs)) != 1", True, "agree"),
    ("len(set(xs)) > 1", True, "agree"),
    ("min(xs) < max(xs)", True, "agree"),
    ("not all(p == xs[0] for p in xs)", True, "agree"),
    ("any(p != xs[0] for p in xs)", True, "agree"),
    ("xs.count(xs[0]) != len(xs)", True, "agree"),
    ("qkv_format == 'bshd' and len(xs) != 1", True, "single"),
]
NOT_AGREEMENTS = [
    ("all(p % 128 == 0 for p in xs)", False),  # aligned, not equal
    ("max(xs) <= args.seq_length", False),  # a bound
    ("len(xs) >= 1", False),  # not empty
    ("len(set(xs)) == len(xs)", False),  # all distinct
    ("min(xs) <= max(xs)", False),  # always true
    ("all(p <= xs[0] for p in xs)", False),
    ("len(set(xs)) == 1", True),  # raising when they agree checks nothing
    ("isinstance(xs, list)", False),
]


@pytest.mark.parametrize(("text", "negated", "kind"), AGREEMENTS)
def test_agreement_spellings(text: str, negated: bool, kind: str) -> None:
    found = match_agreement(expr(text), Imports(), negated=negated)
    assert [(k, text_of(xs)) for k, xs in found] == [(kind, "xs")]


@pytest.mark.parametrize(("text", "negated"), NOT_AGREEMENTS)
def test_not_an_agreement(text: str, negated: bool) -> None:
    assert match_agreement(expr(text), Imports(), negated=negated) == []


def test_every_unguarded_use_is_reported_so_one_suppression_hides_no_other() -> None:
    rule = rule_by_name("unguarded-rectangular-batch")
    code = """
def get_batch(batch, tokens):
    P = batch["max_seq_lens"][0]  # layoutcheck: ignore[unguarded-rectangular-batch] -- one sample per batch here
    padded = [t[:P] for t in tokens]
    return padded, batch["max_seq_lens"][0]
"""
    found = lint_source(code, "example.py", [rule], LintSettings(), files={"data.py": PRODUCER}).findings
    assert [(f.line, f.column) for f in found] == [(5, 20)]


def test_a_guard_covers_only_the_list_it_checks() -> None:
    rule = rule_by_name("unguarded-rectangular-batch")
    code = """
def get_batch(batch, other):
    lens = batch["max_seq_lens"]
    assert len(set(lens)) == 1
    return batch["max_seq_lens"][0], other["max_seq_lens"][0]
"""
    found = lint_source(code, "example.py", [rule], LintSettings(), files={"data.py": PRODUCER}).findings
    assert [(f.line, f.column) for f in found] == [(5, 38)]


# --- messages name the fields the code uses; configured sources are hints, read in their order ---

@pytest.mark.parametrize("sources", [("zz_lens", "aa_lens"), ("aa_lens", "zz_lens")])
def test_messages_name_the_fields_involved_whatever_the_configured_order(sources: tuple[str, str]) -> None:
    settings = LintSettings(sources=sources)
    producer = "def produce(d, unit):\n    d['aa_lens'] = [-(-t // unit) * unit for t in d['total_lengths']]\n"
    found = lint_source("def f(batch):\n    return batch['zz_lens'][0] + batch['aa_lens'][0]\n", "example.py",
                        [rule_by_name("unguarded-rectangular-batch")], settings, files={"p.py": producer}).findings
    assert [("`zz_lens`" in f.message, "`aa_lens`" in f.message) for f in found] == [(True, False), (False, True)]
    cases = {
        "padding-outside-owner":
            "def f(d, pad_multiplier):\n"
            "    return [-(-t // pad_multiplier) * pad_multiplier for t in d['total_lengths']]\n",
        "lengths-mutated-after-owner": "def f(d, new):\n    d['total_lengths'] = new\n    return d['aa_lens'], d['zz_lens']\n",
    }
    for name, code in cases.items():
        found = lint_source(code, "example.py", [rule_by_name(name)], settings, files={"p.py": producer}).findings
        assert found and all("`aa_lens`" in f.message for f in found), (name, found)  # what `produce` writes
        assert not any("`zz_lens`" in f.message for f in found), name
    found = lint_source(
        "def uniform_zz_lens_aa_lens(tokens):\n    return [max(len(t) for t in tokens)] * len(tokens)\n",
        "example.py", [rule_by_name("global-max-padding")], settings,
    ).findings
    assert len(found) == 1 and f"in `{sources[0]}`" in found[0].message  # the hint, in configured order


# --- where a value goes (layoutcheck.lint.sinks): metrics stay silent, layouts do not ---

METRIC_ONLY = {
    "a sum of round-ups, logged": "print(sum(-(-t // unit) * unit for t in total_lengths))",
    "a round-up in an f-string": "logger.info(f'{(total_lengths[0] + unit - 1) // unit * unit}')",
    "into a metrics record": "metrics['padded'] = [-(-t // unit) * unit for t in total_lengths]",
    "under a tracker key": "out['perf/padded'] = -(-total_lengths[0] // unit) * unit",
    "compared": "assert -(-total_lengths[0] // unit) * unit <= limit",
    "a returned token count": "return sum(-(-t // unit) * unit for t in total_lengths)",
}
SHAPES_THE_LAYOUT = {
    "returned per sample": "return [-(-t // unit) * unit for t in total_lengths]",
    "a reduction that sizes a buffer": "buf = torch.zeros(sum(-(-t // unit) * unit for t in total_lengths))\nreturn buf",
    "a slice bound": "return tokens[0][: -(-total_lengths[0] // unit) * unit]",
    "passed on": "return build(-(-total_lengths[0] // unit) * unit)",
    "stored in a field": "self.padded = -(-total_lengths[0] // unit) * unit",
}


def _lint_body(body: str) -> list:
    code = "import torch\n\ndef f(self, rollout_data, tokens, logger, metrics, out, limit, tp_size, pad_multiplier):\n"
    code += "    unit = tp_size * pad_multiplier\n"
    code += "    total_lengths = rollout_data['total_lengths']\n"
    code += "".join(f"    {line}\n" for line in body.splitlines())
    rule = rule_by_name("padding-outside-owner")
    return lint_source(code, "example.py", [rule], LintSettings(), files={"data.py": PRODUCER}).findings


@pytest.mark.parametrize("body", METRIC_ONLY.values(), ids=METRIC_ONLY.keys())
def test_round_ups_that_only_feed_metrics_are_silent(body: str) -> None:
    assert _lint_body(body) == []


@pytest.mark.parametrize("body", SHAPES_THE_LAYOUT.values(), ids=SHAPES_THE_LAYOUT.keys())
def test_round_ups_that_may_shape_the_layout_are_reported(body: str) -> None:
    assert len(_lint_body(body)) == 1


def test_a_scratch_tensor_that_tokens_are_stored_into_is_a_token_batch() -> None:
    code = """
import torch

def collate(batch, log):
    tokens = batch["tokens"]
    out = torch.zeros(len(tokens), max(len(t) for t in tokens), dtype=torch.long)
    for i, t in enumerate(tokens):
        out[i, : len(t)] = t
    log.info("collated %s", out.shape)
"""
    rule = rule_by_name("padding-outside-owner")
    found = lint_source(code, "example.py", [rule], LintSettings(), files={"data.py": PRODUCER}).findings
    assert [(f.line, f.column) for f in found] == [(6, 36)]


def test_without_an_owner_in_the_project_the_padding_function_is_the_owner() -> None:
    """Cause 5 of issue 11: with no owner anywhere, a pad helper whose result its callers
    read is the only padding decision on its path; the same code beside an owner is a second one."""
    code = """
import torch

def stream_pad(batch, tp_size, pad_multiplier):
    stream = torch.cat(batch["tokens"])
    unit = tp_size * pad_multiplier
    return (unit - stream.numel() % unit) % unit
"""
    rule = rule_by_name("padding-outside-owner")
    assert lint_source(code, "example.py", [rule], LintSettings()).findings == []
    found = lint_source(code, "example.py", [rule], LintSettings(), files={"data.py": PRODUCER}).findings
    assert len(found) == 1 and "`get_rollout_data` (data.py:2) owns" in found[0].message


# --- cp-helpers: the helper's own def when the tree has it, the configuration otherwise ---

CP_UTILS = """
def get_logits_and_tokens_offset_with_cp(total_length, response_length, cp_rank, cp_size, qkv_format="thd",
                                         max_seq_len=None):
    length = total_length if qkv_format == "thd" else max_seq_len
    return (length + 2 * cp_size - 1) // (2 * cp_size) * cp_rank


def slice_with_cp(tokens, pad_value, qkv_format="thd", max_seq_len=None):
    if qkv_format == "bshd":
        assert max_seq_len is not None
    return tokens
"""


def test_a_helper_outside_the_tree_is_judged_only_when_configured() -> None:
    code = "def f(t, r):\n    return get_logits_and_tokens_offset_with_cp(t, r)\n"
    rule = rule_by_name("cp-helper-without-geometry")
    assert lint_source(code, "example.py", [rule], LintSettings()).findings == []  # no name is known by default
    configured = LintSettings(cp_helpers={"get_logits_and_tokens_offset_with_cp": {"qkv_format": 2, "max_seq_len": 3}})
    found = lint_source(code, "example.py", [rule], configured).findings
    assert len(found) == 1 and "without `qkv_format` and `max_seq_len`" in found[0].message


def test_positions_come_from_the_helpers_def_not_the_configuration() -> None:
    # This tree's helper takes the rank first: the appendix positions (2, 3) would misread the call.
    code = """
from cp_utils import get_logits_and_tokens_offset_with_cp

def offsets(t, r, cp, qkv_format, max_seq_len):
    return get_logits_and_tokens_offset_with_cp(t, r, cp.rank, cp.size, qkv_format, max_seq_len)


def offsets_without_layout(t, r, cp):
    return get_logits_and_tokens_offset_with_cp(t, r, cp.rank, cp.size)
"""
    rule = rule_by_name("cp-helper-without-geometry")
    found = lint_source(code, "example.py", [rule], LintSettings(), files={"cp_utils.py": CP_UTILS}).findings
    assert [f.line for f in found] == [9]
    assert "cp_utils.py:2" in found[0].message
    alone = lint_source(code, "example.py", [rule], LintSettings()).findings
    assert [f.line for f in alone] == []  # by the configured positions, 4 positional arguments pass both


def test_configured_helpers_outside_the_tree() -> None:
    """The README's form, `[tool.layoutcheck.cp-helpers.get_logits_and_tokens_offset_with_cp]`: each
    configured helper is judged at its own positions; an empty spec names none."""
    table = {"cp-helpers": {
        "get_logits_and_tokens_offset_with_cp": {"qkv_format": 4, "max_seq_len": 5},
        "slice_with_cp": {"qkv_format": 2, "max_seq_len": 3},
    }}
    settings = validate_table(table, None).settings()
    code = """
def debug(tokens, qkv_format, r, cp):
    local = slice_with_cp(tokens, 0, qkv_format, tokens.size(0))
    total_length = tokens.numel()
    return local, get_logits_and_tokens_offset_with_cp(total_length, r, cp.rank, cp.size, qkv_format, total_length)
"""
    rules = [rule_by_name("padding-outside-owner"), rule_by_name("cp-helper-without-geometry")]
    found = lint_source(code, "example.py", rules, settings).findings
    assert [(f.line, f.rule) for f in found] == [(3, "padding-outside-owner"), (5, "padding-outside-owner")]
    off = LintSettings(cp_helpers={"slice_with_cp": {}})  # an empty spec names no helper
    assert [f.line for f in lint_source(code, "example.py", rules, off).findings] == []


def test_a_call_in_a_packed_branch_may_omit_the_padded_length() -> None:
    code = """
def f(tokens, qkv_format):
    if qkv_format == "thd":
        return [slice_with_cp(t, 0, qkv_format) for t in tokens]
    if qkv_format != "bshd":
        return [slice_with_cp(t, 0) for t in tokens]
    return [slice_with_cp(t, 0, qkv_format) for t in tokens]
"""
    rule = rule_by_name("cp-helper-without-geometry")
    found = lint_source(code, "example.py", [rule], LintSettings(), files={"cp_utils.py": CP_UTILS}).findings
    assert [(f.line, "without `max_seq_len`, where the layout is BSHD" in f.message) for f in found] == [(7, True)]


def test_values_that_cannot_stand_alone_are_read_without_inlining() -> None:
    """Readers that inline locals (zipped rows, the width of a range of positions) meet expressions that are no
    expression alone (``zip(*parts)``: a starred value): they are kept as written, and the real finding comes."""
    source = '''
import torch

def heads(parts, sizes):
    rows = torch.cat(parts)
    return [row[:n].sum() for row, n in zip(*parts)], rows

def shard(record, ring_rank, world, ring_world):
    peers = max(1, world // ring_world)
    own = record["ids"].shape[1]
    span = own * peers
    record["pos"] = torch.arange(ring_rank * span, ring_rank * span + span)
    return record
'''
    result = lint_source(source, "example.py", list(all_rules()), LintSettings())
    assert not result.errors, result.errors
    assert [(f.line, f.rule) for f in result.findings] == [(12, "positions-in-another-space")]


_ONE_LENGTH_FOR_ALL = """
def get_rollout_data(rollout_data, unit):
    longest = max(len(t) for t in rollout_data["tokens"])
    padded = -(-longest // unit) * unit
{build}
"""


@pytest.mark.parametrize("build", [
    '    rollout_data["max_seq_lens"] = [padded for _ in rollout_data["tokens"]]',
    '    out = []\n    for _ in rollout_data["tokens"]:\n        out.append(padded)\n    rollout_data["max_seq_lens"] = out',
    '    out = []\n    for _ in rollout_data["tokens"]:\n        out.extend([padded])\n    rollout_data["max_seq_lens"] = out',
], ids=["comprehension", "append loop", "extend loop"])
def test_a_list_grown_by_extend_in_a_loop_reads_as_the_comprehension(build: str) -> None:
    """`xs.extend([e])` in a loop is `xs.append(e)`: the one length given to every sample is flagged
    whichever way the list is built."""
    code = _ONE_LENGTH_FOR_ALL.format(build=build)
    found = lint_source(code, "rollout.py", [rule_by_name("global-max-padding")], LintSettings()).findings
    assert [f.rule for f in found] == ["global-max-padding"]


_BOUNDS_ON_TWO_PATHS = """
def piece(mask, total, response, lo, hi, raw):
    prompt = total - response
    if raw:
        s, e = {first}
    else:
        s, e = {second}
    return mask[s:e]
"""
_RAW, _CLAMPED = "lo - prompt, hi - prompt", "max(0, lo - prompt), max(0, hi - prompt)"


@pytest.mark.parametrize(("first", "second", "flagged"), [
    (_RAW, _CLAMPED, True), (_CLAMPED, _RAW, True), (_CLAMPED, _CLAMPED, False),
], ids=["unclamped first", "unclamped last", "clamped on both"])
def test_a_local_bound_apart_on_two_branches_is_read_on_each_path(first: str, second: str, flagged: bool) -> None:
    """Bounds bound on each branch of an `if` join both paths' expressions: the unclamped path is
    flagged whichever branch it is written in (not only when it is walked last)."""
    code = _BOUNDS_ON_TWO_PATHS.format(first=first, second=second)
    found = lint_source(code, "loss.py", [rule_by_name("positions-in-another-space")], LintSettings()).findings
    assert [f.rule for f in found] == (["positions-in-another-space"] if flagged else [])
