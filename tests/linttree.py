"""Lint a small tree written from a dict, as a user's run does (no cache, every rule, preview on): shared by the
tests of flow across modules."""

from __future__ import annotations

from pathlib import Path

from layoutcheck.configfile import TABLE, LoadedConfig
from layoutcheck.lint.findings import Finding
from layoutcheck.lint.runner import run
from layoutcheck.lint.selection import SelectionOverrides


def lint_files(folder: Path, files: dict[str, str]) -> list[Finding]:
    """Write ``files`` (name -> text) into ``folder`` and lint it; the findings (no file may fail to lint)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)  # `pkg/mod.py`: a package's module
        (folder / name).write_text(text)
    loaded = LoadedConfig(None, folder, {}, TABLE)
    result = run([folder], cwd=folder, use_cache=False, jobs=1, loaded=loaded,
                 overrides=SelectionOverrides(preview=True))
    assert not result.errors, result.errors
    return list(result.findings)
