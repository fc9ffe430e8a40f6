"""The function-level checks kept outside `layoutcheck.model.partners`, each with the words its
function must spell, as the per-file walk (`layoutcheck.model.extract`) runs them.

Each check reads one function's statements (`partners.Body`) and yields the node to flag and what
the rule's message needs; the walk records each as a clash of the kind named here.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from layoutcheck.model import encodings, flatcounts, gathered, layoutflag, slicepairs
from layoutcheck.model.partners import Body

__all__ = ["CHECKS"]

Check = Callable[[Body], Iterator[tuple[ast.AST, str]]]

CHECKS: tuple[tuple[str, Check, tuple[str, ...]], ...] = (
    ("misaligned_difference", slicepairs.misaligned_difference, slicepairs.SPELLINGS["misaligned_difference"]),
    ("start_from_own_width", slicepairs.start_from_own_width, slicepairs.SPELLINGS["start_from_own_width"]),
    ("padded_gather_cat", gathered.padded_gather_cat, gathered.SPELLINGS["padded_gather_cat"]),
    ("row_index_offsets", flatcounts.row_index_offsets, flatcounts.SPELLINGS["row_index_offsets"]),
    ("numel_as_length", flatcounts.numel_as_length, flatcounts.SPELLINGS["numel_as_length"]),
    ("fixed_axis_of_switched_layout", layoutflag.fixed_axis_of_switched_layout,
     layoutflag.SPELLINGS["fixed_axis_of_switched_layout"]),
    ("prefix_length_apart", encodings.prefix_length_apart, encodings.SPELLINGS["prefix_length_apart"]),
)
"""(clash kind, check, the words a function's text must spell for the check to find anything)."""
