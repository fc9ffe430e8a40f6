from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from layoutcheck.lint.edits import UNSAFE, Edit, Fix
from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries
from layoutcheck.model.vocabulary import Tag

if TYPE_CHECKING:
    import libcst as cst

    from layoutcheck.lint.fixscope import Binding
    from layoutcheck.lint.fixsite import FixSite

_MAX, _SEQ, _PAD, _SRC = int(Tag.MAX), int(Tag.SEQ), int(Tag.PAD), int(Tag.SRC)
_WIDTH = 88
"""A rewritten comprehension longer than this (black's line length) is split over three lines."""
_FRESH = ("length", "total_length", "n_tokens", "sample_length")
"""Names for the comprehension's variable when the maximum's own generator gives none."""
_PURE_CALLS = frozenset({"max", "min", "len", "int", "abs", "sum", "round", "ceil", "numel", "size"})
"""Calls a deleted assignment may make: deleting them deletes no side effect."""


_PRODUCER = '''
def get_rollout_data(rollout_data, unit):
    rollout_data["max_seq_lens"] = [(t + unit - 1) // unit * unit for t in rollout_data["total_lengths"]]
    return rollout_data
'''
"""A producer elsewhere in the project: it writes each sample's padded length to `max_seq_lens`."""


def _tensor_rank(text: str) -> int:
    """How many dimensions the shape of a tensor fill (``torch.full(shape, v)``, ``x.new_full(shape, v)``)
    gives, read from the broadcast's text (the facts keep its text, not its tree); 1 when it is no tensor
    fill or the shape is cut off before a second dimension. The text is at most 48 characters: enough for
    ``torch.full((len(rows), width)`` and ``torch.full(size=(n, dim, ...``."""
    start = text.find("full(")
    if start < 0:
        return 1
    rest = text[start + len("full("):].lstrip()
    if rest.startswith("size="):
        rest = rest[len("size="):].lstrip()
    if not rest.startswith(("(", "[")):
        return 1
    depth, dims, pending = 0, 1, False
    for char in rest:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                break
        elif char == "," and depth == 1:
            pending = True
            continue
        if pending and depth >= 1 and not char.isspace() and char not in ")]":
            dims, pending = dims + 1, False
    return dims


