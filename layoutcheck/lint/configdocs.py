"""The configuration as users read it: ``layoutcheck config`` and ``layoutcheck config --reference``.

Both are generated from the settings dataclasses (`layoutcheck.lint.settings`),
where every key's name, type, default and description is written once
(no lists kept by hand in several places); the docs' key reference
(``docs/configuration.md``) is generated from it when the site is built;
the ``runtime`` sub-table's keys come from the debug mode's
`layoutcheck.runtime.hooks.settings.RuntimeSettings` (`RUNTIME_KEY`), which the
linter never reads.

Values are shown as TOML (what the user writes) or JSON. Importing this
module costs neither pydantic nor libcst.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import sys
import typing
from collections.abc import Mapping
from typing import Any

from layoutcheck.lint.settings import CheckSettings, LintSettings, kebab
from layoutcheck.runtime.hooks.settings import RuntimeSettings

__all__ = [
    "RUNTIME_KEY",
    "Key",
    "keys",
    "render_reference",
    "render_resolved",
    "resolved_values",
    "toml_value",
    "type_words",
]

RUNTIME_KEY = "runtime"
"""The sub-table of the debug mode (`~layoutcheck.runtime.hooks.RuntimeSettings`); the linter reads nothing from it."""

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


@dataclasses.dataclass(frozen=True)
class Key:
    """One key of ``[tool.layoutcheck]``: its TOML name, type in words, default and description."""

    name: str
    """Kebab-case, as written in TOML."""
    field: str
    """The settings field (snake_case); empty for ``runtime``."""
    type: str
    default: Any
    description: str


# ---------------------------------------------------------------- types in words

_SCALARS = {
    "str": "string",
    "int": "integer",
    "bool": "boolean",
    "float": "number",
    "PositiveInt": "positive integer",
    "NonNegativeInt": "non-negative integer",
    "PositiveFloat": "positive number",
    "Any": "value",
}


class _UnknownType(ValueError):
    pass


def _plural(words: str) -> str:
    return words + "s" if words in _SCALARS.values() else f"({words})"


def _choices(values: typing.Iterable[object]) -> str:
    return "one of " + ", ".join(f"`{v}`" for v in values)


def _words(node: ast.expr, module: str) -> str:
    """An annotation's AST in the words of TOML: ``tuple[str, ...]`` -> ``array of strings``.

    Names that are not scalars are looked up in ``module`` (a ``Literal`` alias).
    """
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = [p for p in (node.left, node.right) if not (isinstance(p, ast.Constant) and p.value is None)]
        # `X | None`: optional, which the default ("not set") says.
        return " or ".join(_words(p, module) for p in parts)
    if isinstance(node, ast.Name):
        if node.id in _SCALARS:
            return _SCALARS[node.id]
        alias = getattr(sys.modules[module], node.id, None)
        if typing.get_origin(alias) is typing.Literal:
            return _choices(typing.get_args(alias))
        raise _UnknownType(node.id)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if node.value.id == "Literal" and all(isinstance(a, ast.Constant) for a in args):
            return _choices([a.value for a in args])  # type: ignore[attr-defined]
        if node.value.id == "tuple" and len(args) == 2 and isinstance(args[1], ast.Constant) \
                and args[1].value is Ellipsis:
            return f"array of {_plural(_words(args[0], module))}"
        if node.value.id == "dict" and len(args) == 2:
            return f"table ({_words(args[0], module)} → {_words(args[1], module)})"
    raise _UnknownType(ast.unparse(node))


def type_words(annotation: object, module: str = LintSettings.__module__) -> str:
    """A settings field's annotation (a string: the module postpones them) in TOML's words.

    An annotation these words do not cover is shown as written, in backticks.
    """
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
    try:
        return _words(ast.parse(text, mode="eval").body, module)
    except (SyntaxError, _UnknownType):
        return f"`{text}`"


# ---------------------------------------------------------------- the keys


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def keys() -> list[Key]:
    """Every key, in reference order: the engine's options, the rules' settings, then ``runtime.*``."""
    domain = {f.name for f in dataclasses.fields(LintSettings)}
    fields = dataclasses.fields(CheckSettings)
    ordered = [f for f in fields if f.name not in domain] + [f for f in fields if f.name in domain]
    out = [
        Key(kebab(f.name), f.name, type_words(f.type), _default(f), f.metadata.get("description", ""))
        for f in ordered
    ]
    out += [
        Key(f"{RUNTIME_KEY}.{kebab(f.name)}", "", type_words(f.type, RuntimeSettings.__module__), _default(f),
            f.metadata.get("description", ""))
        for f in dataclasses.fields(RuntimeSettings)
    ]
    return out


def runtime_values(runtime: RuntimeSettings) -> dict[str, Any]:
    """The debug mode's settings with the preset applied: the hooks that will be installed, per role."""
    out = {kebab(f.name): getattr(runtime, f.name) for f in dataclasses.fields(RuntimeSettings)}
    hooks: dict[str, list[str]] = {}
    for spec in runtime.hook_specs():
        hooks.setdefault(spec.role, []).append(spec.target)
    out["hooks"] = hooks
    out["parallel-state"] = runtime.parallel_state_target
    return out


