"""The module-wide readers of the per-file walk, each run only where a module spells what it matches.

Part of the per-file walk (`layoutcheck.model.extract`): before the walk,
`read_module` runs the readers that look at the whole module at once
(`layoutcheck.model.records`, `pieceroll`, `reshift`, `counts`, `floors`,
`poswidth`, `stacked`, `sidedefault`, `spunit`) where the module's text holds
the words each needs (most modules hold none); the walk records each finding
when it finishes the function it is in.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from layoutcheck.model.counts import short_receives
from layoutcheck.model.floors import token_bounds_on_logit_offsets
from layoutcheck.model.pieceroll import rolled_pieces
from layoutcheck.model.poswidth import wide_positions_by_function
from layoutcheck.model.records import window_partners
from layoutcheck.model.reshift import ShiftSummary, reshifted_fields, shift_summaries
from layoutcheck.model.sidedefault import left_padded_into_head_readers
from layoutcheck.model.spunit import unaligned_packed_cuts
from layoutcheck.model.stacked import unstacked_row_lists
from layoutcheck.model.syntax import line_numbers

__all__ = ["read_module", "shifters_of_module"]

_WINDOW_STORE = re.compile(r":[^\]\n]*\]\s*=[^=]")
"""A store into a window ``buf[a : a + n] = ...`` (or ``buf[a:e] = ...``, the end in a local):
where `window_partners` can find something."""
_SHIFT_SPELLINGS = ("1:]", "1:,", ":-1]", ":-1,")
"""A slice dropping the first or the last position (``t[:, 1:]``, ``t[..., :-1]``, as formatters write
them): where a module can define a shifter (`shift_summaries`)."""
_RETURNED_SHIFT = re.compile(r"return[^\n]*(?:1:|-1\]|roll\()")
"""A function returning a shift (``return t[:, 1:]``): where `reshifted_fields` can find something."""


def _spells(*words: str) -> Callable[[str], bool]:
    """Does a text spell every word (``a|b``: either spelling, ``zip(`` or ``enumerate(`` for a pairing loop)?"""
    choices = [word.split("|") for word in words]
    return lambda text: all(any(word in text for word in choice) for choice in choices)


_ModuleReader = Callable[[ast.Module], "dict[ast.AST, list[tuple[ast.AST, str]]]"]
_MODULE_READERS: tuple[tuple[str, Callable[[str], object], _ModuleReader], ...] = (
    ("rolled_piece", _spells("roll("), rolled_pieces),
    ("reshifted_field", _RETURNED_SHIFT.search, reshifted_fields),
    ("short_receive", _spells("broadcast_object_list"), short_receives),
    ("token_bound_on_logits", _spells("min(", "max(", "- 1"), token_bounds_on_logit_offsets),
    ("wide_positions", _spells("arange("), wide_positions_by_function),
    ("unstacked_rows", _spells("zip(|enumerate(", "cat("), unstacked_row_lists),
    ("left_into_head", _spells("zip(|enumerate(", "pad(", " if "), left_padded_into_head_readers),
    ("cut_off_tp_unit", _spells("packed_seq_params=", "megatron.core"), unaligned_packed_cuts),
)
"""The module-wide readers, each with the clash kind it records and the text a module must hold for it
to find anything (most modules hold none): each returns its findings by function node."""


def read_module(tree: ast.Module, text: str) -> tuple[dict[str, frozenset[str]] | None,
                                                      dict[ast.AST, list[tuple[str, ast.AST, str]]]]:
    """What the module-wide readers find in ``tree`` (whose text is ``text``): the fields placed into
    windows their partners' lengths size (`records.window_partners`; None where the text holds no
    store into a window), and the clashes by function node, ``(kind, node, detail)``."""
    partners = None
    if "len(" in text and _WINDOW_STORE.search(text):
        partners = window_partners(tree)
    clashes: dict[ast.AST, list[tuple[str, ast.AST, str]]] = {}
    for kind, gate, reader in _MODULE_READERS:
        if gate(text):
            for function, found in reader(tree).items():
                clashes.setdefault(function, []).extend((kind, n, d) for n, d in found)
    return partners, clashes


def shifters_of_module(tree: ast.Module, text: str) -> tuple[ShiftSummary, ...]:
    """The module's functions that return a one-position shift of a parameter (`reshift.shift_summaries`),
    read only where the text spells such a slice (the functions spanning one of its lines)."""
    found: list[int] = []
    for spelling in _SHIFT_SPELLINGS:  # plain searches: a regex over every colon of a module costs more
        at = text.find(spelling)
        while at >= 0:
            found.append(at)
            at = text.find(spelling, at + 1)
    if not found:
        return ()
    return shift_summaries(tree, set(line_numbers(text, found)))
