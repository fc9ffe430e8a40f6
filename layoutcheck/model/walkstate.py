"""What the per-file walk keeps for the function it is in, and the words it names spaces by.

Part of the per-file walk (`layoutcheck.model.extract`): `FunctionState` is
what one function collects while it is walked (the walk turns it into the
function's `Function` facts when the function ends, `DefinitionsMixin.finish`);
`space_word` names a value's most specific space for `layoutcheck model`.
"""

from __future__ import annotations

import ast

from layoutcheck.model.facts import Call, Pad
from layoutcheck.model.flow import CP, MAX, PACKED, PAD, SAMPLE, SEQ, STREAM, TOK, UNIT

__all__ = ["FunctionState", "space_word"]

_SPACE_WORDS: tuple[tuple[int, str], ...] = (
    (PAD, "padded length P"),
    (MAX, "one length for many samples (a maximum)"),
    (PACKED, "cumulative lengths (packed stream)"),
    (STREAM, "packed stream"),
    (SAMPLE, "one sample's tensor"),
    (TOK, "per-sample tensors"),
    (SEQ, "true length T"),
    (UNIT, "alignment unit"),
    (CP, "CP size or rank"),
)
"""How `layoutcheck model` names a space, most specific first."""


def space_word(tags: int) -> str | None:
    """The name `layoutcheck model` gives the most specific space in ``tags``."""
    for tag, word in _SPACE_WORDS:
        if tags & tag:
            return word
    return None


class FunctionState:
    """What one function collects while it is walked (becomes its `Function`)."""

    __slots__ = (
        "calls", "source_ticks", "none_checked", "refused", "returns", "guarded", "samples", "iterates", "aliases",
        "pads", "writes_source", "writes_packed", "reads_source", "reads_packed", "layout_params",
        "padded_params", "true_params", "rounds", "spaces", "guard_fields", "candidates", "positional", "reads",
        "returns_calls", "unit_names", "elements", "tuple_returns", "returns_params",
    )

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.source_ticks: list[int] = []
        self.none_checked: set[str] = set()
        self.refused: set[str] = set()
        self.returns = 0
        self.returns_calls: set[str] = set()
        self.returns_params: set[str] = set()
        # Per element of the tuple every `return` gives: (tags, calls); None before the first
        # return, False once a return gives something else (no summary by element).
        self.elements: list[tuple[int, frozenset[str], frozenset[str]]] | bool | None = None
        self.tuple_returns = False
        """A ``return`` gives a tuple as written (a projected one included, `calls.returned_tuple`)."""
        self.guarded: set[str | None] = set()
        self.samples: set[int] = set()
        self.iterates = False
        self.aliases: dict[str, str | None] = {}
        self.pads: list[tuple[Pad, ast.AST]] = []
        """Pads waiting for the function's end, with the node whose fate decides (`Sinks`)."""
        self.writes_source = False
        self.writes_packed = False
        self.reads_source = False
        self.reads_packed = False
        self.layout_params: set[str] = set()
        self.padded_params: set[str] = set()
        self.true_params: set[str] = set()
        self.rounds: tuple[int, int] | None = None
        self.spaces: dict[tuple[str, str], tuple[int, str]] = {}
        """``(subject, space) -> (line, why)``: the first line that showed it."""
        self.guard_fields: set[str] = set()
        self.candidates: list[tuple[int, ast.Call]] = []
        """Calls that may be the project's round-up helpers: their fate is read at the end."""
        self.positional: tuple[str, ...] = ()
        """The positional parameters, in order (for `rounds`)."""
        self.reads: set[str] = set()
        """Fields read by key (``d["k"]``) anywhere in the function."""
        self.unit_names: set[str] = set()
        """Names a pad's unit is read through (``unit`` of ``(unit - n % unit) % unit``)."""

    def note_space(self, subject: str, space: str | None, line: int, why: str) -> None:
        """Note that ``subject`` showed ``space`` at ``line`` (the first such line is kept; 64 at most)."""
        if space is not None and len(self.spaces) < 64:
            self.spaces.setdefault((subject, space), (line, why))

