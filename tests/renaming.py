"""A consistent renamer for Python projects: every identifier the project defines gets a neutral name.

The rename invariance test (`tests/test_rename_invariance.py`) lints a
project and its renamed copy and compares the findings: a rule that needs a
particular name to fire finds nothing on the copy.

What is renamed, consistently across every file (one bijection for the
whole project, so code means exactly what it meant):

* names the project binds: functions, classes, parameters, locals, loop and
  comprehension targets, ``with ... as`` and ``except ... as`` names, import
  aliases (``import torch.nn.functional as F``: ``F``);
* attributes the project defines (assigned anywhere, ``self.x = ...``,
  dataclass fields, methods), wherever they are read;
* keyword arguments of calls to the project's own functions and classes, and
  of ``dict(...)`` / ``.update(...)`` when their keys are field names;
* field names: string constants used as subscript keys, dict-literal keys,
  ``.get``/``.pop``/``.setdefault`` keys or ``"k" in d`` tests, wherever the
  same string appears (``for key in ("a", "b")``); argparse options whose
  destination is renamed (``"--seq-len-buckets"``), and ``getattr`` names;
* module names: each module file of the project (not ``__init__``, not test
  files) and every import of it.

Methods' receivers are renamed too (``self`` and ``cls`` get neutral names like any
parameter): the linter must know a receiver by its place, the first parameter of a
``def`` in a class body, not by its spelling.

Left alone: builtins, dunder names, names imported from
outside the project (``torch``, ``F.pad``, ``pad_sequence``) and attributes
the project does not define (``.size``, ``.shape``, ``.append``), string values
that are not field names (``"thd"``), comments and docstrings. Line structure
is kept, so findings keep their lines.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

__all__ = ["Renaming", "rename_project"]

_KEEP = frozenset({"_", "__name__", "__file__", "__all__", "__init__", "__main__"})
_KEY_METHODS = frozenset({"get", "pop", "setdefault", "__getitem__", "__contains__"})
_ATTR_STRINGS = frozenset({"getattr", "setattr", "hasattr", "delattr"})


def _external_attributes() -> frozenset[str]:
    """Attribute names of the standard containers and of torch tensors: never renamed.

    A project attribute that shares one of these names (a dataclass field called
    `size`) cannot be renamed consistently without types, so it keeps its name.
    """
    names: set[str] = set()
    for kind in (list, dict, str, tuple, set, int, float, bytes, object):
        names |= set(dir(kind))
    try:
        import torch

        names |= set(dir(torch.Tensor))
        names |= {"grad", "device", "dtype", "data", "shape", "T", "mT"}
    except ImportError:  # pragma: no cover - torch is in the test extra
        pass
    return frozenset(names)


@dataclass
class Renaming:
    """The bijection, and what it was built from."""

    names: dict[str, str] = field(default_factory=dict)
    """Identifier -> neutral identifier (shared by names, attributes, keywords and field strings)."""
    modules: dict[str, str] = field(default_factory=dict)
    """Module file stem -> neutral stem."""
    attributes: set[str] = field(default_factory=set)
    """Attribute names the project defines (renamed where read)."""
    fields: set[str] = field(default_factory=set)
    """String constants used as field names."""
    callables: set[str] = field(default_factory=set)
    """Functions and classes the project defines (their keyword arguments are renamed)."""
    external: set[str] = field(default_factory=set)
    """Names bound by imports from outside the project (never renamed)."""
    values: set[str] = field(default_factory=set)
    """Strings compared for equality or used as defaults: values, never renamed."""
    external_aliases: set[str] = field(default_factory=set)
    """Aliases of outside modules (``F`` of ``import torch.nn.functional as F``): renamed, but the
    attributes read through them are the outside module's."""

    def new(self, name: str) -> str:
        found = self.names.get(name)
        if found is None:
            found = self.names[name] = f"n{len(self.names):04d}x"
        return found


def _is_test_file(path: Path) -> bool:
    parts = path.parts
    return (path.name.startswith("test_") or path.name.endswith("_test.py") or path.name == "conftest.py"
            or any(p in ("tests", "test", "testing", "benchmarks", "benchmark") for p in parts[:-1]))


def _renameable(name: str) -> bool:
    return (name not in _KEEP and not (name.startswith("__") and name.endswith("__"))
            and not keyword.iskeyword(name) and name not in dir(builtins))


