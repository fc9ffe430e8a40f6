"""A warm re-run of the same ``check`` replays its last output when nothing it read has changed.

Pre-commit, editors and CI re-run the same command over a project that
mostly did not change. Even when the result cache holds every file, such a
run would import the linter (argparse, dataclasses, the configuration and the
cache code: about three quarters of the time of a warm run), only to print
what it printed last time. So a ``check`` run records what it read from disk
(an `InputLog`) and stores it with its output and exit status (a *stamp*);
the next run with the same command line, in the same folder and the same
environment, compares those inputs with ``stat`` alone and, when they are
all unchanged, writes the stored output and exits. It imports nothing but
``os``, ``sys``, ``marshal`` and ``zlib``.

What a stamp holds, and so what a replay depends on:

* the invocation: the arguments, the working folder, layoutcheck's version,
  the interpreter, ``NO_COLOR``/``FORCE_COLOR`` and whether stdout and
  stderr are terminals (the output's colour);
* every file read (checked files, the project's other files, the
  configuration file): kind, inode, size, modification and change times;
* every folder listed, by its entries' names (not its modification time,
  which an editor's swap file, created and removed again, or the run's own
  cache folder would change), and every path probed for existence
  (``__init__.py`` and the configuration files up the tree), including those
  found missing;
* every layoutcheck module the run had loaded, so an upgraded or edited
  layoutcheck never replays an older one's output.

Like ``make`` and ruff, this trusts modification times; like git, it does
not trust one too recent to tell apart from a later edit in the same tick
of the file system's clock: a run with an input modified shortly before it
started stores no stamp (the next run does, through the result cache).
Shortly is `racy_window_ns`: 50 ms where the file system keeps sub-millisecond
times (ext4, XFS, Btrfs, tmpfs, APFS, NTFS: their clocks tick at least every
16 ms), 2 s elsewhere (FAT's clock ticks every 2 s). Only a run whose cache folder is ``.layoutcheck_cache`` in the
working folder stores a stamp (the default: a project checked from its
root), so a replay needs neither the configuration nor the arguments parsed;
``--fix``, ``--diff``, ``--add-noqa``, ``--no-cache`` and runs that end in an error (exit 2)
store none. A stamp that does not match, cannot be read or comes from
another version is ignored: the run goes the ordinary way.
"""

from __future__ import annotations

import marshal
import os
import sys
import time
import zlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import TextIO, Union

    StatKey = Union[tuple[int, int, int, int, int], tuple[int, int, tuple[str, ...]]]
    """A file's (type, inode, size, mtime, ctime); a folder's (type, inode, sorted entry names)."""

__all__ = ["REPLAY_DIR", "InputLog", "racy_window_ns", "replay", "stat_key", "store"]

FORMAT = 1
"""Version of the stamp's layout; a stamp of another one is ignored."""

REPLAY_DIR = os.path.join(".layoutcheck_cache", "replay")
"""Where stamps live, relative to the working folder: ``replay/`` in the default cache folder
(`layoutcheck.lint.settings.DEFAULT_CACHE_DIR`, not imported: it would cost a replay its speed)."""

FINE_WINDOW_NS = 50_000_000
"""The racy window where times have sub-millisecond digits."""
COARSE_WINDOW_NS = 2_000_000_000
"""The racy window elsewhere."""

MAX_STAMPS = 64
"""Stamps kept per cache folder; storing one more removes the oldest."""

_ENVIRONMENT = ("NO_COLOR", "FORCE_COLOR")
"""Variables the ``check`` output depends on."""


def racy_window_ns(mtime_ns: int) -> int:
    """How close to a run's start a modification time must be to be distrusted (see the module docs)."""
    return FINE_WINDOW_NS if mtime_ns % 1_000_000 else COARSE_WINDOW_NS


_DIRECTORY = 0o04  # S_IFDIR >> 12


