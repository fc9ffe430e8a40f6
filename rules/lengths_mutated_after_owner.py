from __future__ import annotations

import libcst as cst

from layoutcheck.lint.flow import Frame
from layoutcheck.lint.flowrule import FlowRule
from layoutcheck.lint.nodes import last_name, root_name, same, snippet, string_key, string_value, target_name
from layoutcheck.lint.rule import Invalid, LintContext, Valid
from layoutcheck.lint.settings import LintSettings

_CONVERSIONS = frozenset({
    "list", "tuple", "torch.tensor", "torch.as_tensor", "torch.LongTensor", "torch.IntTensor",
    "numpy.array", "numpy.asarray", "torch.from_numpy",
})
_CONVERSION_METHODS = frozenset({"tolist", "to", "cuda", "cpu", "long", "int", "clone", "detach", "numpy"})


class LengthsMutatedAfterOwner(FlowRule):
    """Sample lengths rewritten after the owner derived padded lengths from them.

    ## What it does
    Flags code that rewrites the per-sample fields the owner derives padded
    lengths from (`owner-inputs`: by default `total_lengths` and `tokens`),
    in a function that does not write the source (`max_seq_lens`) again
    afterwards. Rewrites that count: storing one entry
    (`rollout_data["tokens"][i] = expanded`, `batch.tokens[i] = t`,
    `total_lengths[i] += n`), replacing a whole length field
    (`rollout_data["total_lengths"] = new`), and
    `rollout_data.update(total_lengths=...)`. Calling the owner, or a
    function named after the source (`recompute_max_seq_lens(...)`), counts
    as writing the source.

    Left alone: a bare `tokens[i] = ...` (lexers and tokenizers name their
    string lists so); the same field stored back converted
    (`torch.tensor(d["total_lengths"])`); writes into a container the
    function built itself (`batch = {}`), which build rather than rewrite;
    and every file that never uses padded lengths: the file must read or
    write a source, or call an owner, somewhere. A data generator or a
    tokenizer that never does rewrites lengths before any owner runs.

    ## Why it matters
    The owner computed each padded length `P` from the lengths it saw.
    Multimodal token expansion and similar rewrites change `T` afterwards,
    and nothing recomputes `P`: a sample can then be longer than its padded
    length (invariant G2), or carry far more padding than it needs (O3).

    ## Example
    ```python
    rollout_data["tokens"] = expanded_tokens
    rollout_data["total_lengths"] = expanded_total_lengths
    ```

    ## How to fix
    Rewrite the lengths before the owner runs, or write the source again in
    the same function (`layoutcheck.geometry.per_sample_padded_lengths`):
    ```python
    rollout_data["total_lengths"] = expanded_total_lengths
    rollout_data["max_seq_lens"] = [round_up(t, unit) for t in expanded_total_lengths]
    ```

    ## Configuration
    `owner-inputs` lists the fields; `sources` the padded lengths; `owners`
    the functions whose call recomputes them.

    ## Fix safety
    No autofix: the alignment unit is not known here.
    """

    code = "LC105"
    message = (
        "`rollout_data[\"total_lengths\"]` is rewritten but `max_seq_lens` is not written again "
        "afterwards. Recompute `max_seq_lens` from the new lengths here."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        # Entry stores `f[`, keyed stores `f"]`/`f']`, and `update(f=...)`...
        if not any(field + mark in source for field in settings.owner_inputs for mark in ("[", '"]', "']", "=")):
            return False
        # ...in a file that touches the source or calls an owner.
        owners = (e.rsplit(":", 1)[-1].rsplit(".", 1)[-1] for entries in settings.owners.values() for e in entries)
        return any(s in source for s in settings.sources) or any(o in source for o in owners)

    def __init__(self, context: LintContext) -> None:
        super().__init__(context)
        self._stale: list[cst.CSTNode] = []
        """Rewrites not followed by a write of the source, reported once the file is known to use it."""
        self._touches_source = False
        """Does the file read or write a source, or call an owner?"""

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.vocab.sources:
            self._touches_source = True

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if not self._touches_source and string_value(node) in self.vocab.sources:
            self._touches_source = True

    def _fresh(self, container: cst.BaseExpression) -> bool:
        root = root_name(container)
        return root is not None and root in self.flow.frame.fresh

    def _record(self, node: cst.CSTNode) -> None:
        self.flow.frame.state(self).append((node, self.flow.tick()))

    def _converted(self, value: cst.BaseExpression | None, target: cst.BaseExpression) -> bool:
        """Is ``value`` the field ``target`` itself, converted (``torch.tensor(d["total_lengths"])``)?"""
        while isinstance(value, cst.Call):
            func = value.func
            if isinstance(func, cst.Attribute) and func.attr.value in _CONVERSION_METHODS:
                value = func.value
            elif self.flow.imports.qualify(func) in _CONVERSIONS and len(value.args) >= 1:
                value = value.args[0].value
            else:
                return False
        return value is not None and same(value, target)

    def _store(self, target: cst.BaseExpression, value: cst.BaseExpression | None = None) -> None:
        if not isinstance(target, cst.Subscript):
            return
        inputs = self.vocab.owner_inputs
        key = string_key(target)
        if key is not None:
            # A whole token list is replaced by conversions too (`.cuda()` per
            # sample); only a whole *length* field says the lengths changed, and
            # not when it is the same field converted.
            if (
                key in inputs and not self.vocab.is_token(key) and not self._fresh(target.value)
                and not self._converted(value, target)
            ):
                self._record(target)
            return
        base = target.value
        if isinstance(base, cst.Attribute) and root_name(base) == "self":
            return  # an object's own cache (`self.total_lengths[i] = n`), not the rollout's
        name, _ = target_name(base)
        if name not in inputs or self._fresh(base):
            return
        # A bare `tokens[i] = ...` is as often a lexer's or tokenizer's list of strings;
        # a rollout's token list is reached through its container (`rollout_data["tokens"]`).
        if isinstance(base, cst.Name) and self.vocab.is_token(name):
            return
        self._record(target)

    def leave_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._store(target.target, node.value)
        super().leave_Assign(node)

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        self._store(node.target)
        super().leave_AugAssign(node)

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        func = node.func
        if last_name(func) != "update" or not isinstance(func, cst.Attribute) or self._fresh(func.value):
            return
        inputs = self.vocab.owner_inputs
        for arg in node.args:
            name = arg.keyword.value if arg.keyword is not None else None
            if isinstance(arg.value, cst.Dict):
                keys = [string_value(e.key) for e in arg.value.elements if isinstance(e, cst.DictElement)]
                name = next((k for k in keys if k in inputs), name)
            if name in inputs and not self.vocab.is_token(name):  # as for `d["tokens"] = ...`
                self._record(node)
                return

    def on_frame_exit(self, frame: Frame) -> None:
        rewrites = frame.data.pop(self, None)
        if frame.source_writes:
            self._touches_source = True  # written here, or an owner called
        if rewrites:
            last_write = max(frame.source_writes, default=-1)
            stale = [node for node, tick in rewrites if tick > last_write]
            if stale:
                self._stale.append(stale[0])
        if frame.parent is not None or not self._touches_source:
            return
        # The module is done: a file that never touches padded lengths (a data
        # generator, a tokenizer) rewrites lengths before any owner runs.
        source = self.vocab.source
        for node in self._stale:
            self.report(
                node,
                f"`{snippet(node)}` rewrites sample lengths, but `{source}` is not written again "
                f"afterwards. Recompute `{source}` from the new lengths here, or rewrite them before "
                "the owner runs.",
            )

    valid = [
        Valid(
            """
def expand(rollout_data, expanded_tokens, unit):
    rollout_data["tokens"] = expanded_tokens
    rollout_data["total_lengths"] = [len(t) for t in expanded_tokens]
    rollout_data["max_seq_lens"] = [-(-n // unit) * unit for n in rollout_data["total_lengths"]]
"""
        ),
        Valid(
            """
def process_rollout_data(samples):
    rollout_data = {}
    rollout_data["tokens"] = [s.tokens for s in samples]
    rollout_data["total_lengths"] = [len(s.tokens) for s in samples]
    return rollout_data
"""
        ),
        Valid(
            """
import torch

def to_device(rollout_data):
    rollout_data["tokens"] = [torch.tensor(t, device="cuda") for t in rollout_data["tokens"]]
"""
        ),
        Valid(
            """
def get_batch(data_iterator, keys):
    batch = data_iterator.get_next(keys)
    tokens = [t[:-1] for t in batch["tokens"]]
    batch["unconcat_tokens"] = tokens
    return batch
"""
        ),
        Valid(
            """
def expand(rollout_data, i, expanded):
    rollout_data["tokens"][i] = expanded
    rollout_data["total_lengths"][i] = expanded.numel()
    recompute_max_seq_lens(rollout_data)
"""
        ),
        Valid(
            """
def build(samples):
    total_lengths = [0] * len(samples)
    for i, s in enumerate(samples):
        total_lengths[i] = len(s)
    return total_lengths
"""
        ),
        Valid(
            """
def expand(rollout_data, expanded_lengths):
    rollout_data["total_lengths"] = expanded_lengths
    get_rollout_data(rollout_data)
""",
            settings={"owners": {"bshd": ("trainer.data:get_rollout_data",)}},
        ),
        Valid(
            """
def make_train_data(shard):
    # a test-data generator: no owner has run, and nothing here reads padded lengths
    train_data = load_shard(shard)
    train_data["total_lengths"] = [len(t) for t in train_data["tokens"]]
    return train_data
"""
        ),        Valid(
            """
import torch

def to_tensors(rollout_data):
    rollout_data["total_lengths"] = torch.tensor(rollout_data["total_lengths"]).cuda()
    return rollout_data["max_seq_lens"]
"""
        ),
    ]
    invalid = [
        Invalid(
            """
def get_rollout_data(rollout_data, unit):
    rollout_data["max_seq_lens"] = [-(-n // unit) * unit for n in rollout_data["total_lengths"]]
    return rollout_data


def expand_multimodal_rollout_data_in_place(rollout_data, expanded_tokens, expanded_total_lengths):
    rollout_data["tokens"] = expanded_tokens
    rollout_data["total_lengths"] = expanded_total_lengths
""",
            line=9,
            column=5,
            message="`rollout_data[\"total_lengths\"]` rewrites sample lengths",
        ),
        Invalid(
            """
from trainer.data import get_rollout_data

def train_step(args, rollout_data_ref, i, expanded):
    rollout_data = get_rollout_data(args, rollout_data_ref)
    rollout_data["tokens"][i] = expanded
""",
            line=6,
            column=5,
            settings={"owners": {"bshd": ("trainer.data:get_rollout_data",)}},
        ),
        Invalid(
            """
def expand(tokens, total_lengths, max_seq_lens, i, extra):
    total_lengths[i] += extra
    return tokens, total_lengths, max_seq_lens
""",
            line=3,
            column=5,
        ),
        Invalid(
            """
def expand(rollout_data, new_lengths):
    rollout_data.update(total_lengths=new_lengths)
    return rollout_data["max_seq_lens"]
""",
            line=3,
            column=5,
        ),
        Invalid(
            """
def get_rollout_data(rollout_data, unit):
    rollout_data["max_seq_lens"] = [-(-n // unit) * unit for n in rollout_data["total_lengths"]]
    rollout_data["total_lengths"] = [n + 1 for n in rollout_data["total_lengths"]]
""",
            line=4,
            column=5,
            message="is not written again afterwards",
        ),
    ]
