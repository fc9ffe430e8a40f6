"""``[tool.layoutcheck]``: the configuration model and its errors.

Finding and reading the file is `layoutcheck.configfile` (re-exported here);
this module holds the pydantic models and turns validation failures into one
`ConfigError` with the dotted key, the offending value and the file, in the
shape pydantic-core uses ("N errors in FILE", then per error: where, what,
the value truncated and its type).

Relative paths in the table (``exclude``, ``per-file-ignores``, ``cache-dir``)
are relative to the folder of the file they are written in: the *root*.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from layoutcheck.configfile import (
    CONFIG_FILENAMES,
    DEFAULT_CACHE_DIR,
    TABLE,
    LoadedConfig,
    find_config_file,
    load_config,
    resolve_config,
)
from layoutcheck.errors import ConfigError
from layoutcheck.lint.settings import LintSettings, kebab

__all__ = [
    "CONFIG_FILENAMES",
    "TABLE",
    "DEFAULT_CACHE_DIR",
    "Config",
    "LoadedConfig",
    "RuntimeConfig",
    "find_config_file",
    "load_config",
    "resolve_config",
    "validate_table",
]


class RuntimeConfig(BaseModel):
    """``[tool.layoutcheck.runtime]``: the runtime half's settings (hooks by dotted path, mode).

    The runtime issue defines these fields. Until it does, the table accepts
    any keys and keeps them unvalidated (``extra="allow"``), so a project can
    already write it and ``layoutcheck check`` never fails on it. The linter
    reads nothing from it.
    """

    model_config = ConfigDict(
        alias_generator=kebab, populate_by_name=True, extra="allow", frozen=True
    )


class Config(LintSettings):
    """The whole ``[tool.layoutcheck]`` table: the rules' domain settings plus the engine's.

    Rule selectors (``select``, ``extend-select``, ``ignore``, ``per-file-ignores``)
    are codes (``LC101``), code prefixes (``LC1``), kebab-case names
    (``global-max-padding``) or ``ALL``; they are checked against the known
    rules when the rules are loaded (`layoutcheck.lint.selection`).
    """

    select: tuple[str, ...] | None = Field(
        default=None,
        description="Rules to enable; unset means every rule that is on by default.",
    )
    extend_select: tuple[str, ...] = Field(
        default=(), description="Rules to enable on top of `select` (or the defaults)."
    )
    ignore: tuple[str, ...] = Field(default=(), description="Rules to disable.")
    exclude: tuple[str, ...] = Field(
        default=(),
        description=(
            "Glob patterns of files and folders to skip, relative to this file's folder "
            "(gitignore-like: a pattern without `/` matches a name at any depth). Files "
            "named on the command line are always checked."
        ),
    )
    per_file_ignores: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        description="Glob pattern -> rules to disable in the files it matches.",
    )
    cache_dir: str | None = Field(
        default=None,
        description=f"Result cache folder; default `{DEFAULT_CACHE_DIR}` beside this file.",
    )
    runtime: RuntimeConfig = Field(
        default_factory=RuntimeConfig,
        description="Settings of the runtime checks (`[tool.layoutcheck.runtime]`).",
    )


# ---------------------------------------------------------------- errors


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


def _dotted(prefix: str, loc: Iterable[int | str]) -> str:
    """A pydantic location as a TOML key path: ``tool.layoutcheck.per-file-ignores."tests/*"[0]``."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = part if _BARE_KEY.match(part) else '"' + part.replace('"', '\\"') + '"'
        out = f"{out}.{text}" if out else text
    return out


def _truncate(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _valid_keys(model: type[BaseModel]) -> list[str]:
    return sorted(field.alias or name for name, field in model.model_fields.items())


def format_validation_error(exc: ValidationError, file: Path | None, prefix: str) -> ConfigError:
    """Turn pydantic's errors into one `ConfigError`: "N errors in FILE", then where / what / value."""
    errors = exc.errors(include_url=False)
    where = str(file) if file is not None else "the configuration"
    head = f"{len(errors)} error{'s' if len(errors) != 1 else ''} in {where}:"
    lines = [head]
    for error in errors:
        loc = tuple(error["loc"])
        key = _dotted(prefix, loc)
        value = error.get("input")
        what, hint = error["msg"], None
        if error["type"] == "extra_forbidden" and len(loc) == 1:
            valid = _valid_keys(Config)
            what = "Unknown key"
            close = difflib.get_close_matches(str(loc[0]), valid, n=1)
            if close:
                what += f"; did you mean `{close[0]}`?"
            hint = f"valid keys: {', '.join(valid)}"
        lines.append(f"  {key}")
        lines.append(f"    {what} [value: {_truncate(value)}, type: {type(value).__name__}]")
        if hint:
            lines.append(f"    {hint}")
    first = _dotted(prefix, tuple(errors[0]["loc"])) if errors else prefix
    return ConfigError("\n".join(lines), key=first, source=str(file) if file is not None else None)


def validate_table(table: Any, file: Path | None, prefix: str = TABLE) -> Config:
    """Validate a parsed ``[tool.layoutcheck]`` table; raise `ConfigError` naming key, value and file."""
    if not isinstance(table, Mapping):  # load_config checks this too; API callers may not
        raise ConfigError(
            f"{prefix or 'the configuration'} in {file} must be a table, "
            f"got {_truncate(table)} ({type(table).__name__})",
            key=prefix or None, source=str(file),
        )
    try:
        return Config.model_validate(dict(table))
    except ValidationError as exc:
        raise format_validation_error(exc, file, prefix) from None
