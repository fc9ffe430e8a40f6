"""What the linter reads from ``[tool.layoutcheck]``, as plain frozen dataclasses.

* `LintSettings`: the domain settings every rule reads (owners, sources,
  names, helpers). It is defined in `layoutcheck.model.settings`, since the
  project model reads it too and the model imports nothing from the linter;
  it is named here as well, beside the table that extends it. Rules and tests
  build it directly: ``LintSettings(owners={"thd": ("pkg.mod:pack",)})``.
* `CheckSettings`: the whole table as ``layoutcheck check`` uses it: the
  domain settings plus the engine's options (select, ignore, exclude, preview, ...).

Both are dataclasses and not pydantic models, for the reason
`layoutcheck.model.settings` gives (a pre-commit run must not pay for
pydantic); `layoutcheck.config` validates TOML against their fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from layoutcheck.records import dataclass
from layoutcheck.model.settings import (
    DEFAULT_CP_HELPERS,
    DEFAULT_KERNEL_MODULES,
    DEFAULT_TEST_PATHS,
    LintSettings,
    arrays_as_tuples,
    kebab,
    setting,
)

__all__ = [
    "DEFAULT_CACHE_DIR", "DEFAULT_CP_HELPERS", "DEFAULT_KERNEL_MODULES", "DEFAULT_TEST_PATHS", "TABLE", "CheckSettings",
    "LintSettings", "arrays_as_tuples", "kebab", "setting",
]

TABLE = "tool.layoutcheck"
"""Where the table lives in a ``pyproject.toml``, and how its keys are spelled in messages."""

DEFAULT_CACHE_DIR = ".layoutcheck_cache"
"""The result cache folder, beside the configuration file, unless ``cache-dir`` names one."""


@dataclass(frozen=True)
class CheckSettings(LintSettings):
    """The whole ``[tool.layoutcheck]`` table as `layoutcheck check` reads it: the rules'
    domain settings plus the engine's options.

    Rule selectors (``select``, ``extend-select``, ``ignore``, ``per-file-ignores``)
    are codes (``LC101``), code prefixes (``LC1``), kebab-case names
    (``global-max-padding``) or ``ALL``; they are checked against the known
    rules when the rules are loaded (`layoutcheck.lint.selection`). The
    ``[tool.layoutcheck.runtime]`` table is not here: the linter reads nothing
    from it (`layoutcheck.config.RuntimeConfig` validates it).
    """

    select: tuple[str, ...] | None = setting(
        None, description="Rules to enable; unset means every rule that is on by default."
    )
    extend_select: tuple[str, ...] = setting(
        (), description="Rules to enable on top of `select` (or the defaults)."
    )
    ignore: tuple[str, ...] = setting((), description="Rules to disable.")
    preview: bool = setting(
        False,
        description=(
            "Run the preview rules too: the rules whose findings on the precision corpus are less than 90% "
            "true (or that have no finding there), as `layoutcheck rules` lists them. Without it a preview "
            "rule runs only when `select` or `extend-select` names its exact code or name."
        ),
    )
    exclude: tuple[str, ...] = setting(
        (),
        description=(
            "Glob patterns of files and folders to skip, relative to this file's folder "
            "(gitignore-like: a pattern without `/` matches a name at any depth). Files and "
            "folders named on the command line are checked anyway, unless `--force-exclude` "
            "is given (the pre-commit hook gives it)."
        ),
    )
    respect_gitignore: bool = setting(
        True,
        description=(
            "Skip the files and folders that `.gitignore` and `.ignore` files ignore (those of the "
            "checked folders and of the folders above them, up to the repository's root, and "
            "`.git/info/exclude`), as ruff does; git need not be installed. Files named on the "
            "command line are checked anyway. `--no-respect-gitignore` turns it off for one run."
        ),
    )
    per_file_ignores: dict[str, tuple[str, ...]] = setting(
        factory=dict, description="Glob pattern -> rules to disable in the files it matches."
    )
    cache_dir: str | None = setting(
        None, description=f"Result cache folder; default `{DEFAULT_CACHE_DIR}` beside this file."
    )

    def to_json(self) -> dict[str, Any]:
        """The values as JSON-able data (tuples become arrays); `from_json` reverses it."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, values: Mapping[str, Any]) -> CheckSettings:
        """Rebuild from `to_json` output; ValueError unless it names exactly this class's fields."""
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(values, Mapping) or set(values) != names:
            raise ValueError("not the fields of CheckSettings")
        return cls(**{name: arrays_as_tuples(values[name]) for name in names})
