"""What the checker remembers of one rollout, from one producer call to the next: ints only.

The records never hold a tensor or the rollout dict (a check must not keep
training data alive): per-sample lengths, and per micro-batch ``k`` what the
batch builder and the replay filler did with it, so the two can be compared
whichever runs first (G5), and so a response-offset call can be attributed
to the sample it concerns (G4).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from layoutcheck import geometry
from layoutcheck.errors import LayoutError

__all__ = ["BatchRecord", "MicroBatch", "OffsetTarget", "ReplayRecord", "Rollout"]


@dataclass
class MicroBatch:
    """Micro-batch ``k`` as the rollout dict describes it (``None``: not known)."""

    k: int
    samples: list[int] | None = None
    lens: list[int] | None = None  # max_seq_lens (BSHD only)
    totals: list[int] | None = None
    responses: list[int] | None = None
    tokens: list[int] | None = None  # the current token counts (tokens[i].numel())

    @property
    def current(self) -> list[int] | None:
        """The lengths the layout must hold now: the token counts, else ``total_lengths``."""
        return self.tokens if self.tokens is not None else self.totals


@dataclass
class BatchRecord:
    """What the batch builder did for micro-batch ``k``."""

    k: int
    samples: list[int] | None
    qkv_format: str
    scheme: str
    padded: int | None
    rows: int | None
    totals: list[int] = field(default_factory=list)
    responses: list[int] = field(default_factory=list)
    offset_calls: int = 0
    cp_size: int | None = None
    cp_rank: int | None = None
    """The CP coordinates the builder ran with (``None``: not recorded)."""

    def next_sample(self) -> int | None:
        """The position of the sample the next offset call most likely concerns (``None``: no lengths).

        The loss side walks the samples in order, once per pass (log-probs,
        masks, redistribution...): the calls so far, modulo the samples.
        """
        n = min(len(self.totals), len(self.responses))
        return self.offset_calls % n if n else None

    def candidates(self, total: int, response: int) -> list[int]:
        """Positions in the micro-batch of the samples an offset call for ``(T, R)`` may concern.

        The sample `next_sample` names first, then any other sample with
        the same lengths; the call is counted.
        """
        j = self.next_sample()
        if j is None:
            return []
        self.offset_calls += 1
        pairs = list(zip(self.totals, self.responses))
        matches = [i for i, pair in enumerate(pairs) if pair == (total, response)]
        return sorted(matches, key=lambda i: i != j)


@dataclass
class ReplayRecord:
    """What the replay filler registered for micro-batch ``k``."""

    k: int
    key: str
    samples: list[int] | None
    padded: int | None
    rows: int | None  # the replay tensor's row count (never the tensor)
    tp_size: int
    sequence_parallel: bool
    where: str


@dataclass(frozen=True)
class OffsetTarget:
    """A sample an offset-helper call may concern, and the layout it was laid out with."""

    sample: int | None
    micro_batch: int | None
    qkv_format: str
    padded: int | None


@dataclass
class Rollout:
    """Checker state for one rollout."""

    index: int
    """The rollout's position in the run (0-based, in order of first sight)."""
    key: int | None = None
    """``id`` of the rollout dict (never the dict: records keep nothing alive)."""
    layout: str | None = None
    """The layout the producer's ``args`` (or the configuration) gave; ``None``: not known."""
    totals: list[int] | None = None
    responses: list[int] | None = None
    padded: list[int] | None = None
    buckets: tuple[int, ...] | None = None
    batches: dict[int, BatchRecord] = field(default_factory=dict)
    laid_out: dict[int, tuple[str, int | None, int]] = field(default_factory=dict)
    """Sample -> ``(qkv_format, P, k)`` as the batch builder last laid it out."""
    pending: dict[int, list[ReplayRecord]] = field(default_factory=dict)
    seen: set[tuple[object, ...]] = field(default_factory=set)
    """Violations already reported in this rollout."""
    checked: set[tuple[object, ...]] = field(default_factory=set)
    """Batches already judged in this rollout (the builder's inputs and what the batch read): a second pass is not re-judged."""
    judged: set[tuple[object, ...]] = field(default_factory=set)
    """Micro-batch ints already judged by G1, G2, G3 (all-gather) and G6, by the batch builder or the replay filler."""
    current: BatchRecord | None = None
    calls: int = 0

    def laid_out_by(self, record: BatchRecord) -> None:
        """Remember how micro-batch ``record.k`` laid out each of its samples."""
        self.batches[record.k] = record
        self.current = record
        for sample in record.samples or ():
            self.laid_out[sample] = (record.qkv_format, record.padded, record.k)

    def offset_targets(self, total: int, response: int) -> list[OffsetTarget]:
        """The samples an offset-helper call for ``(T, R)`` may concern, most likely first.

        The current micro-batch's samples with those lengths first (the loss
        side of a forward step); else the rollout's (a pass over the whole
        rollout, such as advantage normalisation), each with the layout the
        batch builder gave it or, before that, the producer's.
        """
        batch = self.current
        if batch is not None:
            hits = batch.candidates(total, response)
            if hits:
                samples = batch.samples
                return [
                    OffsetTarget(samples[i] if samples and i < len(samples) else None, batch.k, batch.qkv_format,
                                 batch.padded)
                    for i in hits
                ]
        if self.totals is None or self.responses is None:
            return []
        out = []
        for i, pair in enumerate(zip(self.totals, self.responses)):
            if pair != (total, response):
                continue
            if i in self.laid_out:
                fmt, padded, k = self.laid_out[i]
                out.append(OffsetTarget(i, k, fmt, padded))
            elif self.layout is not None:
                out.append(OffsetTarget(i, None, self.layout, self._own_padded(i) if self.layout == "bshd" else None))
        return out

    def _own_padded(self, i: int) -> int | None:
        # Before any batch: the sample's own P; under static buckets its own bucket, as O4 judges it
        if self.buckets is None:
            return self.padded[i] if self.padded is not None and i < len(self.padded) else None
        try:
            return geometry.resolve_bucket(self.totals[i], self.buckets) if self.totals is not None else None
        except LayoutError:
            return None
