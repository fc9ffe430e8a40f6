from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class ReceiveCountShort(ModelRule):
    """Receivers allocate a collective's list with a count that lacks a factor of the sender's.

    ## What it does
    Finds a list that a function hands to `dist.broadcast_object_list` and
    that an `if`/`else` stores in both branches: one builds it (the
    sender), the other allocates it (`[None] * n`, the receivers). Both
    counts are read as products and quotients of factors, from what the code
    does: `[x for x in xs for _ in range(k)]` and
    `sum([[x] * k for x in xs], [])` hold `len(xs) * k` entries, a list cut
    into chunks of `m` (`[xs[i:i + m] for i in range(0, len(xs), m)]`, or
    appended once per step of that loop) `len(xs) / m`; a list returned by a
    function of the module is counted there; locals are read through their
    assignment (`cfg = self.cfg`). Flagged, at the receivers' count: the
    two counts divide by the same attribute of one object (they count the
    same chunks) and the sender's multiplies by another attribute of that
    object that the receivers' does not. Names play no part.

    ## Why it matters
    `broadcast_object_list` fills a list of the same length on every rank.
    Receivers that allocate fewer entries than the sender sends disagree
    with it on how many micro-batches there are: the broadcast fails, or the
    receivers train on a truncated schedule while the sender trains on all
    of it, and the invariant X1 (ranks agree on the micro-batches and their
    samples) is broken (docs/design.md#layout-spaces-and-bug-classes, class 9;
    OpenRLHF/OpenRLHF cd30d81a: ring-attention receivers counted prompts,
    the sender prompts times samples per prompt).

    ## Example
    ```python
    if group_rank == 0:
        batches = self.generate(prompts)  # len(prompts) * cfg.samples_per_prompt // cfg.micro
        dist.broadcast_object_list(batches, src=src, group=group)
    else:
        batches = [None] * (cfg.prompts_per_step // replicas // cfg.micro)
        dist.broadcast_object_list(batches, src=src, group=group)
    ```

    ## How to fix
    Count what the sender makes:
    ```python
    batches = [None] * (cfg.prompts_per_step * cfg.samples_per_prompt // replicas // cfg.micro)
    ```

    ## Known problems
    Only lists the code counts in one module, and only a factor that the
    sender multiplies by and the receivers lack, read from the same object
    as a divisor both share; a count the sender takes from the data alone
    (`len(xs)`) is not compared with the receivers' configuration.

    ## Fix safety
    No autofix: the count is the author's.
    """

    code = "LC124"
    message = (
        "The receivers allocate `[None] * n` with a count that lacks `cfg.k`, a factor of the sender's count, so "
        "the ranks disagree on how many entries the broadcast carries. Count what the sender makes."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "broadcast_object_list" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind == "short_receive":
                yield self.report(
                    found.span,
                    f"the receivers allocate `{found.text}` entries, but the sender's list is also multiplied by "
                    f"`{found.detail}` (both counts divide by the same chunk size): the ranks disagree on how "
                    "many entries the broadcast carries. Count what the sender makes.",
                )

    valid = [
        Valid(
            """
import torch.distributed as dist

class Sharer:
    def __init__(self, cfg, group, rank, src):
        self.cfg, self.group, self.rank, self.src = cfg, group, rank, src

    def make(self, prompts):
        cfg = self.cfg
        items = [p for p in prompts for _ in range(cfg.copies)]
        return [items[i : i + cfg.micro] for i in range(0, len(items), cfg.micro)]

    def share(self, prompts, world):
        cfg = self.cfg
        if self.rank == 0:
            batches = self.make(prompts)
            dist.broadcast_object_list(batches, src=self.src, group=self.group)
        else:
            batches = [None] * (cfg.per_step * cfg.copies // world // cfg.micro)
            dist.broadcast_object_list(batches, src=self.src, group=self.group)
        return batches
"""
        ),
        Valid(
            """
import torch.distributed as dist

def share(cfg, prompts, rank, group):
    # the receivers' count uses another chunk size: nothing says both count the same chunks
    if rank == 0:
        batches = [prompts[i : i + cfg.micro] for i in range(0, len(prompts) * cfg.copies, cfg.micro)]
        dist.broadcast_object_list(batches, src=0, group=group)
    else:
        batches = [None] * (cfg.per_step // cfg.chunks)
        dist.broadcast_object_list(batches, src=0, group=group)
    return batches
"""
        ),
        Valid(
            """
import torch.distributed as dist

def share(cfg, items, rank, group):
    # both sides send one entry per item, counted alike
    if rank == 0:
        chunks = [items[i : i + cfg.micro] for i in range(0, len(items), cfg.micro)]
        dist.broadcast_object_list(chunks, src=0, group=group)
    else:
        chunks = [None] * (cfg.per_step // cfg.micro)
        dist.broadcast_object_list(chunks, src=0, group=group)
    return chunks
"""
        ),
        Valid(
            """
import torch.distributed as dist

def share(cfg, prompts, rank):
    # a filter in the sender's list: how many entries it holds is the data's, not the counts'
    if rank == 0:
        kept = [p for p in prompts for _ in range(cfg.copies) if p]
        batches = [kept[i : i + cfg.micro] for i in range(0, len(kept), cfg.micro)]
        dist.broadcast_object_list(batches, src=0)
    else:
        batches = [None] * (cfg.per_step // cfg.micro)
        dist.broadcast_object_list(batches, src=0)
    return batches
"""
        ),
        Valid(
            """
import torch.distributed as dist

def share(cfg, prompts, rank):
    # the receivers' count is a local that carries the factor
    per_step = cfg.per_step * cfg.copies
    if rank == 0:
        items = sum([[p] * cfg.copies for p in prompts], [])
        batches = [items[i : i + cfg.micro] for i in range(0, len(items), cfg.micro)]
        dist.broadcast_object_list(batches, src=0)
    else:
        batches = [None] * (per_step // cfg.micro)
        dist.broadcast_object_list(batches, src=0)
    return batches
"""
        ),
    ]
    invalid = [
        Invalid(
            """
import torch.distributed as dist

class Sharer:
    def __init__(self, cfg, group, rank, src):
        self.cfg, self.group, self.rank, self.src = cfg, group, rank, src

    def make(self, prompts):
        cfg = self.cfg
        items = [p for p in prompts for _ in range(cfg.copies)]
        return [items[i : i + cfg.micro] for i in range(0, len(items), cfg.micro)]

    def share(self, prompts, world):
        cfg = self.cfg
        if self.rank == 0:
            batches = self.make(prompts)
            dist.broadcast_object_list(batches, src=self.src, group=self.group)
        else:
            batches = [None] * (cfg.per_step // world // cfg.micro)
            dist.broadcast_object_list(batches, src=self.src, group=self.group)
        return batches
""",
            line=19,
            column=33,
            message="also multiplied by `self.cfg.copies`",
        ),
        Invalid(
            """
import torch.distributed as dist

class Maker:
    def __init__(self, opts):
        self.opts = opts

    def produce(self, prompts):
        opts = self.opts
        prompts = sum([[p] * opts.copies for p in prompts], [])
        out = []
        for i in range(0, len(prompts), opts.micro):
            out.append(prompts[i : i + opts.micro])
        return out

    def run(self, prompts, first):
        opts = self.opts
        if first:
            out = self.produce(prompts)
            dist.broadcast_object_list(out, src=0)
        else:
            out = [None] * (opts.batch // opts.micro)
            dist.broadcast_object_list(out, src=0)
        return out
""",
            line=22,
            column=29,
        ),
        Invalid(
            """
import torch.distributed as dist

def make(conf, prompts):
    expanded = [p for p in prompts for _ in range(conf.n)]
    return [expanded[i : i + conf.mb] for i in range(0, len(expanded), conf.mb)]

def exchange(conf, prompts, rank, world):
    if rank == 0:
        mbs = make(conf, prompts)
        dist.broadcast_object_list(mbs, src=0)
    else:
        mbs = [None] * (conf.total // world // conf.mb)
        dist.broadcast_object_list(mbs, src=0)
    return mbs
""",
            line=13,
            column=25,
            message="`conf.n`",
        ),
        Invalid(
            """
import torch.distributed as dist

def exchange(conf, prompts, rank):
    if rank != 0:
        mbs = [None] * (conf.total // conf.mb)
    else:
        mbs = [prompts[i : i + conf.mb] for i in range(0, len(prompts) * conf.n, conf.mb)]
    if rank != 0:
        dist.broadcast_object_list(mbs, src=0)
    return mbs
""",
        ),
    ]