class GlobalMaxPadding(ModelRule):
    """One padded length given to every sample: the rollout-global padding bug.

    ## What it does
    Flags one padded length given to every sample: a list (or tensor) that
    repeats one value, stored in the field that holds each sample's padded
    length (a field the project's owner writes rounded-up lengths into, as
    `max_seq_lens`, whatever it is called), or that repeats a maximum over
    lengths (rounded up or not) once per sample (`* len(xs)`, a walk over
    `xs`). Spellings: `[m] * n`, `[m for _ in xs]`, `torch.full((n,), m)`,
    `x.new_full(...)`, `dict.fromkeys(ks, m)`, `itertools.repeat(m, n)`,
    `torch.ones(n) * m`, directly or through a local. What is a length is
    read from the code: sizes of per-sample tensors, values fed to a
    cumulative sum or rounded up, a field written with them, the result of
    the project's own round-up helper.

    A maximum repeated over something that is not the samples (one
    `max_seqlen` per attention layer or head: the kernel's per-micro-batch
    scalar; one `all_gather` buffer per rank of `range(group.size())`, an
    argument-less `.size()` being a process group's, not a tensor's) is not
    per-sample padding and is left alone, and so is a placeholder filled in
    later (`[0] * n`). So is a rectangular batch filled with the pad value
    (`torch.full((len(rows), longest), pad_id)`: its rows share one width by
    definition), and a bound repeated once per row of a packed batch's
    cumulative lengths (`[bound] * len(cu_seqlens)`, each row of
    `cu_seqlens` grown by its own last entry plus a length: a varlen
    attention kernel's `max_seqlen` per packed row, kept the same over
    batches for CUDA graphs, which no sample is padded to).

    ## Why it matters
    Each sample's padded length `P` must be its own total length `T` rounded
    up to the alignment unit `A` (invariant O3: `T <= P < T + A`). A
    rollout-wide maximum copied to every entry makes one long outlier pad
    every short sample: on a 128-GPU run a 14,010-token sample was padded to
    132,096 tokens and ran out of memory at 79 GB; per-sample padding needed
    38.5 GB. Pad tokens still go through attention and the MoE experts.

    ## Example
    ```python
    max_seq_len = max(rollout_data["total_lengths"])
    max_seq_len = (max_seq_len + pad_size - 1) // pad_size * pad_size
    rollout_data["max_seq_lens"] = [max_seq_len] * len(rollout_data["tokens"])
    ```

    ## How to fix
    Round each sample's own length up (`layoutcheck.geometry.padded_length`
    is the reference):
    ```python
    rollout_data["max_seq_lens"] = [
        (t + pad_size - 1) // pad_size * pad_size for t in rollout_data["total_lengths"]
    ]
    ```
    A rectangular (BSHD) micro-batch then needs samples of one padded length:
    see `unguarded-rectangular-batch`. A batch-wide maximum that pads each
    micro-batch inside a loop (no per-sample list) is
    `max-wider-than-micro-batch`.

    ## Configuration
    None needed. `sources` and `length-names` are hints: a name listed there is
    taken to be per-sample padded lengths, or lengths, even where the tree
    shows no use that says so.

    ## Fix safety
    For `[m] * n`, `n * [m]` and `[m for _ in xs]`, the fix follows `m`
    back through the plain assignments of the enclosing function to one
    `max(lengths)` (or `max(f(x) for x in xs)`) and writes, for each sample,
    what that chain computes from the maximum:
    ```python
    rollout_data["max_seq_lens"] = [
        (length + pad_size - 1) // pad_size * pad_size for length in rollout_data["total_lengths"]
    ]
    ```
    (`list(lengths)` when nothing is done to the maximum). The assignments
    that fed only the broadcast are deleted (their own-line comments stay).
    There is no fix when the chain branches, a name it reads changes before
    the broadcast, it meets no maximum or two, or the broadcast is a tensor
    (`torch.full`, `new_full`) or `itertools.repeat`. The fix is unsafe: it
    changes the padded lengths (that is its point), the list now has one
    entry per length rather than per the count it repeated, and a
    rectangular (BSHD) micro-batch then needs samples of one padded length:
    `unguarded-rectangular-batch` fixes its consumers with a check.
    """

    code = "LC101"
    message = (
        "One padded length (`max(total_lengths)` rounded up) is copied to every sample's "
        "`max_seq_lens` entry. Round each sample's own total length up to the alignment unit instead."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        # A broadcast: `[v] * n`, a comprehension, `torch.full`, `fromkeys`, `repeat`.
        return any(mark in source for mark in ("] *", "*[", "* [", " for ", "full(", "fromkeys", "repeat("))

    def check(self, file: FileQueries) -> Iterator[Report]:
        if not file.facts.broadcasts:
            return  # the project's spaces are computed only for a file with something to ask
        spaces = file.project.spaces
        for found in file.facts.broadcasts:
            padded_field = found.target_kind in ("field", "keyword") and spaces.is_padded_field(found.target)
            if padded_field and found.placeholder:
                continue  # `[0] * n` filled per sample later
            if not padded_field and not found.count_per_sample:
                continue  # one value per layer or head, not per sample
            # What the value holds is resolved (every field's space) only for what is left.
            ref = file.ref(found.function)
            value = spaces.resolve(found.value_tags, found.value_fields, found.value_params, ref, calls=found.value_calls)
            if padded_field:
                if value & _SRC and not value & _MAX:
                    continue  # the owner's own value copied
            elif not (value & _MAX and value & (_SEQ | _PAD)):
                continue  # a configured length repeated, or one kernel scalar per layer or head
            if _tensor_rank(found.text) > 1:
                # `torch.full((rows, longest), pad_id)`: a rectangular batch filled with the pad value, whose
                # width is the longest row's; its rows share one width by definition, no sample gets a length.
                continue
            where = f"in `{found.target}`" if found.target_kind != "return" else "in the list it returns"
            yield self.report(
                found.span,
                f"`{found.text}` gives every sample the same length {where}, so one long "
                "sample pads them all. Round each sample's own total length up to the alignment unit instead.",
            )

    def fix(self, site: FixSite) -> Fix | None:
        """The broadcast rewritten per sample; see the docs' Fix safety."""
        import libcst as cst

        from layoutcheck.lint.fixscope import scope_of

        tree = site.tree
        node = site.node(cst.BinaryOperation, cst.ListComp)
        repeated = _repeated(node) if node is not None else None
        statement = tree.statement_of(node) if node is not None else None
        if repeated is None or statement is None:
            return None
        scope = scope_of(tree, node)
        inlined = scope.inline(repeated, statement, _is_max)
        if inlined is None:
            return None
        expr, chain = inlined
        per_sample = _per_sample(expr)
        if per_sample is None:
            return None
        element, target, iterable = per_sample
        if element == target:
            new = f"list({iterable})"
        else:
            new = f"[{element} for {target} in {iterable}]"
            start, end = tree.span(node)
            line_start, line_end = tree.line_start(start), tree.line_end(end)
            width = len(tree.source[line_start:start]) + len(new) + len(tree.source[end:line_end].rstrip("\r\n"))
            line = tree.source[line_start:start]
            indent = line[: len(line) - len(line.lstrip(" \t"))]  # of the line the broadcast starts on
            if width > _WIDTH:  # black's layout of a long comprehension
                newline = tree.newline()
                new = f"[{newline}{indent}    {element} for {target} in {iterable}{newline}{indent}]"
        edits = [tree.replace(node, new)]
        edits += _dead(site, node, chain)
        return Fix(tuple(edits), UNSAFE, "pad each sample to its own length")

    valid = [
        Valid(
            """
def pack_row(samples, unit, width):
    # a length bound in the loop body changes every step: one entry per sample, each its own
    row: list[int] = []
    seq_lens: list[int] = []
    for sample in samples:
        tokens = sample.token_ids[:-1]
        length = len(tokens)
        if unit:
            padded = (length + unit - 1) // unit * unit
            tokens = tokens + [0] * (padded - length)
            length = padded
        row.extend(tokens)
        seq_lens.append(length)
    return {"input_ids": row + [0] * (width - len(row)), "seq_lens": seq_lens}


def padding_share(rows, width):
    return 1 - sum(sum(row["seq_lens"]) for row in rows) / (len(rows) * width)
"""
        ),
        Valid(
            """
import torch
import torch.distributed as dist

def gather_lengths(lengths, group):
    # one receive buffer per rank, each sized to the largest rank's count: all_gather needs equal sizes
    count = torch.tensor([lengths.numel()])
    counts = [torch.zeros_like(count) for _ in range(group.size())]
    dist.all_gather(counts, count, group=group)
    widest = int(torch.cat(counts).max())
    padded = torch.cat([lengths, lengths.new_zeros(widest - lengths.numel())])
    gathered = [torch.empty_like(padded) for _ in range(group.size())]
    dist.all_gather(gathered, padded, group=group)
    return torch.cat([g[: int(c)] for g, c in zip(gathered, counts)])
"""
        ),
        Valid(
            """
def get_rollout_data(args, rollout_data, pad_size):
    rollout_data["max_seq_lens"] = [
        (t + pad_size - 1) // pad_size * pad_size for t in rollout_data["total_lengths"]
    ]
"""
        ),
        Valid(
            """
from layoutcheck.geometry import padded_length

def build(total_lengths, unit):
    return {"max_seq_lens": [padded_length(t, unit) for t in total_lengths]}
"""
        ),
        Valid(
            """
def build(tokens, unit):
    max_seq_lens = [0] * len(tokens)
    for i, t in enumerate(tokens):
        max_seq_lens[i] = -(-t.numel() // unit) * unit
    return max_seq_lens
"""
        ),
        Valid(
            """
def log_lengths(rollout_data, log):
    log["rollout/max_total_length"] = max(rollout_data["total_lengths"])
    log["rollout/mean_total_length"] = sum(rollout_data["total_lengths"]) / len(rollout_data["total_lengths"])
"""
        ),
        Valid(
            """
def capture_graph(runner, batch_size, max_seq_len):
    # CUDA-graph capture feeds dummy lengths: a configured length, not a maximum.
    seq_lens = [max_seq_len] * batch_size
    runner.capture(seq_lens=seq_lens)
"""
        ),
        Valid(
            """
def normalise(rewards):
    best = max(rewards)
    baselines = [best] * len(rewards)
    return [r - b for r, b in zip(rewards, baselines)]
"""
        ),
        Valid(
            """
import torch

def pad_tokens(tokens, pad_token_id, length):
    return torch.full((len(tokens), length), pad_token_id)
"""
        ),
        Valid(
            """
import torch

def collate(rows, pad_token_id):
    # a rectangular batch: one width, the longest row's, filled with the pad value
    longest = max(int(row.numel()) for row in rows)
    input_ids = torch.full((len(rows), longest), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), longest), dtype=torch.long)
    for i, row in enumerate(rows):
        input_ids[i, : row.numel()] = row
        attention_mask[i, : row.numel()] = 1
    return input_ids, attention_mask
"""
        ),
        Valid(
            """
def micro_batch(batch):
    max_seq_lens = list(batch["max_seq_lens"])
    return {"max_seq_lens": max_seq_lens}
"""
        ),
        Valid(
            """
def attention_metadata(cu_seqlens, seq_lens, num_layers):
    # the kernel's per-micro-batch scalar, one per layer: not a per-sample length
    max_seqlen = max(seq_lens)
    return {"cu_seqlens": cu_seqlens, "max_seqlens": [max_seqlen] * num_layers}
"""
        ),
        Valid(
            """
import torch

def collate(batch, metadata):
    # a varlen attention kernel's `max_seqlen`, one per packed row and the same for every batch
    # (CUDA graphs), stored with the rows' cumulative lengths: no sample is padded to it
    cu_seqlens = []
    for item in batch:
        cu_seqlens.append([0])
        for length in item["seq_boundaries"]:
            cu_seqlens[-1].append(cu_seqlens[-1][-1] + length)
    longest = max(p["dataset_max_seqlen"] for p in metadata)
    width = max(len(item["input_ids"]) for item in batch)
    bound = max(longest, width - min(p["min_packed_seqlen"] for p in metadata))
    max_seqlen = torch.IntTensor([bound] * len(cu_seqlens))
    return {"cu_seqlens_q": torch.IntTensor(cu_seqlens), "max_seqlen_q": max_seqlen}
""",
            files={
                "meta.py": '''
def pack_metadata(packs):
    return [{"dataset_max_seqlen": max(len(s) for s in pack), "min_packed_seqlen": sum(len(s) for s in pack)}
            for pack in packs]
''',
                "thd.py": '''
import torch
import torch.nn.functional as F

def thd_batch(tokens):
    lengths = torch.tensor([t.numel() for t in tokens])
    return {"input_ids": torch.cat(tokens), "cu_seqlens_q": F.pad(torch.cumsum(lengths, 0), (1, 0))}
''',
            },
        ),
        Valid(
            """
import torch

class Packer:
    def pad_rows(self, rows, width, fill):
        return [row + [fill] * (width - len(row)) for row in rows]

    def collate(self, batch, bound):
        # each packed row's offsets drop one token per sequence for the labels (`+ n - 1`, grouped either
        # way, is still a running sum, inline or first kept in a local); one kernel bound per packed row,
        # not a padded length per sample
        cu_q, cu_k = [], []
        for item in batch:
            cu_q.append([0])
            cu_k.append([0])
            for n in item["seq_lengths"]:
                cu_q[-1].append(cu_q[-1][-1] + n - 1)
                end = cu_k[-1][-1] + n - 1
                cu_k[-1].append(end)
        cu_q = torch.IntTensor(self.pad_rows(cu_q, max(len(r) for r in cu_q) + 1, -1))
        cu_k = torch.IntTensor(self.pad_rows(cu_k, max(len(r) for r in cu_k) + 1, -1))
        width = max(len(item["input_ids"]) for item in batch)
        return {"cu_seqlens_q": cu_q, "max_seqlen_q": torch.IntTensor([max(width, bound)] * len(cu_q)),
                "cu_seqlens_k": cu_k, "max_seqlen_k": torch.IntTensor([max(width, bound)] * len(cu_k))}
"""
        ),
    ]
    invalid = [
        Invalid(
            """
def get_rollout_data(args, rollout_data, pad_size):
    max_seq_len = max(rollout_data["total_lengths"])
    max_seq_len = (max_seq_len + pad_size - 1) // pad_size * pad_size
    rollout_data["max_seq_lens"] = [max_seq_len] * len(rollout_data["tokens"])
""",
            line=5,
            column=36,
            message="`[max_seq_len] * len(rollout_data[\"tokens\"])` gives every sample",
            replacement="""
def get_rollout_data(args, rollout_data, pad_size):
    rollout_data["max_seq_lens"] = [
        (length + pad_size - 1) // pad_size * pad_size for length in rollout_data["total_lengths"]
    ]
""",
            applicability="unsafe",
        ),
        Invalid(
            """
def get_rollout_data(rollout_data, unit):
    longest = max(len(t) for t in rollout_data["tokens"])
    padded = -(-longest // unit) * unit
    rollout_data["max_seq_lens"] = [padded for _ in rollout_data["tokens"]]
""",
            line=5,
            column=36,
            replacement="""
def get_rollout_data(rollout_data, unit):
    rollout_data["max_seq_lens"] = [
        -(-len(t) // unit) * unit for t in rollout_data["tokens"]
    ]
""",
            applicability="unsafe",
        ),
        Invalid(
            """
import torch

def make_batch(tokens):
    max_seq_lens = torch.full((len(tokens),), max(t.numel() for t in tokens))
    return tokens, max_seq_lens
""",
            line=5,
            column=20,
            message="in `max_seq_lens`",
        ),
        Invalid(
            """
from layoutcheck.geometry import round_up

def make_rollout(tokens, lengths):
    return {"tokens": tokens, "max_seq_lens": [round_up(max(lengths), 128)] * len(lengths)}
""",
            line=5,
            column=47,
            replacement="""
from layoutcheck.geometry import round_up

def make_rollout(tokens, lengths):
    return {"tokens": tokens, "max_seq_lens": [
        round_up(length, 128) for length in lengths
    ]}
""",
            applicability="unsafe",
        ),
        Invalid(
            """
def fill(batch):
    total_lengths = [t.numel() for t in batch["tokens"]]
    padded = [max(total_lengths)] * len(total_lengths)
    batch["max_seq_lens"] = padded
""",
            line=4,
            column=14,
            replacement="""
def fill(batch):
    total_lengths = [t.numel() for t in batch["tokens"]]
    padded = list(total_lengths)
    batch["max_seq_lens"] = padded
""",
            applicability="unsafe",
        ),
        Invalid(
            """
def fill(rollout_data, args):
    rollout_data.update(max_seq_lens=[args.seq_length] * len(rollout_data["tokens"]))
""",
            line=3,
            column=38,
            message="same length in `max_seq_lens`",
            files={"data.py": _PRODUCER},
        ),
        Invalid(
            """
import torch

def lengths_for_attention(total_lengths):
    cu_seqlens = torch.tensor([0] + total_lengths).cumsum(0)
    seq_lens = [max(total_lengths)] * len(total_lengths)
    return cu_seqlens, seq_lens
""",
            line=6,
            column=16,
            message="same length in `seq_lens`",
            replacement="""
import torch

def lengths_for_attention(total_lengths):
    cu_seqlens = torch.tensor([0] + total_lengths).cumsum(0)
    seq_lens = list(total_lengths)
    return cu_seqlens, seq_lens
""",
            applicability="unsafe",
        ),
        Invalid(
            """
import itertools

def uniform_max_seq_lens(tokens, unit):
    longest = max(len(t) for t in tokens)
    return list(itertools.repeat((longest + unit - 1) // unit * unit, len(tokens)))
""",
            line=6,
            column=12,
        ),
    ]


def _is_max(node: cst.CSTNode) -> bool:
    """``max(xs)`` / ``max(f(x) for x in xs)``: one positional argument, nothing else."""
    import libcst as cst

    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "max"
            and len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star)


