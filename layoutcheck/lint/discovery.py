"""Which files a run checks: Python sources under the given paths, minus the excluded.

Folders are walked in name order (so the run is deterministic), skipping
version-control and tool folders (`DEFAULT_EXCLUDED_DIRS`), virtual
environments (any folder holding a ``pyvenv.cfg``), cache folders (holding a
``CACHEDIR.TAG``), what ``.gitignore`` and ``.ignore`` files ignore (unless
``respect-gitignore`` is off: `layoutcheck.lint.ignorefiles`) and what the
configuration's ``exclude`` names. A file or folder named on the command line
is checked even when ``exclude`` or an ignore file matches it, as in ruff:
asking for a file by name and getting silence would look like a pass. With
``force_exclude`` (ruff's ``--force-exclude``, which the pre-commit hook
passes) ``exclude`` applies to named paths too: pre-commit names every staged
file, and the project's ``exclude`` must still keep vendored or generated
code out (ignore files do not: pre-commit never names an ignored file, and
a file git tracks although its pattern ignores it was added on purpose).

A path that does not exist, or a link loop that resolves to nothing, is an
error (exit 2); unreadable folders and broken links are reported, and the
walk goes on.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import field
from layoutcheck.records import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from layoutcheck.lint.findings import INVALID_INPUT, MISSING_PATH, FileError
from layoutcheck.globs import any_match
from layoutcheck.lint.ignorefiles import IGNORE_FILES, IgnoreRules, folder_patterns

if TYPE_CHECKING:
    from layoutcheck.lint.replay import InputLog

__all__ = ["DEFAULT_EXCLUDED_DIRS", "PYTHON_SUFFIXES", "Discovered", "SourceFile", "discover"]

PYTHON_SUFFIXES = (".py", ".pyi")

DEFAULT_EXCLUDED_DIRS = frozenset({
    ".git", ".hg", ".svn", ".bzr", "__pycache__", ".venv", "venv", "build", "dist",
    ".tox", ".nox", "node_modules", ".eggs", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", ".hypothesis", ".layoutcheck_cache", "__pypackages__",
})
"""Folder names never walked into, at any depth, whatever the configuration says: version control
(``.git``, ``.hg``, ``.svn``, ``.bzr``), virtual environments (``.venv``, ``venv``, ``__pypackages__``;
also any folder holding a ``pyvenv.cfg``), build output (``build``, ``dist``, ``.eggs``, ``*.egg-info``),
tools' caches (``__pycache__``, ``.tox``, ``.nox``, ``.mypy_cache``, ``.pytest_cache``, ``.ruff_cache``,
``.hypothesis``, ``.layoutcheck_cache``; also any folder holding a ``CACHEDIR.TAG``) and
``node_modules``. A folder named on the command line is walked all the same."""


@dataclass(frozen=True)
class SourceFile:
    """One file to check."""

    path: str
    """Absolute path."""
    display: str
    """How findings name it: relative to the working folder when under it, else absolute."""
    relpath: str
    """Relative to the configuration root, ``/``-separated: what ``exclude`` and ``per-file-ignores`` match."""
    module_name: str | None
    """Dotted module name (walking up while ``__init__.py`` exists), for owner matching."""


@dataclass
class Discovered:
    """The files to check, in display order, and the paths that could not be walked."""

    files: list[SourceFile] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    excluded: int = 0
    """Python files and folders left out because ``exclude`` or an ignore file matched them (a run with
    no files and none excluded found no Python file at all)."""


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _below(path: str, folder: str) -> str:
    """``os.path.relpath(path, folder)`` for a ``path`` `_under` ``folder``, both absolute and
    normalised: a prefix cut (a one-file run names every file of its project twice, and
    `os.path.relpath` normalises both paths again each time)."""
    if path == folder:
        return "."
    return path[len(folder.rstrip(os.sep) + os.sep):]


class _Walker:
    def __init__(self, root: Path, exclude: Sequence[str], skip: Iterable[Path], cwd: Path,
                 log: InputLog | None = None, respect_gitignore: bool = True):
        self.log = log
        self.respect_gitignore = respect_gitignore
        self.root = os.path.abspath(root)
        self.cwd = os.path.abspath(cwd)
        self.exclude = tuple(exclude)
        self.skip = {os.path.abspath(p) for p in skip}
        self.has_init: dict[str, bool] = {}
        self.packages: dict[str, str | None] = {}
        self.found: dict[str, SourceFile] = {}
        self.errors: list[FileError] = []
        self.skipped = 0

    # Tests of the file system outside a listing, recorded in the run's log when there is one.
    def is_file(self, path: str) -> bool:
        return self.log.is_file(path) if self.log is not None else os.path.isfile(path)

    def exists(self, path: str) -> bool:
        return self.log.probe(path) is not None if self.log is not None else os.path.exists(path)

    def read(self, path: str) -> str | None:
        """An ignore file's text (None when it cannot be read), recorded in the log."""
        if self.log is not None:
            self.log.probe(path)
        try:
            with open(path, "rb") as handle:
                return handle.read().decode("utf-8", "replace")
        except OSError:
            return None

    def ancestor_rules(self, top: str) -> IgnoreRules:
        """The ignore files of the folders above ``top``, up to its repository's root (the nearest
        folder holding ``.git``; without one, the root of the file system): what a walk of the
        whole repository would have read on its way down to ``top``."""
        if not self.respect_gitignore or self.exists(os.path.join(top, ".git")):
            return IgnoreRules()
        folders = []
        folder = top
        repository = False
        while True:
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
            folders.append(folder)
            if self.exists(os.path.join(folder, ".git")):
                repository = True
                break
        rules = IgnoreRules()
        for folder in reversed(folders):
            names = {n for n in IGNORE_FILES if self.is_file(os.path.join(folder, n))}
            rules = rules.inside(folder, folder_patterns(
                folder, names, self.read, repository_root=repository and folder == folders[-1]))
        # A folder named on the command line inside a tree those files ignore (a package installed under
        # `.pytest_cache/`, whose `.gitignore` is `*`; an `outputs/` run folder) is checked, as a named file
        # is: their patterns would ignore everything below it. Its own and deeper ignore files still apply.
        below = [*reversed(folders[:-1]), top] if folders else [top]
        if any(rules.ignored(folder, True) for folder in below):
            return IgnoreRules()
        return rules

    def display(self, path: str) -> str:
        return _below(path, self.cwd) if _under(path, self.cwd) and path != self.cwd else path

    def relpath(self, path: str) -> str:
        rel = _below(path, self.root) if _under(path, self.root) else path
        return rel.replace(os.sep, "/")

    def excluded(self, path: str, is_dir: bool, patterns: Sequence[str] | None = None) -> bool:
        patterns = self.exclude if patterns is None else patterns
        if not patterns:
            return False
        rel = self.relpath(path)
        return any_match(patterns, rel + "/" if is_dir else rel) is not None

    def package(self, folder: str) -> str | None:
        """Dotted name of ``folder`` when it is a package (holds ``__init__.py``), else None."""
        if folder in self.packages:  # asked once per file: the folder's answer is the same for each
            return self.packages[folder]
        self.packages[folder] = found = self._package(folder)
        return found

    def _package(self, folder: str) -> str | None:
        parts = []
        while True:
            has = self.has_init.get(folder)
            if has is None:
                has = any(self.is_file(os.path.join(folder, n)) for n in ("__init__.py", "__init__.pyi"))
                self.has_init[folder] = has
            if not has:
                break
            parts.append(os.path.basename(folder))
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
        return ".".join(reversed(parts)) or None

    def module_name(self, path: str) -> str | None:
        folder, name = os.path.split(path)
        stem = name.rsplit(".", 1)[0] if "." in name else name
        package = self.package(folder)
        if stem == "__init__":
            return package
        return f"{package}.{stem}" if package else stem

    def add(self, path: str) -> None:
        if path not in self.found:
            self.found[path] = SourceFile(path, self.display(path), self.relpath(path), self.module_name(path))

    def walk(self, top: str, *, force_exclude: bool = False) -> None:
        # A folder named on the command line is checked like a named file
        # (ruff does the same): the patterns that exclude it do not apply inside
        # it, unless `force_exclude` (the caller skips an excluded one).
        patterns = self.exclude if force_exclude else tuple(
            p for p in self.exclude if not self.excluded(top, True, (p,)))
        stack = [(top, self.ancestor_rules(top))]
        while stack:
            folder, rules = stack.pop()
            try:
                with os.scandir(folder) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as exc:
                if self.log is not None:
                    self.log.probe(folder)
                self.errors.append(FileError(self.display(folder), None,
                                             f"cannot read directory: {exc.strerror or exc}",
                                             kind=INVALID_INPUT))
                continue
            if self.log is not None:
                self.log.listed(folder, [e.name for e in entries])  # what this run saw, not a second listing
            names = {e.name for e in entries}
            if folder != top and ("pyvenv.cfg" in names or "CACHEDIR.TAG" in names):
                continue  # a virtual environment or a cache: never project code
            self.has_init[folder] = "__init__.py" in names or "__init__.pyi" in names
            if self.respect_gitignore:
                repository = ".git" in names
                if repository and folder != top:
                    rules = IgnoreRules()  # a nested repository: its own ignore files, not the outer one's
                if repository or not names.isdisjoint(IGNORE_FILES):
                    rules = rules.inside(folder, folder_patterns(folder, names, self.read, repository))
            subfolders = []
            for entry in entries:
                name = entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if name in DEFAULT_EXCLUDED_DIRS or name.endswith(".egg-info") or entry.path in self.skip:
                            continue
                        if self.excluded(entry.path, True, patterns) or (rules and rules.ignored(entry.path, True)):
                            self.skipped += 1
                            continue
                        subfolders.append(entry.path)
                    elif name.endswith(PYTHON_SUFFIXES):
                        if self.excluded(entry.path, False, patterns) or (rules and rules.ignored(entry.path, False)):
                            self.skipped += 1
                        elif entry.is_file():
                            self.add(entry.path)
                        elif entry.is_symlink() and not self.exists(entry.path):
                            self.errors.append(FileError(self.display(entry.path), None,
                                                         "broken symbolic link: not checked",
                                                         kind=INVALID_INPUT))
                except OSError as exc:
                    self.errors.append(FileError(self.display(entry.path), None,
                                                 f"cannot read: {exc.strerror or exc}", kind=INVALID_INPUT))
            # Reversed onto the stack so folders pop in name order.
            stack.extend((sub, rules) for sub in reversed(subfolders))


