from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from layoutcheck.lint.edits import UNSAFE, Fix
from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.facts import EntryRead
from layoutcheck.model.queries import FileQueries
from layoutcheck.model.vocabulary import Tag

_SRC, _SEQ = int(Tag.SRC), int(Tag.SEQ)


_PRODUCER = '''
def get_rollout_data(rollout_data, unit):
    rollout_data["max_seq_lens"] = [(t + unit - 1) // unit * unit for t in rollout_data["total_lengths"]]
    return rollout_data
'''
"""A producer elsewhere in the project: it writes each sample's padded length to `max_seq_lens`."""
_STEP = '''
from example import build


def step(rollout_data):
    return build(rollout_data["max_seq_lens"], rollout_data["tokens"])
'''

if TYPE_CHECKING:
    import libcst as cst

    from layoutcheck.lint.fixsite import FixSite


def _guarded(code: str, before: str, **fields: object) -> Invalid:
    """An example whose fix puts the check on `batch["max_seq_lens"]` above the line ``before`` (4 spaces in)."""
    check = (
        '    assert len(set(batch["max_seq_lens"])) == 1, (\n'
        '        f"rectangular micro-batch mixes padded lengths {batch[\'max_seq_lens\']} (`max_seq_lens`); "\n'
        '        "use one sample per micro-batch or group samples by padded length"\n'
        "    )\n"
    )
    line = f"    {before}\n"
    assert code.count(line) == 1, before
    return Invalid(code, replacement=code.replace(line, check + line), applicability="unsafe", **fields)  # type: ignore[arg-type]


