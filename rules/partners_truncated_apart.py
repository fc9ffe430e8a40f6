from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class PartnersTruncatedApart(ModelRule):
    """Partner lists grown together, then cut from opposite ends.

    ## What it does
    Learns which lists are partners from the code: lists one loop grows by
    one entry per token of the same piece (`ids.extend(turn)`,
    `targets.extend(turn_targets)`, `positions.extend(range(len(turn)))`).
    When, in one block, some of them are cut keeping their end
    (`ids = ids[-limit:]`) and others keeping their start
    (`positions = positions[:limit]`), the cuts keeping the end are
    flagged, naming the partners that keep their start.

    ## Why it matters
    Partners hold one entry per token, entry `i` of each describing token
    `i`. Cut from opposite ends, the tokens kept are the last `limit`
    while the positions (or segment boundaries, or masks) kept are the
    first `limit`: every token gets another token's position and the
    packed sample's boundaries no longer match its tokens, silently (the
    sample's `T` still agrees; docs/design.md#layout-spaces-and-bug-classes, class 7;
    NVIDIA/Megatron-LM 7952d7eff1 cut packed SFT tokens from the left and
    their positions from the right).

    ## Example
    ```python
    for turn_ids, turn_targets in turns:
        ids.extend(turn_ids)
        targets.extend(turn_targets)
        positions.extend(range(len(turn_ids)))
        if len(ids) > limit:
            ids = ids[-limit:]
            targets = targets[-limit:]
            positions = positions[:limit]
    ```

    ## How to fix
    Cut every partner from the same end: `ids[:limit]`, `targets[:limit]`,
    `positions[:limit]`.

    ## Known problems
    Only partners grown by `extend` in one loop, and cut by re-binding in
    that loop, are read. Cuts meet along one path: a cut inside a branch
    meets the cuts of the blocks around it (a side picked by `if` meets the
    partner's cut after the branch), never the other arm's; a switch set once
    (`left = True; if left: ...`) is read as its live arm.

    ## Fix safety
    No autofix: which end to keep is the trainer's choice.
    """

    code = "LC117"
    message = (
        "`ids[-limit:]` keeps the end of `ids`, but its partner `positions` keeps its start: the tokens and their "
        "positions no longer match. Cut every partner from the same end."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return ".extend(" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind != "truncated_apart":
                continue
            yield self.report(
                found.span,
                f"`{found.text}` keeps the end of a list grown with partners, but {found.detail} keep their start: "
                "entry `i` of one no longer describes token `i` of the other. Cut every partner from the same end.",
            )

    valid = [
        Valid(
            """
def pack(turns, limit):
    ids, targets, positions = [], [], []
    for turn_ids, turn_targets in turns:
        ids.extend(turn_ids)
        targets.extend(turn_targets)
        positions.extend(range(len(turn_ids)))
        if len(ids) > limit:
            ids = ids[:limit]
            targets = targets[:limit]
            positions = positions[:limit]
            break
    return ids, targets, positions
"""
        ),
        Valid(
            """
def recent(events, limit):
    # one list cut from its end: no partner keeps the other end
    kept, sizes = [], []
    for event in events:
        kept.extend(event.items)
        sizes.extend([len(event.items)])
    kept = kept[-limit:]
    return kept, sizes
"""
        ),
        Valid(
            """
def keep_recent(turns, limit):
    # every partner keeps its end: the last `limit` tokens with their own labels
    ids, labels = [], []
    for turn in turns:
        ids.extend(turn.ids)
        labels.extend(turn.labels)
        if len(ids) > limit:
            ids = ids[-limit:]
            labels = labels[-limit:]
    return ids, labels
"""
        ),
        Valid(
            """
def history_and_head(batches, limit):
    # grown in two loops, not together: not partners
    seen, heads = [], []
    for batch in batches:
        seen.extend(batch)
    for batch in batches:
        heads.extend(batch[:1])
    return seen[-limit:], heads[:limit]
"""
        ),
        Valid(
            """
def pack(turns, limit):
    ids, positions = [], []
    for turn in turns:
        ids.extend(turn)
        positions.extend(range(len(turn)))
    ids = ids[:limit]
    positions = positions[:limit]
    return ids, positions
"""
        ),
    ]
    invalid = [
        Invalid(
            """
def pack(turns, limit, pad):
    ids, targets, positions = [], [], []
    for turn_ids, turn_targets in turns:
        ids.extend(turn_ids)
        targets.extend(turn_targets)
        positions.extend(range(len(turn_ids)))
        if len(ids) > limit:
            keep_end = True
            if keep_end:  # the side picked by a branch: the cut on this path meets the partners' below
                ids = ids[-limit:]
            else:
                ids = ids[: limit - 1] + [pad]
            targets = targets[:limit]
            positions = positions[:limit]
            break
    return ids, targets, positions
""",
            line=11,
            column=23,
            message="`targets`, `positions` keep their start",
        ),
        Invalid(
            """
def pack(turns, limit):
    ids, targets, positions = [], [], []
    for turn_ids, turn_targets in turns:
        ids.extend(turn_ids)
        targets.extend(turn_targets)
        positions.extend(range(len(turn_ids)))
        if len(ids) > limit:
            ids = ids[-limit:]
            targets = targets[:limit]
            positions = positions[:limit]
            break
    return ids, targets, positions
""",
            line=9,
            column=19,
            message="`targets`, `positions` keep their start",
        ),
        Invalid(
            """
def window(chunks, limit):
    tokens, mask = [], []
    for chunk in chunks:
        tokens.extend(chunk.tokens)
        mask.extend(chunk.mask)
        if len(tokens) >= limit:
            mask = mask[:limit]
            tokens = tokens[-limit:]
    return tokens, mask
""",
            line=9,
            column=22,
        ),
        Invalid(
            """
def pack(samples, budget):
    ids, segs, pos = [], [], []
    for k, sample in enumerate(samples):
        ids.extend(sample)
        segs.extend([k] * len(sample))
        pos.extend(range(len(sample)))
        if len(ids) > budget:
            ids = ids[:budget]
            segs = segs[-budget:]
            pos = pos[:budget]
    return ids, segs, pos
""",
            line=10,
            column=20,
            message="`ids`, `pos` keep their start",
        ),
        Invalid(
            """
def fill(stream, seq_len):
    tokens, labels = [], []
    for doc in stream:
        tokens.extend(doc.tokens)
        labels.extend(doc.tokens[1:] + [-100])
        if len(tokens) >= seq_len:
            tokens = tokens[:seq_len]
            labels = labels[-seq_len:]
            break
    return tokens, labels
""",
            line=9,
            column=22,
        ),
    ]