# ---------------------------------------------------------------- TOML


def _toml_key(name: str) -> str:
    return name if _BARE_KEY.match(name) else json.dumps(name, ensure_ascii=False)


def toml_value(value: Any) -> str:
    """``value`` as an inline TOML value; None (no TOML spelling) is ``not set``."""
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{_toml_key(str(k))} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # a TOML date or time, say: shown as text


def _toml_table(values: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``values`` as TOML lines: plain keys first, then each sub-table under its header."""
    lines: list[str] = []
    tables = []
    for key, value in values.items():
        if isinstance(value, Mapping):
            tables.append((key, value))
        elif value is None:
            lines.append(f"# {key}: not set")
        else:
            lines.append(f"{_toml_key(key)} = {toml_value(value)}")
    for key, value in tables:
        dotted = f"{prefix}.{_toml_key(key)}" if prefix else _toml_key(key)
        body = _toml_table(value, dotted)
        # A table of tables needs no header of its own (TOML implies it), an empty one does.
        header = [] if value and all(isinstance(v, Mapping) for v in value.values()) else ["", f"[{dotted}]"]
        lines += [*header, *body]
    return lines


# ---------------------------------------------------------------- rendering


def _json_ready(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_reference(output_format: str = "text") -> str:
    """Every key: a markdown table (``text``; the docs' reference) or a JSON list."""
    entries = keys()
    if output_format == "json":
        records = [{"key": k.name, "type": k.type, "default": _json_ready(k.default),
                    "description": k.description} for k in entries]
        return json.dumps(records, indent=2, ensure_ascii=False)
    lines = ["| Key | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for k in entries:
        default = "not set" if k.default is None else f"`{toml_value(k.default)}`"
        lines.append(f"| `{k.name}` | {_cell(k.type)} | {_cell(default)} | {_cell(k.description)} |")
    return "\n".join(lines)


def resolved_values(settings: CheckSettings, runtime: RuntimeSettings | None = None) -> dict[str, Any]:
    """Every key with its value, in reference order; ``runtime`` with its preset applied (`runtime_values`)."""
    out = {k.name: getattr(settings, k.field) for k in keys() if k.field}
    out[RUNTIME_KEY] = runtime_values(runtime or RuntimeSettings())
    return out


def render_resolved(
    settings: CheckSettings,
    runtime: RuntimeSettings | None = None,
    *,
    source: str | None,
    table_name: str,
    root: str,
    path: str,
    output_format: str = "text",
) -> str:
    """The configuration in effect for ``path``: where it came from, then every key and value.

    ``source`` is the file the table was read from (None: no table, the
    defaults); ``table_name`` its header (``tool.layoutcheck``, or empty in a
    ``layoutcheck.toml``); ``root`` the folder relative paths are resolved
    against. ``text`` is TOML, as written in a ``layoutcheck.toml``.
    """
    values = resolved_values(settings, runtime)
    if output_format == "json":
        return json.dumps({
            "path": path,
            "file": source,
            "table": table_name if source is not None else None,
            "root": root,
            "settings": _json_ready(values),
        }, indent=2, ensure_ascii=False)
    head = [f"# layoutcheck configuration for {path}"]
    if source is None:
        head.append("# no [tool.layoutcheck] table: defaults")
    else:
        head += [f"# from {source}" + (f" [{table_name}]" if table_name else ""),
                 f"# relative paths are relative to {root}"]
    return "\n".join([*head, "", *_toml_table(values)])