class UnguardedRectangularBatch(ModelRule):
    """A BSHD micro-batch length taken from one sample, unchecked against the others.

    ## What it does
    Flags each read of one entry of the per-sample padded lengths (a field an
    owner writes each sample's rounded-up length into, or a parameter every
    caller passes one to: `batch["max_seq_lens"][0]`, `max_seq_lens[0]`,
    any constant index, whatever the names) as a micro-batch length, in a function with no check that the entries of
    that list agree. Only agreement checks count, in an `assert` or in an
    `if` that raises: `len(set(P)) == 1` (or `<= 1`), `min(P) == max(P)`,
    `all(p == P[0] for p in P)`, `P.count(P[0]) == len(P)`, or
    `len(P) == 1` / `len(tokens) == 1` (one sample per micro-batch); and a
    library check (`layoutcheck.runtime.check_micro_batch(batch)`) given the
    list or the batch it came from. A check covers the list it reads from
    that container, not the same field of another. A
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
    None needed; `sources` (a hint) names per-sample padded lengths the tree
    shows no writer of.

    ## Fix safety
    The fix inserts the fail-closed check right before the statement that
    reads the entry, in the same block (so under `if qkv_format == "bshd":`
    it runs only there), as the upstream fix wrote it:
    ```python
    assert len(set(batch["max_seq_lens"])) == 1, (
        f"rectangular micro-batch mixes padded lengths {batch['max_seq_lens']} (`max_seq_lens`); "
        "use one sample per micro-batch or group samples by padded length"
    )
    max_seqlen = batch["max_seq_lens"][0]
    ```
    One check per list and function: the next read of the same list is
    guarded by it. There is no fix when the list is not a plain name,
    attribute or subscript with literal keys (a call would run twice), when
    the read runs only on some paths of its statement (under `x if c else
    y`, `and`/`or`, a comprehension, an `elif` test), or when its statement
    does not start its line. The fix is unsafe: it can raise where the code
    ran before (that is its point), and `set()` compares tensor entries by
    identity, so a `max_seq_lens` held as a tensor needs `.tolist()` first;
    which micro-batching is right stays the caller's choice.
    """

    code = "LC103"
    message = (
        "`batch[\"max_seq_lens\"][0]` takes one sample's padded length for the whole micro-batch "
        "unchecked. Assert that all entries agree (`len(set(...)) == 1`) before using it."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "[0]" in source or "[-1]" in source or "[1]" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        spaces = file.project.spaces
        for read in file.facts.entry_reads:
            ref = file.ref(read.function)
            padded = [f for f in read.fields if spaces.is_padded_field(f)]
            by_param = [p for p in read.params if spaces.param(ref, p) & _SRC]
            if not (read.source or padded or by_param):
                continue
            function = file.function(read.function)
            container = read.container if read.container is not None else ""
            if container in function.guarded or any(
                f"{container}:{f}" in function.guard_fields for f in read.fields
            ) or any(f"param:{p}" in function.guard_fields for p in read.params):
                continue
            if not function.iterates and self._one_sample(file, read):
                continue  # one sample's own lengths, read together
            name = padded[0] if padded else read.params[0] if by_param else file.vocab.source
            yield self.report(
                read.span,
                f"`{read.text}` takes one sample's padded length for the whole micro-batch, with no check "
                f"that all `{name}` entries agree. Assert `len(set(...)) == 1` first, or build "
                "one-sample micro-batches.",
            )

    def fix(self, site: FixSite) -> Fix | None:
        """The agreement check inserted before the read; see the docs' Fix safety."""
        import libcst as cst

        tree = site.tree
        read = site.node(cst.Subscript)
        if read is None or not _plain(read.value):
            return None
        statement = tree.statement_of(read)
        if statement is None or isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return None
        conditional = _conditional()
        for parent in tree.ancestors(read):
            if parent is statement:
                break
            if isinstance(parent, conditional):
                return None  # the read may not run: a check before the statement would
        container = tree.text(read.value)
        quoted = _quoted_for_fstring(container) if "\n" not in container else None
        if quoted is None:
            return None
        lines = [
            f"assert len(set({container})) == 1, (",
            f'    f"rectangular micro-batch mixes padded lengths {{{quoted}}} (`{_field(read.value)}`); "',
            '    "use one sample per micro-batch or group samples by padded length"',
            ")",
        ]
        edit = tree.insert_lines_before(statement, lines)
        if edit is None:
            return None
        scope = tree.scope_node(read)
        return Fix((edit,), UNSAFE, f"assert that every `{container}` entry agrees",
                   isolation=("agreement", tree.span(scope)[0], container))

    @staticmethod
    def _one_sample(file: FileQueries, read: EntryRead) -> bool:
        """The same index read from a true-length list in the same function: it names one sample."""
        spaces = file.project.spaces
        if read.index in file.function(read.function).sample_indices:
            return True
        return any(
            other.function == read.function and other.index == read.index and other is not read
            and any(spaces.field(f) & _SEQ and not spaces.is_padded_field(f) for f in other.fields)
            for other in file.facts.entry_reads
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
""",
            files={"data.py": _PRODUCER},
        ),
        Valid(
            """
def get_batch(batch):
    max_seq_lens = batch["max_seq_lens"]
    assert all(p == max_seq_lens[0] for p in max_seq_lens), max_seq_lens
    return max_seq_lens[0]
""",
            files={"data.py": _PRODUCER},
        ),
        Valid(
            """
def get_batch(batch):
    assert len(batch["tokens"]) == 1, "BSHD with per-sample padding needs one sample per micro-batch"
    return batch["max_seq_lens"][0]
""",
            files={"data.py": _PRODUCER},
        ),
        Valid(
            """
from layoutcheck.runtime import check_micro_batch

def fill_replay_data(batch):
    check_micro_batch(batch)
    return batch["max_seq_lens"][0]
""",
            files={"data.py": _PRODUCER},
        ),
        Valid(
            """
def consumer(batch):
    return [p for p in batch["max_seq_lens"]]
""",
            files={"data.py": _PRODUCER},
        ),
        Valid(
            """
def slice_each(batch, tokens):
    return [t[: batch["max_seq_lens"][i]] for i, t in enumerate(tokens)]
""",
            files={"data.py": _PRODUCER},
        ),
        Valid(
            """
def test_producer(rollout_data):
    assert rollout_data["max_seq_lens"][0] == 256
""",
            files={"data.py": _PRODUCER},
        ),
        Valid(
            """
def build(cu_seqlens, shape):
    return cu_seqlens[0], shape[0]
""",
            files={"data.py": _PRODUCER},
        ),
        Valid(
            """
def grow_first_sample(rollout_data, extra):
    # index 0 names one sample here: its own length and its own padded length
    total = rollout_data["total_lengths"][0]
    padded = rollout_data["max_seq_lens"][0]
    return min(extra, padded - total)
""",
            files={"data.py": _PRODUCER},
        ),
        Valid(
            """
def fill_replay_data(batch, rows):
    lens = batch["max_seq_lens"]
    if lens.count(lens[0]) != len(lens):
        raise ValueError(f"mixed padded lengths {lens}")
    return [r[: batch["max_seq_lens"][0]] for r in rows]
""",
            files={"data.py": _PRODUCER},
        ),
    ]
    invalid = [
        Invalid(
            """
def get_batch(data_iterator, keys, qkv_format="thd"):
    batch = data_iterator.get_next(keys)
    if qkv_format == "bshd":
        # one padded length for the rectangular batch
        max_seqlen = batch["max_seq_lens"][0]
        return max_seqlen
""",
            line=6,
            column=22,
            files={"data.py": _PRODUCER},
            message="`batch[\"max_seq_lens\"][0]` takes one sample's padded length",
            replacement="""
def get_batch(data_iterator, keys, qkv_format="thd"):
    batch = data_iterator.get_next(keys)
    if qkv_format == "bshd":
        # one padded length for the rectangular batch
        assert len(set(batch["max_seq_lens"])) == 1, (
            f"rectangular micro-batch mixes padded lengths {batch['max_seq_lens']} (`max_seq_lens`); "
            "use one sample per micro-batch or group samples by padded length"
        )
        max_seqlen = batch["max_seq_lens"][0]
        return max_seqlen
""",
            applicability="unsafe",
        ),
        _guarded(
            """
def fill_replay_data(batch):
    assert max(len(t) for t in batch["tokens"]) <= batch["max_seq_lens"][0]
    return batch["max_seq_lens"][0]
""",
            'return batch["max_seq_lens"][0]',
            line=4,
            column=12,
            files={"data.py": _PRODUCER},
        ),
        Invalid(
            """
def build(max_seq_lens, tokens):
    P = max_seq_lens[0]
    return [t for t in tokens], P
""",
            line=3,
            column=9,
            replacement="""
def build(max_seq_lens, tokens):
    assert len(set(max_seq_lens)) == 1, (
        f"rectangular micro-batch mixes padded lengths {max_seq_lens} (`max_seq_lens`); "
        "use one sample per micro-batch or group samples by padded length"
    )
    P = max_seq_lens[0]
    return [t for t in tokens], P
""",
            applicability="unsafe",
            files={"data.py": _PRODUCER, "step.py": _STEP},
        ),
        Invalid(
            """
def build(self, micro_batch):
    return micro_batch.max_seq_lens[-1]
""",
            line=3,
            column=12,
            replacement="""
def build(self, micro_batch):
    assert len(set(micro_batch.max_seq_lens)) == 1, (
        f"rectangular micro-batch mixes padded lengths {micro_batch.max_seq_lens} (`max_seq_lens`); "
        "use one sample per micro-batch or group samples by padded length"
    )
    return micro_batch.max_seq_lens[-1]
""",
            applicability="unsafe",
            files={"data.py": _PRODUCER},
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
            replacement="""
def build(batch, log):
    lengths = batch["max_seq_lens"]
    log.info("batch of %d", len(lengths))
    assert len(set(lengths)) == 1, (
        f"rectangular micro-batch mixes padded lengths {lengths} (`lengths`); "
        "use one sample per micro-batch or group samples by padded length"
    )
    return lengths[0]
""",
            applicability="unsafe",
            files={"data.py": _PRODUCER},
        ),
        _guarded(
            """
def get_batch(batch):
    # every entry is aligned, but nothing says they agree
    assert all(p % 128 == 0 for p in batch["max_seq_lens"])
    return batch["max_seq_lens"][0]
""",
            'return batch["max_seq_lens"][0]',
            line=5,
            column=12,
            files={"data.py": _PRODUCER},
            message="with no check that all `max_seq_lens` entries agree",
        ),
        _guarded(
            """
def get_batch(batch, args):
    assert max(batch["max_seq_lens"]) <= args.seq_length
    first_total = batch["total_lengths"][0]
    max_seqlen = batch["max_seq_lens"][0]
    return [t[:max_seqlen] for t in batch["tokens"]], first_total
""",
            'max_seqlen = batch["max_seq_lens"][0]',
            line=5,
            column=18,
            files={"data.py": _PRODUCER},
        ),
        _guarded(
            """
def fill_replay_data(batch):
    assert len(batch["tokens"]) >= 1, "empty micro-batch"
    return batch["max_seq_lens"][0]
""",
            'return batch["max_seq_lens"][0]',
            line=4,
            column=12,
            files={"data.py": _PRODUCER},
        ),
        Invalid(
            """
def first_padded_length(batch):
    lengths = batch.get("max_seq_lens")
    return lengths[0] if lengths else None
""",
            line=4,
            column=12,
            files={"data.py": _PRODUCER},
        ),
    ]


def _conditional() -> tuple[type, ...]:
    """The node kinds under which part of a statement may not run: an `elif` test is under an `If`,
    the body of `if c: x` under its one-line suite."""
    import libcst as cst

    return (cst.IfExp, cst.BooleanOperation, cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp,
            cst.GeneratorExp, cst.If, cst.Else, cst.ExceptHandler, cst.Finally, cst.SimpleStatementSuite)


def _plain(node: cst.BaseExpression) -> bool:
    """A name, attribute or subscript with literal keys: reading it twice reads the same list."""
    import libcst as cst

    while True:
        if isinstance(node, cst.Name):
            return True
        if isinstance(node, cst.Attribute):
            node = node.value
        elif isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) \
                and isinstance(node.slice[0].slice.value, (cst.SimpleString, cst.Integer)):
            node = node.value
        else:
            return False


def _field(node: cst.BaseExpression) -> str:
    """What the message calls the list: its last key, attribute or name (`max_seq_lens`)."""
    import libcst as cst

    if isinstance(node, cst.Subscript):
        key = node.slice[0].slice.value  # type: ignore[attr-defined]
        if isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str):
            return key.evaluated_value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return "padded lengths"


def _quoted_for_fstring(text: str) -> str | None:
    """``text`` (a plain container expression) as it can sit inside ``f"..."`` on Python 3.10:
    its double-quoted keys requoted with single quotes; None when a key cannot be."""
    if '"""' in text or "'''" in text:
        return None
    out = []
    position = 0
    while position < len(text):
        char = text[position]
        if char == "'":
            end = text.index("'", position + 1)
            out.append(text[position:end + 1])
            position = end + 1
        elif char == '"':
            end = text.index('"', position + 1)
            body = text[position + 1:end]
            if "'" in body or "\\" in body:
                return None
            out.append(f"'{body}'")
            position = end + 1
        elif char in "{}\\":
            return None
        else:
            out.append(char)
            position += 1
    return "".join(out)
