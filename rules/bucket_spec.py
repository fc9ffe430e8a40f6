from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from layoutcheck.geometry import bucket_problems, repair_buckets, round_up
from layoutcheck.lint.edits import SAFE, UNSAFE, Edit, Fix
from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries

_USES = '''
import bisect

import torch.nn.functional as F


def pad_to_bucket(tokens, config, cfg, sampler, lengths):
    """Where this project pads each micro-batch to the smallest bucket that holds its longest sample."""
    n = max(t.size(0) for t in tokens)
    first = next(b for b in SEQ_LEN_BUCKETS if b >= n)
    second = min(b for b in config.seq_len_buckets if b >= n)
    third = bisect.bisect_left(config["length_buckets"], max(lengths))
    fourth = min(b for b in cfg.shape_buckets if b >= n)
    for b in sampler.buckets:
        if n <= b:
            return [F.pad(t, (0, b - t.size(0))) for t in tokens], first, second, third, fourth
    return tokens, first, second, third, fourth


def get_rollout_data(args, rollout_data):
    """The owner pads to units built from these multipliers."""
    unit = args.tp_size * args.pad_multiplier * args.data_pad_size_multiplier
    rollout_data["max_seq_lens"] = [-(-t // unit) * unit for t in rollout_data["total_lengths"]]
    return rollout_data
'''
"""The rest of the project: it searches the bucket lists for the smallest that holds a length, and pads to
the multipliers."""

_LORA = '''
VALID_VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


def serving_rank(lora_rank, engine_args):
    """The smallest rank the inference engine accepts that holds the adapter's rank (a LoRA rank, no length)."""
    for rank in VALID_VLLM_LORA_RANKS:
        if rank >= lora_rank:
            engine_args["max_lora_rank"] = rank
            break
    return engine_args
'''
"""A list searched just like buckets, for an entry that holds a LoRA rank: no sequence length flows in."""


if TYPE_CHECKING:
    import libcst as cst

    from layoutcheck.lint.fixsite import FixSite