def stat_key(path: str) -> StatKey | None:
    """What a replay compares for ``path`` (None: missing): for a file, its type, inode, size, mtime
    and ctime; for a folder, its type, inode and sorted entry names (exact, so never racy)."""
    try:
        st = os.stat(path)
        kind = st.st_mode >> 12
        if kind == _DIRECTORY:
            return (kind, st.st_ino, tuple(sorted(os.listdir(path))))
    except OSError:
        return None
    return (kind, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class InputLog:
    """What one run read from disk, each path with its `stat_key` taken before it was read."""

    def __init__(self) -> None:
        self.started_ns = time.time_ns()
        self.paths: dict[str, StatKey | None] = {}

    def probe(self, path: str) -> StatKey | None:
        """Stat ``path`` (a file about to be read, a folder about to be listed, a name tested for existence)."""
        path = os.path.abspath(path)
        key = self.paths[path] = stat_key(path)
        return key

    def listed(self, folder: str, names: Sequence[str]) -> None:
        """Record ``folder`` as listed, with the entry ``names`` the run saw (the `stat_key` of a folder)."""
        path = os.path.abspath(folder)
        try:
            inode = os.stat(path).st_ino
        except OSError:
            self.paths[path] = None
            return
        self.paths[path] = (_DIRECTORY, inode, tuple(sorted(names)))

    def is_file(self, path: str) -> bool:
        """``os.path.isfile``, recorded."""
        key = self.probe(path)
        return key is not None and key[0] == 0o10  # S_IFREG >> 12

    def racy(self) -> bool:
        """True when an input was modified too recently for its mtime to tell a later edit apart."""
        start = self.started_ns
        return any(len(key) == 5 and key[3] >= start - racy_window_ns(key[3])  # type: ignore[operator]
                   for key in self.paths.values() if key is not None)


def _invocation(argv: Sequence[str], stdout: TextIO, stderr: TextIO) -> bytes:
    from layoutcheck.version import __version__

    def tty(stream: TextIO) -> bool:
        isatty = getattr(stream, "isatty", None)
        try:
            return bool(isatty and isatty())
        except (OSError, ValueError):
            return False

    # repr, not marshal: marshal's bytes for equal values depend on their reference counts.
    return repr((
        FORMAT, __version__, sys.executable, sys.version, os.getcwd(), tuple(argv),
        tuple(os.environ.get(name) for name in _ENVIRONMENT), tty(stdout), tty(stderr),
    )).encode("utf-8", "backslashreplace")


def _stamp_path(invocation: bytes) -> str:
    return os.path.join(REPLAY_DIR, f"{zlib.crc32(invocation):08x}")


def replay(argv: Sequence[str], stdout: TextIO | None = None, stderr: TextIO | None = None) -> int | None:
    """Write the stored output of ``layoutcheck check *argv[1:]`` and return its exit status.

    None when no stamp of this invocation exists or any of its inputs
    changed: the caller runs the check.
    """
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    invocation = _invocation(argv, stdout, stderr)
    try:
        with open(_stamp_path(invocation), "rb") as handle:
            stored, inputs, writes, code = marshal.loads(handle.read())
        if stored != invocation or not isinstance(code, int):
            return None  # another invocation with the same checksum
        for path, key in inputs:
            if stat_key(path) != key:
                return None
    except (OSError, EOFError, ValueError, TypeError):  # no stamp, or not one this version wrote
        return None
    streams = (stdout, stderr)
    for which, text in writes:
        streams[which].write(text)
    return code


def _loaded_modules() -> Iterable[str]:
    for name, module in list(sys.modules.items()):
        if name == "layoutcheck" or name.startswith("layoutcheck."):
            path = getattr(module, "__file__", None)
            if path:
                yield path


def store(argv: Sequence[str], log: InputLog, writes: Sequence[tuple[int, str]], code: int,
          cache_dir: str, stdout: TextIO | None = None, stderr: TextIO | None = None) -> bool:
    """Store the stamp of a finished run: its inputs, its output (``(0|1, text)`` for stdout|stderr) and status.

    Does nothing (returns False) unless ``cache_dir`` is the working folder's
    ``.layoutcheck_cache`` and no input is racy; a stamp that cannot be
    written is silently skipped (a cache, not a result).
    """
    folder = os.path.abspath(REPLAY_DIR)
    if os.path.abspath(os.path.join(cache_dir, "replay")) != folder:
        return False
    if log.racy():  # before the ~180 modules' stats: a pre-commit run of a file just saved stores none
        return False
    inputs = dict(log.paths)
    for path in _loaded_modules():
        inputs.setdefault(os.path.abspath(path), stat_key(path))
    invocation = _invocation(argv, stdout or sys.stdout, stderr or sys.stderr)
    data = marshal.dumps((invocation, tuple(inputs.items()), tuple(writes), code))
    target = os.path.abspath(_stamp_path(invocation))
    try:
        os.makedirs(folder, exist_ok=True)
        _prune(folder)
        temporary = f"{target}.{os.getpid()}.tmp"
        with open(temporary, "wb") as handle:
            handle.write(data)
        os.replace(temporary, target)  # atomic: a concurrent replay reads the old stamp or the new one
    except OSError:
        return False
    return True


def _prune(folder: str) -> None:
    try:
        names = [n for n in os.listdir(folder) if not n.endswith(".tmp")]
    except OSError:
        return
    if len(names) < MAX_STAMPS:
        return
    paths = [os.path.join(folder, n) for n in names]
    paths.sort(key=lambda p: os.stat(p).st_mtime_ns if os.path.exists(p) else 0)
    for path in paths[: len(paths) - MAX_STAMPS + 1]:
        try:
            os.unlink(path)
        except OSError:
            pass
