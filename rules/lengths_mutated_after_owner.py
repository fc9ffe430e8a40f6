from __future__ import annotations

import libcst as cst

from layoutcheck.lint.flow import Frame, FlowRule
from layoutcheck.lint.patterns import last_name, root_name, snippet, string_key, string_value, target_name
from layoutcheck.lint.rule import Invalid, Valid
from layoutcheck.lint.settings import LintSettings


class LengthsMutatedAfterOwner(FlowRule):
    """Sample lengths rewritten after the owner derived padded lengths from them.

    ## What it does
    Flags code that rewrites the per-sample fields the owner derives padded
    lengths from (`owner-inputs`: by default `total_lengths` and `tokens`),
    in a function that does not write the source (`max_seq_lens`) again
    afterwards. Rewrites that count: storing one entry
    (`rollout_data["tokens"][i] = expanded`, `batch.tokens[i] = t`,
    `total_lengths[i] += n`; a bare `tokens[i] = ...` is left alone, as
    lexers and tokenizers name their string lists so),
    replacing a whole length field (`rollout_data["total_lengths"] = new`),
    and `rollout_data.update(total_lengths=...)`. Writing into a container
    the function built itself (`batch = {}`) is building, not rewriting;
    calling the owner, or a function named after the source
    (`recompute_max_seq_lens(...)`), counts as writing the source.

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
        # Entry stores `f[`, keyed stores `f"]`/`f']`, and `update(f=...)`.
        return any(
            field + mark in source for field in settings.owner_inputs for mark in ("[", '"]', "']", "=")
        )

    def _fresh(self, container: cst.BaseExpression) -> bool:
        root = root_name(container)
        return root is not None and root in self.flow.frame.fresh

    def _record(self, node: cst.CSTNode) -> None:
        self.flow.frame.state(self).append((node, self.flow.tick()))

    def _store(self, target: cst.BaseExpression) -> None:
        if not isinstance(target, cst.Subscript):
            return
        inputs = self.vocab.owner_inputs
        key = string_key(target)
        if key is not None:
            # A whole token list is replaced by conversions too (`.cuda()` per
            # sample); only a whole *length* field says the lengths changed.
            if key in inputs and not self.vocab.is_token(key) and not self._fresh(target.value):
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
            self._store(target.target)
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
        if not rewrites:
            return
        last_write = max(frame.source_writes, default=-1)
        stale = [node for node, tick in rewrites if tick > last_write]
        if stale:
            source = self.settings.sources[0] if self.settings.sources else "max_seq_lens"
            self.report(
                stale[0],
                f"`{snippet(stale[0])}` rewrites sample lengths, but `{source}` is not written again "
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
    ]
    invalid = [
        Invalid(
            """
def expand_multimodal_rollout_data_in_place(rollout_data, expanded_tokens, expanded_total_lengths):
    rollout_data["tokens"] = expanded_tokens
    rollout_data["total_lengths"] = expanded_total_lengths
""",
            line=4,
            column=5,
            message="`rollout_data[\"total_lengths\"]` rewrites sample lengths",
        ),
        Invalid(
            """
def expand_sample(rollout_data, i, expanded):
    rollout_data["tokens"][i] = expanded
""",
            line=3,
            column=5,
        ),
        Invalid(
            """
def expand(tokens, total_lengths, i, extra):
    total_lengths[i] += extra
""",
            line=3,
            column=5,
        ),
        Invalid(
            """
def expand(rollout_data, new_lengths):
    rollout_data.update(total_lengths=new_lengths)
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