class _Collector(cst.CSTVisitor):
    """Pass 1: what the project defines."""

    def __init__(self, renaming: Renaming, modules: set[str], packages: set[str]) -> None:
        self.r = renaming
        self.modules = modules
        self.packages = packages
        self.bound: set[str] = set()

    def _bind(self, node: cst.BaseExpression | None) -> None:
        if isinstance(node, cst.Name):
            self.bound.add(node.value)
        elif isinstance(node, (cst.Tuple, cst.List)):
            for element in node.elements:
                self._bind(element.value)
        elif isinstance(node, cst.StarredElement):
            self._bind(node.value)
        elif isinstance(node, cst.Attribute):
            self.r.attributes.add(node.attr.value)
        elif isinstance(node, cst.Subscript):
            self._key(node)

    def _key(self, node: cst.Subscript) -> None:
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            value = node.slice[0].slice.value
            if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
                self.r.fields.add(value.evaluated_value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.bound.add(node.name.value)
        self.r.callables.add(node.name.value)
        self.r.attributes.add(node.name.value)  # methods are read as attributes

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.bound.add(node.name.value)
        self.r.callables.add(node.name.value)
        for statement in node.body.body:  # dataclass fields and class attributes
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                        self.r.attributes.add(small.target.value)
                    elif isinstance(small, cst.Assign):
                        for target in small.targets:
                            if isinstance(target.target, cst.Name):
                                self.r.attributes.add(target.target.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind(target.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind(node.asname.name)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._bind(node.name.name)

    def visit_Global(self, node: cst.Global) -> None:
        for name in node.names:
            self.bound.add(name.name.value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self._key(node)

    def visit_Dict(self, node: cst.Dict) -> None:
        for element in node.elements:
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) and isinstance(
                element.key.evaluated_value, str
            ):
                self.r.fields.add(element.key.evaluated_value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "add_argument":
            # `parser.add_argument("--seq-len-buckets", ...)` defines the attribute `args.seq_len_buckets`.
            for arg in node.args:
                value = arg.value
                if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
                    text = value.evaluated_value
                    if text.startswith("--") and re.fullmatch(r"--[A-Za-z][\w-]*", text):
                        self.r.attributes.add(text[2:].replace("-", "_"))
        if isinstance(func, cst.Attribute) and func.attr.value in _KEY_METHODS and node.args:
            first = node.args[0].value
            if isinstance(first, cst.SimpleString) and node.args[0].keyword is None and isinstance(
                first.evaluated_value, str
            ):
                self.r.fields.add(first.evaluated_value)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if isinstance(node.left, cst.SimpleString) and isinstance(node.left.evaluated_value, str) and any(
            isinstance(t.operator, (cst.In, cst.NotIn)) for t in node.comparisons
        ):
            self.r.fields.add(node.left.evaluated_value)
        # A string compared for equality is a value (`qkv_format == "thd"`, an external API's enum),
        # whatever else it keys: it is never renamed.
        if any(isinstance(t.operator, (cst.Equal, cst.NotEqual)) for t in node.comparisons):
            for side in (node.left, *(t.comparator for t in node.comparisons)):
                if isinstance(side, cst.SimpleString) and isinstance(side.evaluated_value, str):
                    self.r.values.add(side.evaluated_value)

    def visit_Param(self, node: cst.Param) -> None:
        self.bound.add(node.name.value)
        if isinstance(node.default, cst.SimpleString) and isinstance(node.default.evaluated_value, str):
            self.r.values.add(node.default.evaluated_value)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            dotted = _dotted(alias.name)
            if alias.asname is not None:
                self.bound.add(alias.asname.name.value)  # type: ignore[union-attr]
                if not self._internal(dotted):
                    self.r.external_aliases.add(alias.asname.name.value)  # type: ignore[union-attr]
            elif not self._internal(dotted):
                self.r.external.add(dotted.split(".")[0])

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = _dotted(node.module) if node.module is not None else ""
        internal = bool(node.relative) or self._internal(module)
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = _dotted(alias.name)
            if alias.asname is not None:
                self.bound.add(alias.asname.name.value)  # type: ignore[union-attr]
                if not internal:
                    self.r.external_aliases.add(alias.asname.name.value)  # type: ignore[union-attr]
            elif not internal:
                self.r.external.add(name)

    def _internal(self, dotted: str) -> bool:
        head = dotted.split(".")[0]
        return head in self.modules or head in self.packages


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


class _Renamer(cst.CSTTransformer):
    """Pass 2: apply the bijection."""

    def __init__(self, r: Renaming, keep_attributes: frozenset[str]) -> None:
        self.r = r
        self.keep_attributes = keep_attributes
        self.attribute_names: list[int] = []
        self.skip: set[int] = set()
        """Name nodes already handled (attributes, keywords, import paths)."""
        self.docstrings: set[int] = set()

    # -- helpers --

    def _mapped(self, name: str) -> str | None:
        if name in self.r.external or not _renameable(name):
            return None
        return self.r.names.get(name)

    def _module(self, name: str) -> str:
        return self.r.modules.get(name, name)

    # -- docstrings are kept (they are not code) --

    def visit_Module(self, node: cst.Module) -> None:
        self._note_docstring(node.body)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if isinstance(node.body, cst.IndentedBlock):
            self._note_docstring(node.body.body)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if isinstance(node.body, cst.IndentedBlock):
            self._note_docstring(node.body.body)

    def _note_docstring(self, body: Iterable[cst.CSTNode]) -> None:
        for statement in body:
            if isinstance(statement, cst.SimpleStatementLine) and statement.body:
                expr = statement.body[0]
                if isinstance(expr, cst.Expr) and isinstance(expr.value, (cst.SimpleString, cst.ConcatenatedString)):
                    self.docstrings.add(id(expr.value))
            break

    # -- names --

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.skip.add(id(node.attr))

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        attr = original.attr.value
        root = original.value
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(root, cst.Name) and (root.value in self.r.external or root.value in self.r.external_aliases):
            return updated  # `torch.nn.functional.pad`: an external module's path
        if attr in self.r.attributes and attr not in self.keep_attributes:
            new = self._mapped(attr)
            if new is not None:
                return updated.with_changes(attr=cst.Name(new))
        return updated

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.skip.add(id(node.keyword))

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        func = original.func
        tail = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        rename_keywords = tail in self.r.callables or tail in ("dict", "update")
        args = []
        for original_arg, arg in zip(original.args, updated.args):
            if arg.keyword is not None and rename_keywords:
                name = arg.keyword.value
                if tail in ("dict", "update") and name not in self.r.fields and name not in self.r.names:
                    args.append(arg)
                    continue
                new = self._mapped(name)
                if new is not None:
                    arg = arg.with_changes(keyword=cst.Name(new))
            if tail in _ATTR_STRINGS and original_arg is original.args[1 if len(original.args) > 1 else 0]:
                value = arg.value
                if isinstance(value, cst.SimpleString) and len(original.args) > 1:
                    text = value.evaluated_value
                    new = self._mapped(text) if text in self.r.attributes else None
                    if new is not None:
                        arg = arg.with_changes(value=_string_like(value, new))
            args.append(arg)
        return updated.with_changes(args=args)

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        if id(original) in self.skip:
            return updated
        new = self._mapped(original.value)
        if new is None and original.value in self.r.modules and original.value not in self.r.names:
            new = self.r.modules[original.value]  # `from . import cp_utils` ... `cp_utils.helper(...)`
        return updated.with_changes(value=new) if new is not None else updated

    def leave_Param(self, original: cst.Param, updated: cst.Param) -> cst.Param:
        return updated

    # -- strings: field names and argparse options --

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.SimpleString:
        if id(original) in self.docstrings or original.prefix.lower().startswith(("b", "f")):
            return updated
        text = original.evaluated_value
        if not isinstance(text, str):
            return updated
        if text in self.r.fields and text.isidentifier() and text not in self.r.values:
            new = self._mapped(text) or (self.r.new(text) if _renameable(text) else None)
            if new is not None:
                return _string_like(original, new)
        if text.startswith("--") and re.fullmatch(r"--[A-Za-z][\w-]*", text):
            dest = text[2:].replace("-", "_")
            new = self._mapped(dest)
            if new is not None:
                return _string_like(original, "--" + new.replace("_", "-"))
        return updated

    # -- imports --

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        for part in _names_in(node.name):
            self.skip.add(id(part))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None:
            for part in _names_in(node.module):
                self.skip.add(id(part))

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        internal = bool(original.relative) or (
            original.module is not None and _dotted(original.module).split(".")[0] in self.r.modules
        )
        module = updated.module
        if module is not None:
            module = _rename_dotted(module, self.r.modules)
            internal = internal or _dotted(original.module).split(".")[0] in self._package_heads  # type: ignore[arg-type]
        names = updated.names
        if not isinstance(names, cst.ImportStar):
            new_names = []
            for alias in names:
                name = alias.name
                if internal and isinstance(name, cst.Name):
                    target = self.r.modules.get(name.value) or self._mapped(name.value)
                    if target is not None:
                        name = cst.Name(target)
                asname = alias.asname
                if asname is not None and isinstance(asname.name, cst.Name):
                    new = self._mapped(asname.name.value)
                    if new is not None:
                        asname = asname.with_changes(name=cst.Name(new))
                new_names.append(alias.with_changes(name=name, asname=asname))
            names = new_names
        return updated.with_changes(module=module, names=names)

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import:
        new_names = []
        for alias in updated.names:
            name = alias.name
            if _dotted(name).split(".")[0] in self._package_heads:
                name = _rename_dotted(name, self.r.modules)
            asname = alias.asname
            if asname is not None and isinstance(asname.name, cst.Name):
                new = self._mapped(asname.name.value)
                if new is not None:
                    asname = asname.with_changes(name=cst.Name(new))
            new_names.append(alias.with_changes(name=name, asname=asname))
        return updated.with_changes(names=new_names)

    _package_heads: frozenset[str] = frozenset()


def _string_like(original: cst.SimpleString, text: str) -> cst.SimpleString:
    quote = original.value[len(original.prefix):][0]
    return cst.SimpleString(f"{original.prefix}{quote}{text}{quote}")


def _names_in(node: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(node, cst.Name):
        return [node]
    if isinstance(node, cst.Attribute):
        return [*_names_in(node.value), node.attr]
    return []


def _rename_dotted(node: cst.BaseExpression, modules: dict[str, str]) -> cst.BaseExpression:
    if isinstance(node, cst.Name):
        return cst.Name(modules.get(node.value, node.value))
    if isinstance(node, cst.Attribute):
        return node.with_changes(value=_rename_dotted(node.value, modules),
                                 attr=cst.Name(modules.get(node.attr.value, node.attr.value)))
    return node


def rename_project(src: Path, dst: Path, *, rename_modules: bool = True) -> Renaming:
    """Write a consistently renamed copy of every ``.py`` file under ``src`` to ``dst``.

    Other files (``pyproject.toml``, data) are copied as they are. Returns the
    bijection used; test files keep their file names (``test-paths`` are paths).
    """
    files = sorted(p for p in src.rglob("*.py") if ".git" not in p.parts and p.is_file())
    trees: dict[Path, cst.Module] = {}
    for path in files:
        try:
            trees[path] = cst.parse_module(path.read_text(encoding="utf-8"))
        except (cst.ParserSyntaxError, UnicodeDecodeError):
            continue
    renaming = Renaming()
    stems = {p.stem for p in files if p.stem != "__init__"}
    packages = {p.parent.name for p in files if p.name == "__init__.py"} | {
        p.relative_to(src).parts[0] for p in files if len(p.relative_to(src).parts) > 1
    }
    collector = _Collector(renaming, stems, packages)
    for tree in trees.values():
        tree.visit(collector)
    renaming.fields -= renaming.values
    for name in sorted(collector.bound | renaming.attributes | {f for f in renaming.fields if f.isidentifier()}):
        if _renameable(name) and name not in renaming.external:
            renaming.new(name)
    if rename_modules:
        for path in files:
            if path.stem != "__init__" and not _is_test_file(path.relative_to(src)) and path.stem not in packages:
                renaming.modules.setdefault(path.stem, f"m{len(renaming.modules):03d}x")
    keep = _external_attributes()
    renamer = _Renamer(renaming, keep)
    renamer._package_heads = frozenset(packages)
    for path in src.rglob("*"):
        if not path.is_file() or ".git" in path.parts:
            continue
        rel = path.relative_to(src)
        if path.suffix == ".py" and path in trees:
            stem = renaming.modules.get(path.stem, path.stem)
            out = dst / rel.parent / f"{stem}.py"
            out.parent.mkdir(parents=True, exist_ok=True)
            renamer.skip.clear()
            renamer.docstrings.clear()
            out.write_text(trees[path].visit(renamer).code, encoding="utf-8")
        elif path.suffix == ".toml":
            # Configured names (`owners = { thd = ["pkg/mod.py:func"] }`) are the code's names too.
            out = dst / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(_rename_config(path.read_text(encoding="utf-8"), renaming), encoding="utf-8")
        else:
            out = dst / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(path.read_bytes())
    return renaming


def _rename_config(text: str, renaming: Renaming) -> str:
    """Module stems and identifiers inside the quoted strings of a TOML file, renamed."""

    def inside(match: re.Match[str]) -> str:
        body = match.group(2)
        parts = re.split(r"([/.:])", body)
        out = []
        for part in parts:
            if part.endswith(".py"):
                part = part  # handled with the stem below
            if part in renaming.modules:
                out.append(renaming.modules[part])
            elif part in renaming.names and _renameable(part):
                out.append(renaming.names[part])
            else:
                out.append(part)
        return match.group(1) + "".join(out) + match.group(1)

    return "\n".join(
        line if line.lstrip().startswith("#") else re.sub(r'(["\'])([^"\'\n]*)\1', inside, line)
        for line in text.split("\n")
    )
