from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.geometry import bucket_problems, round_up
from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries
from layoutcheck.model.vocabulary import text_mentions

class BucketSpec(ModelRule):
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

    def check(self, file: FileQueries) -> Iterator[Report]:
        settings = file.settings
        for found in file.facts.buckets:
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
                yield self.report(
                    found.span,
                    f"`{found.name}` is {number}, not a positive multiple of {unit}, so padded lengths miss the "
                    f"fp8 alignment. Use a multiple of {unit} (the default multiplier is 128).",
                )

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
            column=42,
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
            column=38,
            message="bucket #1 is 1024, not above the previous bucket 4096",
        ),
    ]