def discover(
    paths: Sequence[str | os.PathLike[str]],
    *,
    root: Path,
    exclude: Sequence[str] = (),
    skip_dirs: Iterable[Path] = (),
    cwd: Path | None = None,
    force_exclude: bool = False,
    log: InputLog | None = None,
    respect_gitignore: bool = True,
) -> Discovered:
    """The Python files under ``paths`` (default: the working folder).

    ``root`` is the folder ``exclude`` globs are relative to (the config's);
    ``skip_dirs`` are folders never walked into (the cache folder);
    ``force_exclude`` applies ``exclude`` to the named paths themselves (a
    named path it matches is skipped silently, as in ruff); ``log`` records
    every folder listed, every name tested and every ignore file read (see
    `layoutcheck.lint.replay`); ``respect_gitignore`` skips what ``.gitignore``
    and ``.ignore`` files ignore, except paths named here.
    """
    base = Path(cwd) if cwd is not None else Path.cwd()
    walker = _Walker(root, exclude, skip_dirs, base, log, respect_gitignore)
    for raw in paths or (".",):
        path = os.path.normpath(os.path.join(base, os.fspath(raw)))
        if log is not None:
            log.probe(path)
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            if os.path.islink(path):
                walker.errors.append(FileError(walker.display(path), None, "broken symbolic link: not checked",
                                               kind=INVALID_INPUT))
            else:
                walker.errors.append(FileError(os.fspath(raw), None, "no such file or directory",
                                               kind=MISSING_PATH))
            continue
        except OSError as exc:
            # A link loop resolves to nothing, as a missing path does: a usage error (exit 2), not a finding.
            loop = exc.errno == errno.ELOOP
            walker.errors.append(FileError(
                os.fspath(raw), None,
                "symbolic link loop: the path resolves to nothing" if loop else f"cannot access: {exc.strerror or exc}",
                kind=MISSING_PATH if loop else INVALID_INPUT))
            continue
        is_dir = stat.S_ISDIR(mode)
        if force_exclude and walker.excluded(path, is_dir):
            walker.skipped += 1
            continue
        if is_dir:
            walker.walk(path, force_exclude=force_exclude)
        elif stat.S_ISREG(mode):
            walker.add(path)  # named explicitly: checked even when excluded, unless force_exclude
        else:
            walker.errors.append(FileError(walker.display(path), None, "not a regular file: not checked",
                                           kind=INVALID_INPUT))
    files = sorted(walker.found.values(), key=lambda f: f.display)
    errors = sorted(walker.errors, key=lambda e: e.path)
    return Discovered(files, errors, walker.skipped)
