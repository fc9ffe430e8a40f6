"""Which local names stand for what an import bound: ``F`` for ``torch.nn.functional``.

Purely syntactic: a file's ``import`` statements are read as the traversal
meets them, so ``F.pad``, ``Fn.pad`` and a bare ``pad`` imported from
``torch.nn.functional`` all qualify to ``torch.nn.functional.pad``, and
``from .cp_utils import slice_with_cp`` makes ``slice_with_cp`` qualify to
``.cp_utils.slice_with_cp`` (the project phase resolves the leading dots
against the module's own name).
"""

from __future__ import annotations

import ast
import re

from layoutcheck.model.syntax import super_callee

__all__ = ["Imports", "scan_aliases", "scan_imports"]

_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]|import[ \t]+([\w., \t]+))", re.MULTILINE)


def scan_imports(source: str) -> tuple[str, ...]:
    """The modules a file imports from, by a text scan (no parse): for files the prefilter clears,
    whose imports still say which modules trainer code uses."""
    found: set[str] = set()
    for match in _IMPORT_LINE.finditer(source):
        if match.group(1) is not None:
            found.add(match.group(1))
        else:
            for part in match.group(2).split(","):
                name = part.strip().split()[0] if part.strip() else ""
                if name:
                    found.add(name)
    return tuple(sorted(found))


_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]*(\([^)]*\)|[^\n]*)", re.MULTILINE)
_ALIAS = re.compile(r"^(\w+)\s+as\s+(\w+)$")


def scan_aliases(source: str) -> tuple[tuple[str, str], ...]:
    """The names a file imports under another name (``from .gpu import attn_v2 as attn``), as local name ->
    qualified name like `Imports.aliases`, by a text scan: for files the prefilter clears, so that a
    package ``__init__`` that re-exports a ``def`` under another name still says which one
    (`layoutcheck.model.graph.ProjectGraph._reexported`). Names imported as they are need no entry: the
    project finds them in the modules the file imports from."""
    if " as " not in source:
        return ()
    found: dict[str, str] = {}
    for match in _FROM_IMPORT.finditer(source):
        for part in re.sub(r"#[^\n]*", "", match.group(2)).strip().strip("()").split(","):
            alias = _ALIAS.match(part.strip())
            if alias is not None and alias.group(1) != alias.group(2):
                module = match.group(1)
                found[alias.group(2)] = module + alias.group(1) if module.endswith(".") else f"{module}.{alias.group(1)}"
    return tuple(sorted(found.items()))


_UNSEEN = object()
"""What `Imports.qualify`'s memo holds for a node not asked about yet."""
# Conventional aliases, used when the file never binds the name (a star import,
# a notebook export): `F.pad` is torch's pad in every trainer we have read.
_CONVENTIONAL = {"F": "torch.nn.functional", "np": "numpy", "nn": "torch.nn"}


class Imports:
    """Local names bound by imports, in the order the file binds them."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.modules: set[str] = set()
        """Every module the file imports from (dotted, leading dots kept for relative ones)."""
        self._qualified: dict[ast.AST, str | None] = {}
        """`qualify`'s answers by node (the node itself the key: kept alive, its id never reused), until
        the next import changes what a name stands for."""

    def restore(self, aliases: tuple[tuple[str, str], ...], modules: tuple[str, ...]) -> None:
        """Stand as ``aliases`` (in the order the file bound them) and ``modules`` say: the imports after a
        function whose walk is reused (`layoutcheck.model.reuse`)."""
        if tuple(self.aliases.items()) == aliases and tuple(sorted(self.modules)) == modules:
            return
        self._qualified.clear()
        self.aliases.clear()
        self.aliases.update(aliases)
        self.modules.clear()
        self.modules.update(modules)

    def add(self, node: ast.Import | ast.ImportFrom) -> None:
        self._qualified.clear()
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.modules.add(alias.name)
                if alias.asname:
                    self.aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    self.aliases[top] = top
            return
        module = "." * node.level + (node.module or "")
        self.modules.add(module)
        for alias in node.names:
            if alias.name == "*":
                continue
            local = alias.asname or alias.name
            if module.endswith("."):
                self.aliases[local] = module + alias.name
            else:
                self.aliases[local] = f"{module}.{alias.name}" if module else alias.name

    def qualify(self, node: ast.AST) -> str | None:
        """``torch.nn.functional.pad`` for ``F.pad`` after ``import torch.nn.functional as F``."""
        kind = type(node)
        if kind is ast.Name:
            return self.aliases.get(node.id) or _CONVENTIONAL.get(node.id, node.id)  # type: ignore[attr-defined]
        if kind is not ast.Attribute:
            return None
        if type(node.value) is ast.Call:  # type: ignore[attr-defined]
            # `super().m`: spelt so that the project resolves it through the class's bases (a longer chain
            # through a call, `super().a.b`, names nothing)
            return super_callee(node)
        # A dotted name is asked about again and again (each call's callee, by several readers). A miss
        # is answered by `get`, not a `KeyError` caught (which costs several times a look-up, once per node).
        found = self._qualified.get(node, _UNSEEN)
        if found is not _UNSEEN:
            return found  # type: ignore[return-value]
        value = node.value  # type: ignore[attr-defined]
        base = None if type(value) is ast.Attribute and type(value.value) is ast.Call else self.qualify(value)
        found = self._qualified[node] = None if base is None else f"{base}.{node.attr}"  # type: ignore[attr-defined]
        return found
