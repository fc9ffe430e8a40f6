from __future__ import annotations

import libcst as cst

from layoutcheck.geometry import bucket_problems, round_up
from layoutcheck.lint.names import text_mentions, vocabulary
from layoutcheck.lint.nodes import expects_error, int_value, keyword, last_name, positional, string_value
from layoutcheck.lint.rule import Invalid, LintContext, LintRule, Valid
from layoutcheck.lint.settings import LintSettings

_MAX_LENGTH_KEYWORDS = ("max_length", "max_len", "max_seq_len", "max_seq_length", "max_tokens")


class BucketSpec(LintRule):
    """Bucket lists and pad multipliers, written as literals, that break the layout's rules.

    ## What it does
    Checks int literals bound to sequence-length bucket names (`bucket-names`:
    `buckets`, `seq_len_buckets`, `length_buckets`...) against the bucket
    rules of `layoutcheck.geometry.bucket_problems`: positive multiples of
    `bucket-quantum` (128), strictly increasing, none above `max_length`
    (when a call also passes `max_length=` as a literal). It also checks int
    literals bound to pad multiplier names (`pad-multiplier-names`:
    `pad_multiplier`, `data_pad_size_multiplier`...): positive multiples of
    `pad-multiple-quantum` (16). Assignments, annotated assignments,
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
    `bucket-names`, `bucket-quantum`, `pad-multiplier-names`, `pad-multiple-quantum`.

    ## Fix safety
    No autofix: sorting an unsorted list looks safe but is not provably so:
    code may pair the buckets by position with another list
    (`zip(buckets, batch_sizes)`), which a sort would silently mismatch. The
    right bucket or multiplier, for the other faults, is the user's choice.
    """

    code = "LC201"
    message = (
        "`seq_len_buckets = [1024, 512, 2000]` breaks the bucket rules: bucket #1 is 512, not above the "
        "previous bucket 1024. Use positive multiples of 128 in increasing order, none above `max_length`."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        names = (*settings.bucket_names, *settings.pad_multiplier_names)
        if text_mentions(source, names):
            return True
        # argparse spells names with dashes: `--data-pad-size-multiplier`.
        return "--" in source and text_mentions(source.replace("-", "_"), names)

    def __init__(self, context: LintContext) -> None:
        super().__init__(context)
        self.vocab = vocabulary(context.settings)
        self._expecting_error = 0
        """Inside ``with pytest.raises(...)``: a bad literal there is the test's point."""

    def visit_With(self, node: cst.With) -> None:
        self._expecting_error += expects_error(node)

    def leave_With(self, original_node: cst.With) -> None:
        self._expecting_error -= expects_error(original_node)

    @staticmethod
    def _literal(value: cst.BaseExpression | None) -> cst.BaseExpression | None:
        """The literal a dataclass field defaults to: ``field(default_factory=lambda: [...])``."""
        if isinstance(value, cst.Call) and last_name(value.func) == "field":
            value = keyword(value, "default") or keyword(value, "default_factory")
            if isinstance(value, cst.Lambda):
                value = value.body
        return value

    def _judge(self, name: str | None, value: cst.BaseExpression | None, max_length: int | None = None) -> None:
        value = self._literal(value)
        if name is None or value is None or self._expecting_error:
            return
        if self.vocab.is_bucket(name):
            self._buckets(name, value, max_length)
        if self.vocab.is_pad_multiplier(name):
            self._multiplier(name, value)

    def _buckets(self, name: str, value: cst.BaseExpression, max_length: int | None) -> None:
        if not isinstance(value, (cst.List, cst.Tuple)) or not value.elements:
            return
        elements = value.elements
        numbers = [int_value(e.value) if isinstance(e, cst.Element) else None for e in elements]
        if any(n is None for n in numbers):
            return  # only literal lists are judged
        values: list[int] = numbers  # type: ignore[assignment]
        quantum = self.settings.bucket_quantum
        if max(values) < quantum or values[0] == 0:
            return  # batch-size buckets, or histogram edges: not padded sequence lengths
        if max_length is None or max_length < 1:
            # With no `max_length` at hand, the largest bucket rounded up to the
            # quantum stands in for it: the per-bucket faults are then all there is.
            max_length = round_up(max(values), quantum)
        problems = bucket_problems(values, max_length, quantum=quantum)
        if problems:
            self.report(
                value,
                f"`{name}` breaks the bucket rules: {'; '.join(problems)}. Use positive multiples of {quantum} "
                "in increasing order, none above `max_length`.",
            )

    def _multiplier(self, name: str, value: cst.BaseExpression) -> None:
        number = int_value(value)
        unit = self.settings.pad_multiple_quantum
        if number is None or (number > 0 and number % unit == 0):
            return
        self.report(
            value,
            f"`{name}` is {number}, not a positive multiple of {unit}, so padded lengths miss the fp8 "
            f"alignment. Use a multiple of {unit} (the default multiplier is 128).",
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._judge(last_name(target.target) or self._key(target.target), node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._judge(last_name(node.target) or self._key(node.target), node.value)

    def visit_Param(self, node: cst.Param) -> None:
        self._judge(node.name.value, node.default)

    def visit_Dict(self, node: cst.Dict) -> None:
        for element in node.elements:
            if isinstance(element, cst.DictElement):
                self._judge(string_value(element.key), element.value)

    def visit_Call(self, node: cst.Call) -> None:
        named = [a for a in node.args if a.keyword is not None]
        if any(self.vocab.is_bucket(a.keyword.value) for a in named):  # type: ignore[union-attr]
            max_length = next(
                (v for k in _MAX_LENGTH_KEYWORDS if (v := int_value(keyword(node, k))) is not None), None
            )
        else:
            max_length = None
        for arg in named:
            self._judge(arg.keyword.value, arg.value, max_length)  # type: ignore[union-attr]
        if last_name(node.func) == "add_argument":
            # `parser.add_argument("--seq-len-buckets", nargs="+", default=[...])`
            flags = [string_value(a) for a in positional(node)]
            names = [f.lstrip("-").replace("-", "_") for f in flags if f and f.startswith("-")]
            for name in names[-1:]:
                self._judge(name, keyword(node, "default"))

    @staticmethod
    def _key(node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            return string_value(node.slice[0].slice.value)
        return None

    valid = [
        Valid("SEQ_LEN_BUCKETS = [512, 1024, 2048, 4096]\n"),
        Valid("sampler = BucketSampler(dataset, buckets=(1024, 2048, 4096), max_length=4096)\n"),
        Valid("cuda_graph_bs_buckets = [1, 2, 4, 8, 16, 32]\nbuckets = [1, 2, 4, 8]\n"),
        Valid("bucket_cap_mb = 25\nnum_buckets = 8\nbucket_boundaries = [0.5, 1.0, 2.0]\n"),
        Valid("def get_batch(data_iterator, keys, pad_multiplier: int = 128, qkv_format: str = 'thd'): ...\n"),
        Valid(
            """
parser.add_argument("--data-pad-size-multiplier", type=int, default=64)
parser.add_argument("--seq-len-buckets", type=int, nargs="+", default=[1024, 2048])
"""
        ),
        Valid("buckets = [base * 2**i for i in range(4)]\nconfig = {'length_buckets': BUCKETS}\n"),
        Valid("tokenizer.pad(features, pad_to_multiple_of=8)\n"),
        Valid(
            """
import pytest

def test_unsorted_buckets_are_rejected():
    with pytest.raises(ValueError, match="strictly increasing"):
        make_args(seq_len_buckets=(1024, 512))
"""
        ),
    ]
    invalid = [
        Invalid(
            "SEQ_LEN_BUCKETS = [1024, 512, 2048, 4096]\n",
            line=1,
            column=19,
            message="bucket #1 is 512, not above the previous bucket 1024",
        ),
        Invalid(
            "seq_len_buckets = [1000, 2048]\n",
            line=1,
            column=19,
            message="bucket #0 is 1000, not a multiple of 128",
        ),
        Invalid(
            "sampler = BucketSampler(dataset, buckets=(1024, 2048, 8192), max_length=4096)\n",
            line=1,
            column=43,
            message="bucket #2 is 8192, above max_length 4096",
        ),
        Invalid(
            "def get_batch(data_iterator, keys, pad_multiplier: int = 100): ...\n",
            line=1,
            column=58,
            message="`pad_multiplier` is 100, not a positive multiple of 16",
        ),
        Invalid(
            'parser.add_argument("--data-pad-size-multiplier", type=int, default=0)\n',
            line=1,
            column=69,
            message="`data_pad_size_multiplier` is 0",
        ),
        Invalid(
            "config = {'length_buckets': [2048, 2048, 4096]}\n",
            line=1,
            column=29,
            message="not above the previous bucket 2048",
        ),
        Invalid(
            "class TrainConfig:\n    shape_buckets: tuple[int, ...] = (4096, 1024, 2048)\n",
            line=2,
            column=39,
            message="bucket #1 is 1024, not above the previous bucket 4096",
        ),
    ]