class BucketSpec(ModelRule):
    """Bucket lists and pad multipliers, written as literals, that break the layout's rules.

    ## What it does
    Checks int lists bound to a name the project uses as sequence-length
    buckets (searched for the smallest entry that holds a length:
    `min(b for b in xs if b >= n)`, `next(...)`, `bisect(xs, n)`, a loop that
    returns the first `b >= n`, where `n` is computed from sequence lengths,
    such as `len(tokens)` or the longest sample; a list searched for the
    smallest entry that holds something else, a LoRA rank, is no bucket list
    whatever its name) against the bucket rules of
    `layoutcheck.geometry.bucket_problems`: positive multiples of
    `bucket-quantum` (128), strictly increasing, none above `max_length`
    (when a call also passes `max_length=` as a literal). It also checks int
    literals bound to a factor of the unit an owner pads lengths to (the
    attribute `data_pad_size_multiplier` of `args.data_pad_size_multiplier`,
    say): 0, or 16 and above and not a multiple of `pad-multiple-quantum`
    (16); smaller values are parallel sizes' defaults. Assignments, annotated assignments,
    parameter defaults, keyword arguments, dict entries and argparse
    `add_argument("--seq-len-buckets", default=[...])` are read. Only
    literals are judged; a list whose largest entry is below the quantum is
    taken to be batch-size buckets and left alone, and so is anything inside
    `with pytest.raises(...)` (a test that expects the bad value to fail).

    ## Why it matters
    With compiled blocks each micro-batch pads to the smallest bucket that
    fits (invariant G6), and the compiler keeps one graph per bucket.
    Flex-attention block masks work in 128-token blocks and fp8 GEMMs need
    multiples of 16, so a bucket of 1000 or a multiplier of 100 fails, or
    silently recompiles, far from the line that chose it. An unsorted list
    makes "the smallest bucket that fits" pick the wrong one.

    ## Example
    ```python
    SEQ_LEN_BUCKETS = [1024, 512, 2000, 4096]
    parser.add_argument("--data-pad-size-multiplier", type=int, default=100)
    ```

    ## How to fix
    ```python
    SEQ_LEN_BUCKETS = [512, 1024, 2048, 4096]
    parser.add_argument("--data-pad-size-multiplier", type=int, default=128)
    ```
    Good boundaries depend on the corpus's length distribution: each bucket
    saves padding on the samples it fits and costs one compile warm-up.

    ## Configuration
    `bucket-quantum`, `pad-multiple-quantum`; `bucket-names` and
    `pad-multiplier-names` are hints that judge names the tree shows no use of.

    ## Fix safety
    A bucket list of int literals is rewritten to the nearest valid one
    (`layoutcheck.geometry.repair_buckets`): sorted, each bucket rounded up to
    a multiple of the quantum, repeats and buckets above `max_length`
    dropped, and `max_length` (when the call passes it) as the last bucket.
    The fix is safe when it only reorders the list or changes its last
    bucket: every length still pads to a bucket that holds it. It is unsafe
    when it rounds, drops or adds other buckets (the graphs compiled, and
    the padding paid, change), and when the list is bound to a name that the
    file passes to `zip(...)`: a sort would silently re-pair it with the
    other list. There is no fix for a list with comments between its
    buckets that must be reordered (each comment would end up beside
    another bucket), nor for a pad multiplier: the right one is the user's
    choice.
    """

    code = "LC201"
    message = (
        "`seq_len_buckets = [1024, 512, 2000]` breaks the bucket rules: bucket #1 is 512, not above the "
        "previous bucket 1024. Use positive multiples of 128 in increasing order, none above `max_length`."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        # An int literal bound to a name, a keyword or a default (`= 128`, `=[...]`, `default=...`).
        return "=" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        settings = file.settings
        project = file.project
        for found in file.facts.buckets:
            if not found.configured:
                used = project.bucket_names if found.kind == "buckets" else project.unit_atoms
                if found.name not in used:
                    continue  # nothing in the project searches it for a fit, or pads with it
            if found.kind == "buckets":
                values = list(found.values)
                quantum = settings.bucket_quantum
                if max(values) < quantum or values[0] == 0:
                    continue  # batch-size buckets, or histogram edges: not padded sequence lengths
                max_length = found.max_length
                if max_length is None or max_length < 1:
                    # With no `max_length` at hand, the largest bucket rounded up to the
                    # quantum stands in for it: the per-bucket faults are then all there is.
                    max_length = round_up(max(values), quantum)
                problems = bucket_problems(values, max_length, quantum=quantum)
                if problems:
                    yield self.report(
                        found.span,
                        f"`{found.name}` breaks the bucket rules: {'; '.join(problems)}. Use positive multiples "
                        f"of {quantum} in increasing order, none above `max_length`.",
                    )
            else:
                number = found.values[0]
                unit = settings.pad_multiple_quantum
                if number > 0 and number % unit == 0:
                    continue
                if 0 < number < unit and not found.configured:
                    continue  # a small factor of the unit (a parallel size's default), not the multiplier
                yield self.report(
                    found.span,
                    f"`{found.name}` is {number}, not a positive multiple of {unit}, so padded lengths miss the "
                    f"fp8 alignment. Use a multiple of {unit} (the default multiplier is 128).",
                )

    def fix(self, site: FixSite) -> Fix | None:
        """A bucket list of int literals made valid; see the docs' Fix safety."""
        import libcst as cst

        node = site.node(cst.List, cst.Tuple)
        if node is None or not node.elements:
            return None  # a pad multiplier, or a list that is not all literals
        values: list[int] = []
        for element in node.elements:
            if not isinstance(element, cst.Element) or not isinstance(element.value, cst.Integer):
                return None
            values.append(int(element.value.evaluated_value))
        quantum = site.settings.bucket_quantum
        repaired = repair_buckets(values, _max_length(site, node), quantum=quantum)
        if repaired is None or list(repaired) == values:
            return None
        tree = site.tree
        if "#" in tree.text(node) and sorted(values) != values:
            return None  # reordering would leave each comment beside another bucket
        texts = {int(e.value.evaluated_value): tree.text(e.value) for e in node.elements}  # type: ignore[attr-defined]
        literal = [texts.get(v, str(v)) for v in repaired]
        edits = [tree.replace(e.value, text) for e, text in zip(node.elements, literal, strict=False) if text != tree.text(e.value)]
        last = node.elements[len(values) - 1].value
        if len(literal) > len(values):  # `max_length` appended
            end = tree.span(last)[1]
            edits.append(Edit(end, end, "".join(f", {text}" for text in literal[len(values):])))
        elif len(literal) < len(values):  # repeats or buckets above `max_length` dropped
            keep_end = tree.span(node.elements[len(literal) - 1].value)[1]
            comma = "," if isinstance(node, cst.Tuple) and len(literal) == 1 and \
                isinstance(node.elements[-1].comma, cst.MaybeSentinel) else ""
            edits.append(Edit(keep_end, tree.span(last)[1], comma))
        ordered = sorted(values)
        only_order_and_last = list(repaired) in (ordered, [*ordered[:-1], repaired[-1]], [*ordered, repaired[-1]])
        reordered = list(repaired[: len(values)]) != values[: len(repaired)]
        safe = only_order_and_last and not (reordered and _zipped(site, node))
        return Fix(tuple(edits), SAFE if safe else UNSAFE,
                   f"use the valid buckets `{list(repaired)}`")

    valid = [
        Valid("SEQ_LEN_BUCKETS = [512, 1024, 2048, 4096]\n", files={"uses.py": _USES}),
        Valid(_LORA),  # searched for the smallest entry that holds a rank: its 320 is no bucket to round
        Valid("SEQ_LEN_BUCKETS = [1024, 512]\n", files={"uses.py": _LORA.replace("VALID_VLLM_LORA_RANKS", "SEQ_LEN_BUCKETS")}),
        Valid("sampler = BucketSampler(dataset, buckets=(1024, 2048, 4096), max_length=4096)\n", files={"uses.py": _USES}),
        Valid("cuda_graph_bs_buckets = [1, 2, 4, 8, 16, 32]\nbuckets = [1, 2, 4, 8]\n", files={"uses.py": _USES}),
        Valid("bucket_cap_mb = 25\nnum_buckets = 8\nbucket_boundaries = [0.5, 1.0, 2.0]\n", files={"uses.py": _USES}),
        Valid("def get_batch(data_iterator, keys, pad_multiplier: int = 128, qkv_format: str = 'thd'): ...\n", files={"uses.py": _USES}),
        Valid(
            """
parser.add_argument("--data-pad-size-multiplier", type=int, default=64)
parser.add_argument("--seq-len-buckets", type=int, nargs="+", default=[1024, 2048])
""",
            files={"uses.py": _USES},
        ),
        Valid("buckets = [base * 2**i for i in range(4)]\nconfig = {'length_buckets': BUCKETS}\n", files={"uses.py": _USES}),
        Valid("tokenizer.pad(features, pad_to_multiple_of=8)\n", files={"uses.py": _USES}),
        Valid(
            """
import pytest

def test_unsorted_buckets_are_rejected():
    with pytest.raises(ValueError, match="strictly increasing"):
        make_args(seq_len_buckets=(1024, 512))
""",
            files={"uses.py": _USES},
        ),
    ]
    invalid = [
        Invalid(  # the LoRA look-alike's name, but a sequence length is searched for in it: buckets
            """
import torch.nn.functional as F

VALID_VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


def pad_to_bucket(tokens):
    for size in VALID_VLLM_LORA_RANKS:
        if size >= tokens.size(0):
            return F.pad(tokens, (0, size - tokens.size(0)))
""",
            line=4,
            column=25,
            message="bucket #0 is 8, not a multiple of 128",
            replacement="""
import torch.nn.functional as F

VALID_VLLM_LORA_RANKS = (128, 256, 384, 512)


def pad_to_bucket(tokens):
    for size in VALID_VLLM_LORA_RANKS:
        if size >= tokens.size(0):
            return F.pad(tokens, (0, size - tokens.size(0)))
""",
            applicability="unsafe",
        ),
        Invalid(
            "SEQ_LEN_BUCKETS = [1024, 512, 2048, 4096]  # tuned on ShareGPT\n",
            line=1,
            column=19,
            message="bucket #1 is 512, not above the previous bucket 1024",
            replacement="SEQ_LEN_BUCKETS = [512, 1024, 2048, 4096]  # tuned on ShareGPT\n",
            files={"uses.py": _USES},
        ),
        Invalid(
            "seq_len_buckets = [1000, 2048]\n",
            line=1,
            column=19,
            message="bucket #0 is 1000, not a multiple of 128",
            replacement="seq_len_buckets = [1024, 2048]\n",
            applicability="unsafe",
            files={"uses.py": _USES},
        ),
        Invalid(
            "sampler = BucketSampler(dataset, buckets=(1024, 2048, 8192), max_length=4096)\n",
            line=1,
            column=42,
            message="bucket #2 is 8192, above max_length 4096",
            replacement="sampler = BucketSampler(dataset, buckets=(1024, 2048, 4096), max_length=4096)\n",
            files={"uses.py": _USES},
        ),
        Invalid(
            """
seq_len_buckets = [2048, 1024, 4096]
micro_batch_sizes = [2, 4, 1]
plan = dict(zip(seq_len_buckets, micro_batch_sizes))
""",
            line=2,
            column=19,
            message="bucket #1 is 1024",
            replacement="""
seq_len_buckets = [1024, 2048, 4096]
micro_batch_sizes = [2, 4, 1]
plan = dict(zip(seq_len_buckets, micro_batch_sizes))
""",
            applicability="unsafe",
            files={"uses.py": _USES},
        ),
        Invalid(
            "def get_batch(data_iterator, keys, pad_multiplier: int = 100): ...\n",
            line=1,
            column=58,
            message="`pad_multiplier` is 100, not a positive multiple of 16",
            files={"uses.py": _USES},
        ),
        Invalid(
            'parser.add_argument("--data-pad-size-multiplier", type=int, default=0)\n',
            line=1,
            column=69,
            message="`data_pad_size_multiplier` is 0",
            files={"uses.py": _USES},
        ),
        Invalid(
            "config = {'length_buckets': [2048, 2048, 4096]}\n",
            line=1,
            column=29,
            message="not above the previous bucket 2048",
            replacement="config = {'length_buckets': [2048, 4096]}\n",
            applicability="unsafe",
            files={"uses.py": _USES},
        ),
        Invalid(
            "class TrainConfig:\n    shape_buckets: tuple[int, ...] = (4096, 1024, 2048)\n",
            line=2,
            column=38,
            message="bucket #1 is 1024, not above the previous bucket 4096",
            replacement="class TrainConfig:\n    shape_buckets: tuple[int, ...] = (1024, 2048, 4096)\n",
            files={"uses.py": _USES},
        ),
    ]


def _max_length(site: FixSite, node: cst.BaseExpression) -> int | None:
    """The int literal passed as ``max_length=`` to the call whose argument ``node`` is, if any."""
    import libcst as cst

    arg = site.tree.parent(node)
    call = site.tree.parent(arg) if isinstance(arg, cst.Arg) else None
    if not isinstance(call, cst.Call):
        return None
    for other in call.args:
        if other.keyword is not None and other.keyword.value == "max_length" and isinstance(other.value, cst.Integer):
            return int(other.value.evaluated_value)
    return None


def _zipped(site: FixSite, node: cst.BaseExpression) -> bool:
    """Is the name ``node`` is assigned to passed to ``zip(...)`` anywhere in the file (paired by position)?"""
    import libcst as cst

    from layoutcheck.lint.fixscope import names_in
    from layoutcheck.lint.walk import visit

    parent = site.tree.parent(node)
    target = None
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        target = parent.targets[0].target
    elif isinstance(parent, cst.AnnAssign):
        target = parent.target
    name = target.value if isinstance(target, cst.Name) else target.attr.value if isinstance(
        target, cst.Attribute) else None
    if name is None:
        return False
    zipped = False

    class _Zips(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            nonlocal zipped
            if isinstance(call.func, cst.Name) and call.func.value == "zip":
                for arg in call.args:
                    text = site.tree.module.code_for_node(arg.value)
                    if name in names_in(arg.value) or text.endswith(f".{name}"):
                        zipped = True

    visit(site.tree.module, _Zips())
    return zipped
