from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries

_PRODUCER = '''
def get_rollout_data(args, rollout_data):
    unit = args.data_pad_size_multiplier
    rollout_data["max_seq_lens"] = [-(-t // unit) * unit for t in rollout_data["total_lengths"]]
    return rollout_data
'''
_BUILDER = '''
from mm_data import expand_multimodal_in_place


def get_batch(data_iterator, keys):
    batch = data_iterator.get_next(keys)
    expand_multimodal_in_place(batch)
    max_seqlen = batch["max_seq_lens"][0]
    return batch, max_seqlen
'''


class LengthsMutatedAfterOwner(ModelRule):
    """Sample lengths rewritten after the owner derived padded lengths from them.

    ## What it does
    Flags code that rewrites the per-sample fields the owner derives padded
    lengths from, after the owner ran, when nothing writes the padded
    lengths again afterwards. The fields are read from the owner itself:
    those its round-ups read (`total_lengths`), and the per-sample tensors
    those lengths were measured from (`tokens`, where the project stores
    `[t.size(0) for t in tokens]` as the lengths). Rewrites that count: storing one entry
    (`rollout_data["tokens"][i] = expanded`, `total_lengths[i] += n`),
    replacing a whole length field (`rollout_data["total_lengths"] = new`),
    and `rollout_data.update(total_lengths=...)`.

    "After the owner" follows the call graph across modules: the rewriting
    function reads the padded lengths itself, or a function calls it
    (directly or through others) after writing them or calling the owner, or
    while reading them (a batch builder that reads `max_seq_lens`). So a
    multimodal expansion in a module that never names them is found when the
    batch builder calls it. Calling the owner counts as writing them. A
    function no code in the project calls is judged by its module: it must
    read or write them somewhere.

    It also flags padding raised after a padded length was recorded: a
    round-up or pad amount that follows a store of a padded length into a
    field (`batch["padded_to_length"] = P`) in the same function, with no
    later store to that field: the record is stale. The pad must round what
    the record describes: the stored local itself (`P += -P % m`) or a
    measured size (`x.numel()`, `len(x)`, `x.shape[0]`). A pad of another
    quantity (a buffer budget scaled from `P`, a stream total taken as a
    parameter) leaves the record true.

    Left alone: a bare `tokens[i] = ...` (lexers and tokenizers name their
    string lists so); the same field stored back converted
    (`torch.tensor(d["total_lengths"])`); writes into a container the
    function built itself (`batch = {}`), which build rather than rewrite.

    ## Why it matters
    The owner computed each padded length `P` from the lengths it saw.
    Multimodal token expansion and similar rewrites change `T` afterwards,
    and nothing recomputes `P`: a sample can then be longer than its padded
    length (invariant G2), or carry far more padding than it needs (O3). A
    recorded padded length that a later step raises no longer describes the
    batch.

    ## Example
    ```python
    def expand_multimodal_rollout_data_in_place(rollout_data):  # called from get_batch
        rollout_data["tokens"] = expanded_tokens
        rollout_data["total_lengths"] = expanded_total_lengths
    ```

    ## How to fix
    Rewrite the lengths before the owner runs, or write the source again
    (`layoutcheck.geometry.per_sample_padded_lengths`):
    ```python
    rollout_data["total_lengths"] = expanded_total_lengths
    rollout_data["max_seq_lens"] = [round_up(t, unit) for t in expanded_total_lengths]
    ```
    For a stale record, store the final padded length after the last pad.

    ## Configuration
    None needed. `owner-inputs`, `sources` and `owners` are hints: fields the
    tree shows no owner reading, padded lengths it shows no writer of, owners
    defined outside it.

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
        # A keyed store (`d["k"] = ...`, `d["k"][i] = ...`), `update(...)`, or a pad after a record.
        return "] =" in source or "update(" in source or "%" in source or "//" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        source: str | None = None  # the field the messages name: the owners are found once one is reported
        for found in file.stale_rewrites():
            if source is None:
                source = self._padded_field(file)
            rewrite = found.rewrite
            if found.via is not None:
                caller, call = found.via
                when = (f"{file.label(caller)} calls `{file.function(found.function[1]).qualname}` at line "
                        f"{call.span[0]} of {file.project.files[caller[0]].display} after the owner ran")
            else:
                when = "this runs after the owner"
            yield self.report(
                rewrite.span,
                f"`{rewrite.text}` rewrites sample lengths, but `{source}` is not written again afterwards "
                f"({when}). Recompute `{source}` from the new lengths, or rewrite them before the owner runs.",
            )
        for pad, record in file.stale_records():
            yield self.report(
                pad.span,
                f"`{pad.text}` raises the padding after `{record.field}` recorded the padded length "
                f"(line {record.span[0]}), and `{record.field}` is not updated. Store the final padded length "
                "after the last pad.",
            )

    @staticmethod
    def _padded_field(file: FileQueries) -> str:
        """The field the owner writes each sample's padded length to (the configured source without one)."""
        project = file.project
        writers = project.source_writers()
        return (project.padded_field_of(writers[0]) if writers else None) or file.vocab.source

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
        ),
        Valid(
            """
import torch

def to_tensors(rollout_data):
    rollout_data["total_lengths"] = torch.tensor(rollout_data["total_lengths"]).cuda()
    return rollout_data["max_seq_lens"]
"""
        ),
        Valid(
            """
def expand_multimodal_in_place(rollout_data):
    # train_step runs this before the owner: the owner sees the new lengths
    rollout_data["total_lengths"] = [n + 1 for n in rollout_data["total_lengths"]]
""",
            path="mm_data.py",
            settings={"owners": {"bshd": ("data:get_rollout_data",)}},
            files={"data.py": _PRODUCER, "train.py": '''
from mm_data import expand_multimodal_in_place
from data import get_rollout_data


def train_step(args, rollout_ref):
    expand_multimodal_in_place(rollout_ref)
    return get_rollout_data(args, rollout_ref)
'''},
        ),
        Valid(
            """
import torch
import torch.nn.functional as F

def build_stream(tokens, tp_size, pad_multiplier, cp_size):
    unit = tp_size * pad_multiplier
    stream = torch.cat(tokens)
    extra = (-stream.size(0)) % (2 * cp_size)
    stream = F.pad(stream, (0, extra))
    padded_to_length = (stream.numel() + unit - 1) // unit * unit
    batch = {"tokens": F.pad(stream, (0, padded_to_length - stream.numel()))}
    batch["padded_to_length"] = padded_to_length
    return batch
"""
        ),
        Valid(
            """
def plan_buffers(counts, topk, capacity, align, state):
    # the record keeps the padded row count; the later pad rounds a budget derived from it
    rows = max(counts)
    rows += -rows % align
    state.padded_rows = rows
    budget = int(rows * topk * capacity)
    budget += -budget % align
    state.budget = budget
    return state
"""
        ),
        Valid(
            """
def pad_stream(batch, stream_length, unit):
    # `longest` records one sample's padded length; the stream total rounded later is another quantity
    lengths = [-(-n // unit) * unit for n in batch["lengths"]]
    longest = max(lengths)
    batch["longest"] = longest
    stream_length = (stream_length + unit - 1) // unit * unit
    return batch, stream_length
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
            settings={"owners": {"bshd": ("trainer.data:get_rollout_data",)}, "owner_inputs": ("tokens",)},
        ),
        Invalid(
            """
def expand(rollout_data, i, extra):
    rollout_data["total_lengths"][i] += extra
    return rollout_data["max_seq_lens"]
""",
            line=3,
            column=5,
            files={"data.py": _PRODUCER},
        ),
        Invalid(
            """
def expand(rollout_data, new_lengths):
    rollout_data.update(total_lengths=new_lengths)
    return rollout_data["max_seq_lens"]
""",
            line=3,
            column=5,
            files={"data.py": _PRODUCER},
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
        Invalid(
            """
def expand_multimodal_in_place(rollout_data):
    # never names the source: `get_batch` (data.py) calls it after the producer wrote it
    rollout_data["total_lengths"] = [n + 1 for n in rollout_data["total_lengths"]]
""",
            path="mm_data.py",
            line=4,
            column=5,
            message="`get_batch` (data.py:5) calls `expand_multimodal_in_place` at line 7 of data.py after the owner ran",
            files={"data.py": _BUILDER, "producer.py": _PRODUCER},
        ),
        Invalid(
            """
import torch
import torch.nn.functional as F

def build_stream(tokens, tp_size, pad_multiplier, cp_size):
    unit = tp_size * pad_multiplier
    stream = torch.cat(tokens)
    padded_to_length = (stream.numel() + unit - 1) // unit * unit
    batch = {"tokens": F.pad(stream, (0, padded_to_length - stream.numel()))}
    batch["padded_to_length"] = padded_to_length
    extra = (-batch["tokens"].size(0)) % (2 * cp_size)
    batch["tokens"] = F.pad(batch["tokens"], (0, extra))
    return batch
""",
            line=11,
            column=13,
            message="raises the padding after `padded_to_length` recorded the padded length (line 10)",
        ),
        Invalid(
            """
def pad_rows(rows, tp_size, cp_size, state):
    padded = rows + (-rows) % tp_size
    state.padded_rows = padded
    padded += (-padded) % (2 * cp_size)
    return padded
""",
            line=5,
            column=15,
            message="raises the padding after `padded_rows` recorded the padded length (line 4)",
        ),
    ]
