"""Which local names stand for ``torch.nn.functional`` & co: import alias tracking.

Purely syntactic: a file's ``import`` statements are read as the walk meets
them, so ``F.pad``, ``Fn.pad`` and a bare ``pad`` imported from
``torch.nn.functional`` all qualify to ``torch.nn.functional.pad``.
"""

from __future__ import annotations

import libcst as cst

__all__ = ["Imports"]

# Conventional aliases, used when the file never binds the name (a star import,
# a notebook export): `F.pad` is torch's pad in every trainer we have read.
_CONVENTIONAL = {"F": "torch.nn.functional", "np": "numpy", "nn": "torch.nn"}


class Imports:
    """Local names bound by imports, so ``F.pad``, ``Fn.pad`` and ``pad`` all read as torch's."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}

    @staticmethod
    def _dotted(node: cst.CSTNode) -> str:
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Attribute):
            return f"{Imports._dotted(node.value)}.{node.attr.value}"
        return ""

    def add_import(self, node: cst.Import) -> None:
        for alias in node.names:
            dotted = self._dotted(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.aliases[alias.asname.name.value] = dotted
            else:
                top = dotted.split(".")[0]
                self.aliases[top] = top

    def add_import_from(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        module = "." * len(node.relative) + (self._dotted(node.module) if node.module is not None else "")
        for alias in node.names:
            name = self._dotted(alias.name)
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.aliases[local] = f"{module}.{name}" if module else name

    def qualify(self, node: cst.CSTNode) -> str | None:
        """``torch.nn.functional.pad`` for ``F.pad`` after ``import torch.nn.functional as F``."""
        if isinstance(node, cst.Name):
            return self.aliases.get(node.value) or _CONVENTIONAL.get(node.value, node.value)
        if isinstance(node, cst.Attribute):
            base = self.qualify(node.value)
            return None if base is None else f"{base}.{node.attr.value}"
        return None

