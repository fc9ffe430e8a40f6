"""Where the configuration comes from: finding and reading the file, and its validated values.

The table lives in ``pyproject.toml`` (under ``[tool.layoutcheck]``) or in a
standalone ``layoutcheck.toml`` (whose top level is the table). Without
``--config FILE``, the nearest such file is found by walking up from the
common parent of the checked paths; a ``pyproject.toml`` without the table is
passed over, as ruff does. ``--config FILE`` is honoured wherever FILE is,
inside the linted tree or not (Fixit silently ignores a config outside it).
Relative paths in the table are relative to the folder of its file: the *root*.

This module imports no pydantic, and the linter gets its values through
`LoadedConfig.settings`, which avoids pydantic (about as costly to import as
the rest of a one-file run besides libcst) whenever it can:

* no table, or an empty one: the defaults, nothing to validate;
* a table validated by an earlier run: its validated values are stored in
  the cache folder, keyed by a hash of the table and layoutcheck's version
  (`layoutcheck.lint.cache.read_validated_config`), and read back as JSON;
* otherwise `layoutcheck.config` validates it (pydantic), and the values are
  stored for the next run. ``--no-cache`` always validates and stores nothing.

A run whose every file hits the result cache needs no values at all: a hit
means an earlier run validated this very table (its text is part of the
cache key).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import field
from layoutcheck.records import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layoutcheck.errors import ConfigError
from layoutcheck.lint.settings import DEFAULT_CACHE_DIR, TABLE, CheckSettings

if TYPE_CHECKING:
    from layoutcheck.config import Config
    from layoutcheck.lint.replay import InputLog
    from layoutcheck.runtime.hooks.settings import RuntimeSettings

__all__ = [
    "CONFIG_FILENAMES",
    "DEFAULT_CACHE_DIR",
    "TABLE",
    "LoadedConfig",
    "find_config_file",
    "load_config",
    "resolve_config",
]

CONFIG_FILENAMES: tuple[str, ...] = ("layoutcheck.toml", "pyproject.toml")
"""Looked for in each folder while walking up, in this order (as ruff prefers ``ruff.toml``)."""


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(eq=False)
class LoadedConfig:
    """A configuration table, where it came from, and (on first use) its validated model."""

    path: Path | None
    """The file it was read from; None for the built-in defaults."""
    root: Path
    """The folder relative paths in the table are resolved against."""
    table: Mapping[str, Any] = field(default_factory=dict)
    """The table as TOML gave it (kebab-case keys), not yet validated."""
    key_prefix: str = TABLE
    """How keys are spelled in messages: ``tool.layoutcheck`` in pyproject.toml, empty in layoutcheck.toml."""
    _config: Config | None = field(default=None, repr=False)
    _settings: CheckSettings | None = field(default=None, repr=False)

    @classmethod
    def of(cls, config: Config, root: Path, path: Path | None = None) -> LoadedConfig:
        """Wrap an already validated model (API callers and tests)."""
        table = config.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        return cls(path, root, table, TABLE, config)

    @property
    def config(self) -> Config:
        """The validated pydantic model (``runtime`` included); raises `ConfigError` naming key, value and file.

        Always imports pydantic: the linter reads `settings` instead.
        """
        if self._config is None:
            from layoutcheck.config import validate_table

            self._config = validate_table(self.table, self.path, self.key_prefix)
        return self._config

    def runtime_settings(self) -> tuple[RuntimeSettings, list[ConfigError]]:
        """The runtime table as the debug mode reads it, and the keys it left out as problems.

        See `layoutcheck.config.validate_runtime`: an unknown key, or a table
        the file cannot contain, is a problem (returned, naming the key and
        the file); any other error raises `ConfigError`. Imports pydantic.
        """
        from layoutcheck.config import validate_runtime

        return validate_runtime(self.table, self.path, self.key_prefix)

    def settings(self, *, use_cache: bool = True, store: bool = True) -> CheckSettings:
        """The validated values the linter reads; raises `ConfigError` like `config`.

        Validates (importing pydantic) only a non-empty table that no earlier
        run validated; with ``use_cache``, reads the validated values from
        `cache_dir` (see the module docs), and writes them there unless
        ``store`` is false (``layoutcheck config`` writes nothing into the project it describes).
        """
        if self._settings is not None:
            return self._settings
        if self._config is not None:
            self._settings = self._config.settings()
        elif not self.table:
            self._settings = CheckSettings()
        else:
            from layoutcheck.lint.cache import read_validated_config, write_validated_config

            key = _validation_key(self.table)
            if use_cache:
                self._settings = read_validated_config(self.cache_dir, key)
            if self._settings is None:
                self._settings = self.config.settings()
                if use_cache and store:
                    write_validated_config(self.cache_dir, key, self._settings)
        return self._settings

    def describe(self, key: str) -> str:
        """``tool.layoutcheck.select in /x/pyproject.toml``: a key and its file, for messages."""
        dotted = f"{self.key_prefix}.{key}" if self.key_prefix else key
        return f"{dotted} in {self.path}" if self.path is not None else f"{dotted} (default)"

    def _raw(self, key: str) -> Any:
        for spelling in (key, key.replace("-", "_")):
            if spelling in self.table:
                return self.table[spelling]
        return None

    @property
    def cache_dir(self) -> Path:
        """The cache folder: ``cache-dir`` resolved against the root (default beside the config)."""
        value = self._raw("cache-dir")
        if value is not None and not isinstance(value, str):
            value = self.config.cache_dir  # raises the proper error
        if value is None:
            return self.root / DEFAULT_CACHE_DIR
        path = Path(value).expanduser()
        return path if path.is_absolute() else self.root / path

    @property
    def exclude(self) -> tuple[str, ...]:
        """The ``exclude`` globs (validated through the model unless plainly a list of strings)."""
        value = self._raw("exclude")
        if value is None:
            return ()
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        return self.config.exclude  # raises the proper error

    @property
    def respect_gitignore(self) -> bool:
        """The ``respect-gitignore`` switch (validated through the model unless plainly a boolean)."""
        value = self._raw("respect-gitignore")
        if value is None:
            return True
        if isinstance(value, bool):
            return value
        return self.config.respect_gitignore  # raises the proper error


def _validation_key(table: Mapping[str, Any]) -> str:
    """What a validated table is stored under: a hash of the table and of what validates it.

    ``repr`` keeps TOML's types apart (``1`` from ``"1"``, a date from a
    string). The size and mtime of the two modules that define and validate
    the keys cover an editable install, where they change without a version bump.
    """
    from layoutcheck.digests import sha256_hex
    from layoutcheck.version import __version__

    package = Path(__file__).parent
    stamps: list[tuple[int, int] | None] = []
    for source in (package / "config.py", package / "lint" / "settings.py"):
        try:
            st = source.stat()
            stamps.append((st.st_size, st.st_mtime_ns))
        except OSError:
            stamps.append(None)
    text = repr((__version__, stamps, table))
    return sha256_hex(text.encode())


# ---------------------------------------------------------------- reading


def _read_toml(path: Path) -> dict[str, Any]:
    # tomllib is stdlib from 3.11; the tomli backport has the same API.
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", source=str(path)) from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"invalid TOML in {path}: not UTF-8 (line {line})", source=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        # The message carries "(at line L, column C)", except at the end of the document.
        last_line = data.count(b"\n") + 1
        where = "" if "line" in str(exc) else f" (line {last_line})"
        raise ConfigError(f"invalid TOML in {path}: {exc}{where}", source=str(path)) from None


def _table_of(path: Path, data: Mapping[str, Any]) -> tuple[Any, str] | None:
    """The layoutcheck table of a parsed file and its key prefix; None when a pyproject has none."""
    if path.name != "pyproject.toml":
        return data, ""
    tool = data.get("tool")
    if not isinstance(tool, Mapping) or "layoutcheck" not in tool:
        return None
    return tool["layoutcheck"], TABLE


def _near_table(data: Mapping[str, Any]) -> str:
    """A hint for a pyproject whose layoutcheck table is spelled or placed otherwise (``[layoutcheck]``, ``[tool.layoutchek]``)."""
    import difflib

    if isinstance(data.get("layoutcheck"), Mapping):
        return " (it has a top-level [layoutcheck] table: in pyproject.toml it is [tool.layoutcheck])"
    tool = data.get("tool")
    names = [str(k) for k in tool] if isinstance(tool, Mapping) else []
    close = difflib.get_close_matches("layoutcheck", names, n=1, cutoff=0.75)
    return f" (it has [tool.{close[0]}]: did you mean [{TABLE}]?)" if close else ""


def find_config_file(start: Path, log: InputLog | None = None) -> Path | None:
    """The nearest ``layoutcheck.toml``, or ``pyproject.toml`` with a ``[tool.layoutcheck]`` table, at or above ``start``.

    ``log`` records every name tested, found or not (a `replay` depends on them).
    """
    folder = start if start.is_dir() else start.parent
    is_file = log.is_file if log is not None else os.path.isfile
    for candidate_dir in (folder, *folder.parents):
        for name in CONFIG_FILENAMES:
            candidate = candidate_dir / name
            if not is_file(str(candidate)):
                continue
            if name != "pyproject.toml":
                return candidate
            # Cheap text test before parsing: most pyproject files have no table.
            try:
                text = candidate.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if "layoutcheck" in text and _table_of(candidate, _read_toml(candidate)) is not None:
                return candidate
    return None


def load_config(path: str | os.PathLike[str], log: InputLog | None = None) -> LoadedConfig:
    """Read the configuration in ``path`` (a pyproject.toml or a layoutcheck.toml); ``log`` records it."""
    file = Path(path).expanduser().absolute()
    if log is not None:
        log.probe(str(file))
    if file.is_dir():
        present = [name for name in CONFIG_FILENAMES if (file / name).is_file()]
        which = " or ".join(f"{file / name}" for name in present or CONFIG_FILENAMES)
        raise ConfigError(
            f"{file} is a folder, not a configuration file: name the file in it ({which})"
            + ("" if present else "; that folder has neither"), source=str(file))
    if not file.is_file():
        raise ConfigError(f"configuration file {file} does not exist", source=str(file))
    data = _read_toml(file)
    found = _table_of(file, data)
    if found is None:
        raise ConfigError(
            f"{file} has no [{TABLE}] table{_near_table(data)}; add one, or name a layoutcheck.toml", source=str(file)
        )
    table, prefix = found
    if not isinstance(table, Mapping):
        raise ConfigError(
            f"{prefix or 'the configuration'} in {file} must be a table, "
            f"got {_short(table)} ({type(table).__name__})",
            key=prefix or None, source=str(file),
        )
    return LoadedConfig(file, file.parent, dict(table), prefix)


def resolve_config(
    paths: Sequence[str | os.PathLike[str]] = (),
    config_file: str | os.PathLike[str] | None = None,
    *,
    cwd: Path | None = None,
    log: InputLog | None = None,
) -> LoadedConfig:
    """The configuration for checking ``paths``: ``config_file`` if named, else the nearest one, else defaults.

    ``log`` records the files read and the names tested on the way (see `layoutcheck.lint.replay`).
    """
    if config_file is not None:
        return load_config(config_file, log)
    base = cwd or Path.cwd()
    absolute = [os.path.abspath(base / Path(p)) for p in paths] or [str(base)]
    try:
        start = Path(os.path.commonpath(absolute))
    except ValueError:  # different drives (Windows): fall back to the working folder
        start = base
    found = find_config_file(start, log)
    if found is None:
        return LoadedConfig(None, base, {}, TABLE)
    return load_config(found, log)
