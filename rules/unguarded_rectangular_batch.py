from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from layoutcheck.lint.flow import Frame, FlowRule
from layoutcheck.lint.patterns import (
    CHECK_PREFIXES,
    Tag,
    index_of,
    int_value,
    last_name,
    positional,
    root_name,
    snippet,
    walk,
)
from layoutcheck.lint.rule import Invalid, LintContext, Valid
from layoutcheck.lint.settings import LintSettings

_AGREEMENT_CALLS = frozenset({"set", "frozenset", "unique", "min", "max", "all", "any"})


@dataclass
class _State:
    uses: list[cst.Subscript] = field(default_factory=list)
    roots: set[str] = field(default_factory=set)
    """Containers the entries were read from (``batch`` of ``batch["max_seq_lens"][0]``)."""
    checked: set[str] = field(default_factory=set)
    """Containers handed to a check function (``check_uniform(batch)``)."""
    guarded: bool = False
    samples: set[int] = field(default_factory=set)
    """Constant indices also used on other per-sample lengths (``total_lengths[0]``): there the
    index names one sample, read coherently, not a batch length."""


class UnguardedRectangularBatch(FlowRule):
    """A BSHD micro-batch length taken from one sample, unchecked against the others.

    ## What it does
    Flags a micro-batch length taken from one entry of the per-sample padded
    lengths (`max_seq_lens[0]`, `batch["max_seq_lens"][0]`, any constant
    index) in a function with no check that all entries agree. Checks that
    count: an `assert`, or an `if` that raises, testing `len(set(P)) == 1`,
    `all(p == ... for p in P)`, `P.count(P[0]) == len(P)`, `min(P) == max(P)`
    or `len(P) == 1` (one sample per micro-batch); or a call to a function
    named `check_*`, `assert_*`, `validate_*`, `ensure_*` or `verify_*` given
    the list (or the batch it came from). Reads inside an `assert` or an `if`
    test are checks, not uses; an index that the function also uses on
    another per-sample length (`total_lengths[0]`) names one sample, not the
    micro-batch, and is left alone.

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

    def __init__(self, context: LintContext) -> None:
        super().__init__(context)
        self._in_test = 0
        """Inside an ``assert`` or an ``if`` test: reading an entry there is a check, not a use."""

    def _state(self) -> _State:
        return self.flow.frame.state(self, _State)

    def _is_list(self, node: cst.BaseExpression) -> bool:
        return self.flow.classify(node).has(Tag.SRCLIST)

    def _agreement(self, test: cst.BaseExpression) -> bool:
        """Does ``test`` compare the entries of a source list (or count the samples)?"""
        for node in walk(test):
            if not isinstance(node, cst.Call):
                continue
            tail = last_name(node.func)
            args = positional(node)
            if tail == "count" and isinstance(node.func, cst.Attribute) and self._is_list(node.func.value):
                return True
            if tail in _AGREEMENT_CALLS and args:
                first = args[0]
                if isinstance(first, (cst.GeneratorExp, cst.ListComp)):
                    first = first.for_in.iter
                if self._is_list(first):
                    return True
            if tail == "len" and args and any(int_value(n) == 1 for n in walk(test)):
                found = self.flow.classify(args[0])
                if found.has(Tag.SRCLIST) or found.has(Tag.TOK):
                    return True
        return False

    def visit_Assert(self, node: cst.Assert) -> None:
        self._in_test += 1
        if self._agreement(node.test):
            self._state().guarded = True

    def leave_Assert(self, node: cst.Assert) -> None:
        self._in_test -= 1

    def visit_If(self, node: cst.If) -> None:
        if self._agreement(node.test) and any(isinstance(n, cst.Raise) for n in walk(node.body)):
            self._state().guarded = True

    def visit_If_test(self, node: cst.If) -> None:
        self._in_test += 1

    def leave_If_test(self, node: cst.If) -> None:
        self._in_test -= 1

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        tail = last_name(node.func) or ""
        if tail.lstrip("_").startswith(CHECK_PREFIXES):
            state = self._state()
            for arg in node.args:
                if self._is_list(arg.value):
                    state.guarded = True
                elif (root := root_name(arg.value)) is not None:
                    state.checked.add(root)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        index = int_value(index_of(node))
        if self._in_test or index is None:
            return
        found = self.flow.classify(node.value)
        if not found.has(Tag.SRCLIST):
            if found.has(Tag.SEQ):
                self._state().samples.add(index)
            return
        state = self._state()
        state.uses.append(node)
        root = root_name(node.value)
        if root is not None:
            state.roots.add(root)

    def on_frame_exit(self, frame: Frame) -> None:
        state = frame.data.pop(self, None)
        if state is None or state.guarded or state.roots & state.checked:
            return
        uses = [u for u in state.uses if int_value(index_of(u)) not in state.samples]
        if not uses:
            return
        use = uses[0]  # one finding per function: one check fixes them all
        source = next((s for s in self.vocab.sources), "max_seq_lens")
        self.report(
            use,
            f"`{snippet(use)}` takes one sample's padded length for the whole micro-batch, with no check "
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
        ),
    ]
