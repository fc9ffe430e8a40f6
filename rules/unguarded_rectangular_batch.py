from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class UnguardedRectangularBatch(ModelRule):
    """A BSHD micro-batch length taken from one sample, unchecked against the others.

    ## What it does
    Flags each read of one entry of the per-sample padded lengths
    (`max_seq_lens[0]`, `batch["max_seq_lens"][0]`, any constant index) as a
    micro-batch length, in a function with no check that the entries of
    that list agree. Only agreement checks count, in an `assert` or in an
    `if` that raises: `len(set(P)) == 1` (or `<= 1`), `min(P) == max(P)`,
    `all(p == P[0] for p in P)`, `P.count(P[0]) == len(P)`, or
    `len(P) == 1` / `len(tokens) == 1` (one sample per micro-batch); and a
    call to a function named `check_*`, `assert_*`, `validate_*`,
    `ensure_*` or `verify_*` given the list or the batch it came from. A
    bound (`max(P) <= args.seq_length`), a divisibility test
    (`all(p % 128 == 0 for p in P)`) or `len(P) >= 1` says nothing about
    agreement and does not count. Reads inside an `assert` or an `if` test
    are checks, not uses. An index that the function also uses on another
    per-sample length (`total_lengths[0]`), in a function that walks no
    per-sample list, names one sample rather than the micro-batch and is
    left alone.

    Every unguarded read is reported, so suppressing one (with a reason)
    does not hide the next.

    ## Why it matters
    With per-sample padding, a rectangular `[batch, seq, ...]` (BSHD)
    micro-batch is valid only when every sample in it has the same padded
    length `P` (invariant G1). Tensors sliced for CP when the rollout was
    built (log-probs) used each sample's own `P`; a batch built with the
    first sample's `P` disagrees with them, and tokens, log-probs and replay
    tensors are misaligned with no error.

    ## Example
    ```python
    if qkv_format == "bshd":
        max_seqlen = batch["max_seq_lens"][0]
        tokens = [slice_with_cp(t, pad_token_id, qkv_format, max_seqlen) for t in tokens]
    ```

    ## How to fix
    Fail closed before using the entry:
    ```python
    if len(set(batch["max_seq_lens"])) != 1:
        raise ValueError(f"BSHD micro-batch mixes padded lengths {batch['max_seq_lens']}")
    max_seqlen = batch["max_seq_lens"][0]
    ```
    and make micro-batches that satisfy it (one sample per micro-batch, or
    group samples by padded length, or use static buckets).

    ## Configuration
    `sources` names the per-sample padded lengths.

    ## Fix safety
    No autofix: adding a check changes behaviour (it raises), and which
    micro-batching is right is the caller's choice.
    """

    code = "LC103"
    message = (
        "`batch[\"max_seq_lens\"][0]` takes one sample's padded length for the whole micro-batch "
        "unchecked. Assert that all entries agree (`len(set(...)) == 1`) before using it."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return any(s in source for s in settings.sources)

    def check(self, file: FileQueries) -> Iterator[Report]:
        source = file.vocab.source
        for read in file.facts.entry_reads:
            function = file.function(read.function)
            guarded = set(function.guarded)
            container = read.container if read.container is not None else ""
            if container in guarded:
                continue
            if not function.iterates and read.index in function.sample_indices:
                continue  # one sample's own lengths, read together
            yield self.report(
                read.span,
                f"`{read.text}` takes one sample's padded length for the whole micro-batch, with no check "
                f"that all `{source}` entries agree. Assert `len(set(...)) == 1` first, or build "
                "one-sample micro-batches.",
            )

    valid = [
        Valid(
            """
def get_batch(batch, qkv_format):
    if qkv_format == "bshd":
        if len(set(batch["max_seq_lens"])) != 1:
            raise ValueError(f"mixed padded lengths {batch['max_seq_lens']}")
        max_seqlen = batch["max_seq_lens"][0]
        return max_seqlen
"""
        ),
        Valid(
            """
def get_batch(batch):
    max_seq_lens = batch["max_seq_lens"]
    assert all(p == max_seq_lens[0] for p in max_seq_lens), max_seq_lens
    return max_seq_lens[0]
"""
        ),
        Valid(
            """
def get_batch(batch):
    assert len(batch["tokens"]) == 1, "BSHD with per-sample padding needs one sample per micro-batch"
    return batch["max_seq_lens"][0]
"""
        ),
        Valid(
            """
from layoutcheck.runtime import check_micro_batch

def fill_replay_data(batch):
    check_micro_batch(batch)
    return batch["max_seq_lens"][0]
"""
        ),
        Valid(
            """
def consumer(batch):
    return [p for p in batch["max_seq_lens"]]
"""
        ),
        Valid(
            """
def slice_each(batch, tokens):
    return [t[: batch["max_seq_lens"][i]] for i, t in enumerate(tokens)]
"""
        ),
        Valid(
            """
def test_producer(rollout_data):
    assert rollout_data["max_seq_lens"][0] == 256
"""
        ),
        Valid(
            """
def build(cu_seqlens, shape):
    return cu_seqlens[0], shape[0]
"""
        ),
        Valid(
            """
def grow_first_sample(rollout_data, extra):
    # index 0 names one sample here: its own length and its own padded length
    total = rollout_data["total_lengths"][0]
    padded = rollout_data["max_seq_lens"][0]
    return min(extra, padded - total)
"""
        ),
        Valid(
            """
def fill_replay_data(batch, rows):
    lens = batch["max_seq_lens"]
    if lens.count(lens[0]) != len(lens):
        raise ValueError(f"mixed padded lengths {lens}")
    return [r[: batch["max_seq_lens"][0]] for r in rows]
"""
        ),
    ]
    invalid = [
        Invalid(
            """
def get_batch(data_iterator, keys, qkv_format="thd"):
    batch = data_iterator.get_next(keys)
    if qkv_format == "bshd":
        max_seqlen = batch["max_seq_lens"][0]
        return max_seqlen
""",
            line=5,
            column=22,
            message="`batch[\"max_seq_lens\"][0]` takes one sample's padded length",
        ),
        Invalid(
            """
def fill_replay_data(batch):
    assert max(len(t) for t in batch["tokens"]) <= batch["max_seq_lens"][0]
    return batch["max_seq_lens"][0]
""",
            line=4,
            column=12,
        ),
        Invalid(
            """
def build(max_seq_lens, tokens):
    P = max_seq_lens[0]
    return [t for t in tokens], P
""",
            line=3,
            column=9,
        ),
        Invalid(
            """
def build(self, micro_batch):
    return micro_batch.max_seq_lens[-1]
""",
            line=3,
            column=12,
        ),
        Invalid(
            """
def build(batch, log):
    lengths = batch["max_seq_lens"]
    log.info("batch of %d", len(lengths))
    return lengths[0]
""",
            line=5,
            column=12,
        ),        Invalid(
            """
def get_batch(batch):
    # every entry is aligned, but nothing says they agree
    assert all(p % 128 == 0 for p in batch["max_seq_lens"])
    return batch["max_seq_lens"][0]
""",
            line=5,
            column=12,
            message="with no check that all `max_seq_lens` entries agree",
        ),
        Invalid(
            """
def get_batch(batch, args):
    assert max(batch["max_seq_lens"]) <= args.seq_length
    first_total = batch["total_lengths"][0]
    max_seqlen = batch["max_seq_lens"][0]
    return [t[:max_seqlen] for t in batch["tokens"]], first_total
""",
            line=5,
            column=18,
        ),
        Invalid(
            """
def fill_replay_data(batch):
    assert len(batch["tokens"]) >= 1, "empty micro-batch"
    return batch["max_seq_lens"][0]
""",
            line=4,
            column=12,
        ),
    ]
