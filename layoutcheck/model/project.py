"""The project phase: every file's facts, joined into what the project has.

`Project` is built from the `FileFacts` of every file of a run (the checked
files and the project's other files) and answers what the rules ask:

* names: each module's name, its imports resolved (relative ones against
  its own package), and each call bound to the ``def`` it reaches when
  that ``def`` is in the tree (`Project.resolve`), which gives the call
  graph (`Project.callers`);
* what fields, parameters and values hold (`Project.spaces`,
  `layoutcheck.model.spaces`), the stores into fields with what the
  project's own functions return folded in (`Project.writes`), and the pads
  of each file, calls of the project's round-up helpers included
  (`Project.pads_of`);
* layout helpers (`layoutcheck.model.helpers`), owners
  (`layoutcheck.model.owners`) and the sides fields are padded on
  (`layoutcheck.model.sides`);
* tests and benchmarks (`test-paths`) are not the trainer: they are left
  out of the model unless trainer code imports them.

Each answer is one layer, a lower one never importing an upper one:
`ProjectGraph` (`layoutcheck.model.graph`: files, names, calls),
`ProjectValues` (`layoutcheck.model.values`: spaces, writes, pads),
`ProjectHelpers`, `ProjectOwners`, then `Project` (sides).

Nothing here parses: a one-file run builds its project from the facts the
cache (or a cheap scan) gives for the other files.
"""

from __future__ import annotations

from functools import cached_property

from layoutcheck.model.graph import FileModel, FunctionRef
from layoutcheck.model.headreach import HeadReach, left_rows_into_head_readers
from layoutcheck.model.helpers import HelperSignature
from layoutcheck.model.owners import Owner, ProjectOwners
from layoutcheck.model.reshiftflow import ReshiftedStore, reshifted_stores
from layoutcheck.model.sides import Sides

__all__ = ["FileModel", "FunctionRef", "HelperSignature", "Owner", "Project"]


class Project(ProjectOwners):
    """Every file's facts, joined; see the module docs for what it answers."""

    @cached_property
    def sides(self) -> Sides:
        """The sides fields are padded on, and where they disagree (`layoutcheck.model.sides`)."""
        return Sides(self)

    @cached_property
    def left_into_heads(self) -> list[HeadReach]:
        """Left-padding calls whose rows reach a head reader through calls in any module
        (`layoutcheck.model.headreach`)."""
        return left_rows_into_head_readers(self)

    @cached_property
    def reshifted(self) -> list[ReshiftedStore]:
        """Fields stored shifted and shifted again where a module importing the store's reads them
        (`layoutcheck.model.reshiftflow`)."""
        return reshifted_stores(self)