def _repeated(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """The value a broadcast repeats: ``m`` of ``[m] * n``, ``n * [m]``, ``[m for _ in xs]``."""
    import libcst as cst

    from layoutcheck.lint.fixscope import names_in

    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        for side in (node.left, node.right):
            if isinstance(side, cst.List) and len(side.elements) == 1 and isinstance(side.elements[0], cst.Element):
                return side.elements[0].value
        return None
    if isinstance(node, cst.ListComp):
        comp = node.for_in
        if comp.inner_for_in is None and not comp.ifs and comp.asynchronous is None \
                and not names_in(comp.target) & names_in(node.elt):
            return node.elt
    return None


def _per_sample(expr: cst.BaseExpression) -> tuple[str, str, str] | None:
    """(element, variable, iterable) of the comprehension that computes ``expr`` per sample:
    the maximum in ``expr`` replaced by one sample's value."""
    import libcst as cst

    from layoutcheck.lint.fixscope import names_in, swap_nodes
    from layoutcheck.lint.walk import visit

    maxes: list[cst.Call] = []

    class _Maxes(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if _is_max(node):
                maxes.append(node)

    visit(expr, _Maxes())
    if not maxes or any(not m.deep_equals(maxes[0]) for m in maxes[1:]):
        return None
    module = cst.Module(body=[])
    argument = maxes[0].args[0].value
    comp = argument.for_in if isinstance(argument, (cst.GeneratorExp, cst.ListComp)) else None
    if comp is not None:
        if comp.inner_for_in is not None or comp.ifs or comp.asynchronous is not None:
            return None
        element: cst.BaseExpression = argument.elt  # type: ignore[union-attr]
        target = module.code_for_node(comp.target)
        iterable = comp.iter
        taken = names_in(comp.target)
    else:
        rest = names_in(expr)
        fresh = next((n for n in _FRESH if n not in rest), None)
        if fresh is None:
            return None
        element, target, iterable, taken = cst.Name(fresh), fresh, argument, {fresh}
    outside = names_in(swap_nodes(expr, maxes, cst.Name("_")))
    if taken & outside:
        return None  # the variable would capture a name the rest of the expression reads
    per_sample = swap_nodes(expr, maxes, element)
    return (module.code_for_node(_bare(per_sample)), target, module.code_for_node(_bare(iterable)))


def _bare(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[], rpar=[]) if getattr(node, "lpar", None) else node


def _dead(site: FixSite, node: cst.CSTNode, chain: list[Binding]) -> list[Edit]:
    """Deletions of the assignments in ``chain`` that nothing but the broadcast reads any more.

    An assignment stays when its name is read outside the broadcast and the
    deleted assignments, when the name is bound elsewhere too, or when its
    value calls something that may have an effect.
    """
    from layoutcheck.lint.fixscope import scope_of

    tree = site.tree
    scope = scope_of(tree, node)
    doomed = [b for b in chain if b.value is not None and _pure(b.value) and not any(
        other.node is not b.node and other.kind != "mutate" and not any(other.node is c.node for c in chain)
        for other in scope.of(b.name))]
    while doomed:
        reads = _reads(scope.owner, {b.name for b in doomed}, [node, *(b.node for b in doomed)])
        kept = [b for b in doomed if not reads[b.name]]
        if len(kept) == len(doomed):
            break
        doomed = kept  # a kept assignment's reads count now: look again
    edits = [tree.delete_statement(b.node) for b in doomed]  # type: ignore[arg-type]
    return [e for e in edits if e is not None]


def _reads(owner: cst.CSTNode, names: set[str], skipped: list[cst.CSTNode]) -> dict[str, int]:
    """How often ``owner`` reads each of ``names``, outside the ``skipped`` nodes."""
    import libcst as cst

    from layoutcheck.lint.walk import visit

    counts = dict.fromkeys(names, 0)

    class _Reads(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            if name.value in counts:
                counts[name.value] += 1

        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            visit(attribute.value, self)
            return False

        def on_visit(self, child: cst.CSTNode) -> bool:
            if any(child is s for s in skipped):
                return False
            return super().on_visit(child)

    visit(owner, _Reads())
    return counts


def _pure(value: cst.BaseExpression) -> bool:
    import libcst as cst

    from layoutcheck.lint.walk import visit

    pure = True

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            nonlocal pure
            func = call.func
            name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(
                func, cst.Attribute) else None
            if name not in _PURE_CALLS:
                pure = False

    visit(value, _Calls())
    return pure
