"""The cache: per-file facts and local results, and whole-run results, keyed by content and settings.

Two kinds of entries, one small file each:

* a *file entry* per checked or context file, keyed by the file's bytes,
  its root-relative path and module name and the *settings fingerprint*:
  the file's facts (`layoutcheck.model.facts`: what the project phase reads
  of it, so an unchanged file is never parsed again, not even when another
  file changed) and the findings of syntax rules, which depend on the file
  alone, as `marshal` data (``files/``);
* a *run entry* per project state: keyed by the fingerprint and every
  project file's path, module, display name and digest, it holds every
  checked file's findings, as JSON (``runs/``). A run of an unchanged project
  reads one entry.

And, for a one-file run, a *function entry* per file path (keyed by the
fingerprint, the path and module name, not the content): the records of the
file's functions that its last one-file run walked, with that run's text,
as `marshal` data (``functions/``); the next one-file run of the file reuses
the records of the functions whose text, and the text before them, is
unchanged (`layoutcheck.model.reuse`), and checks each where it reads it.

The fingerprint covers the configuration table, the command-line selection,
the rules in play, layoutcheck's and Python's versions and libcst's
installation (and the linter's own sources: an editable install changes
without a version bump). Anything that could change a result changes a key,
so entries are never invalidated, only superseded; delete the folder to
reclaim the space.

Entries hold findings without their path (the same file may be shown
relative to another working folder) and only errors that the content itself
explains (a syntax error, not an unreadable file). Writes go through a
temporary file and `os.replace`, so a reader never sees half an entry; an
entry that does not parse is a miss, never a crash. Facts are plain values
(lists, tuples, strings, numbers, and the calls as `marshal` bytes of their own, read only when
the project asks for them: `layoutcheck.model.facts.cache_data`) in
`marshal`'s format, the one of Python's own ``.pyc`` files and of the replay
stamps, never pickles: loading one runs nothing and builds no object of the
project's (the dataclasses are built here, from checked lists), so a cache
folder someone else wrote can do no harm. A one-file run reads every other file's entry, and
`marshal` reads them five times faster than JSON, tuples included (JSON has
only arrays). The dataclasses are then built field by field with the types
extraction makes, so no rule sees a difference between a cached file and a
fresh one (`layoutcheck.model.facts.from_cache_data`; tests/test_cache_types.py,
tests/test_cache_property.py). The format is Python's, so the fingerprint
names its version.

Finding those keys needs each file's digest, and hashing every project file
would read every one of them again on a one-file run. So the folder keeps
one *stat index* too (``stats.marshal``, `StatIndex`): each file's size and
``st_mtime_ns`` beside its content digest, as ruff's and git's caches keep
them. A file whose stat matches its record is not read (its recorded digest
stands); one whose stat differs is read and hashed, and its record refreshed,
so a touched but unchanged file still hits every entry. The digest stays the
truth. A stat is recorded only once the file's mtime is two seconds old (git's
"racy" rule): an edit within the filesystem's timestamp granularity that kept
the size cannot be hidden behind a record taken just before it. Tools that
rewrite a file and then restore its old size *and* mtime (``os.utime``,
``touch -r``) defeat this, as they defeat ruff and make; ``--no-cache`` reads
every file.

The same folder keeps, under ``config/``, the validated values of each
configuration table a run validated (`read_validated_config`), so a later
run with the same table needs no pydantic (see `layoutcheck.configfile`).

Importing this module costs no libcst: a run whose project is unchanged
never imports the engine or the rules.
"""

from __future__ import annotations

import json
import marshal
import os
import sys
from collections.abc import Mapping
from layoutcheck.records import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layoutcheck.digests import sha256_hex
from layoutcheck.lint.findings import INVALID_INPUT, FileError, FileResult, Finding

if TYPE_CHECKING:
    from layoutcheck.lint.settings import CheckSettings

__all__ = [
    "CACHE_VERSION",
    "ResultCache",
    "StatIndex",
    "digest",
    "error_row",
    "errors_of",
    "finding_row",
    "findings_of",
    "fingerprint",
    "read_validated_config",
    "tool_signature",
    "write_validated_config",
]

CACHE_VERSION = 5

_SUFFIX = {"files": ".marshal", "runs": ".json", "functions": ".marshal"}
"""File entries are `marshal` data (plain values only: `layoutcheck.model.facts.cache_data`), function
entries too (`layoutcheck.model.reuse`), run
entries JSON."""

_GITIGNORE = "# Created by layoutcheck: the whole folder is a cache.\n*\n"
_CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by layoutcheck.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


def _installation(name: str) -> list[Any] | None:
    """Where package ``name`` is installed, with its ``__init__``'s size and mtime.

    Installing, upgrading or editing the package changes them (installers
    write files afresh). Its version would need `importlib.metadata`, whose
    import alone takes about 13 ms, a twentieth of a one-file run; `find_spec`
    imports nothing.
    """
    from importlib.util import find_spec

    try:
        spec = find_spec(name)
        if spec is None or spec.origin is None:
            return None
        st = os.stat(spec.origin)
    except (ImportError, ValueError, OSError):
        return None
    return [spec.origin, st.st_size, st.st_mtime_ns]


def tool_signature() -> dict[str, Any]:
    """layoutcheck's version, where libcst is installed, and size and mtime of the linter's own sources.

    The sources' stat covers an editable install (this repository), where a
    rule changes without a version bump; it costs a few dozen ``stat`` calls.
    """
    from layoutcheck.version import __version__

    from layoutcheck.lint.registry import rules_folder

    package = Path(__file__).parent.parent  # layoutcheck/
    try:
        rules = rules_folder() or package.parent / "rules"  # the rules this run lints with
    except (ImportError, ValueError):
        rules = package.parent / "rules"
    sources = []
    for folder in (package / "lint", package / "model", rules):
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".py"))
        except OSError:
            continue
        sources.extend(folder / n for n in names)
    sources.extend(package / n for n in ("config.py", "geometry.py", "errors.py"))
    stats = []
    for source in sources:
        try:
            st = source.stat()
        except OSError:
            continue
        stats.append((str(source), st.st_size, st.st_mtime_ns))
    return {
        "cache": CACHE_VERSION,
        "layoutcheck": __version__,
        "libcst": _installation("libcst"),
        "python": list(sys.version_info[:2]),
        "sources": stats,
    }


def fingerprint(parts: Mapping[str, Any]) -> str:
    """A stable hash of JSON-able ``parts`` (keys sorted)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return sha256_hex(blob.encode())


def finding_row(f: Finding) -> list[Any]:
    """A finding as a cache row, without its path."""
    return [f.line, f.column, f.rule, f.code, f.end_line, f.end_column, f.message, f.fixable, f.fix]


def error_row(e: FileError) -> list[Any]:
    return [e.line, e.column, e.message, e.kind]


def findings_of(rows: Any, display: str) -> list[Finding]:
    return [
        Finding(display, line, col, rule, code, end_line, end_col, message, bool(fixable), fix)
        for line, col, rule, code, end_line, end_col, message, fixable, fix in rows
    ]


def errors_of(rows: Any, display: str) -> list[FileError]:
    return [FileError(display, line, message, column=col, kind=kind) for line, col, message, kind in rows]


def result_data(result: FileResult) -> dict[str, Any] | None:
    """A checked file's result as cache data; None when it holds an error its content does not explain."""
    if any(e.kind != INVALID_INPUT for e in result.errors):
        return None
    return {
        "findings": [finding_row(f) for f in result.findings],
        "errors": [error_row(e) for e in result.errors],
        "parsed": result.parsed,
    }


def result_of(data: Mapping[str, Any], display: str) -> FileResult:
    return FileResult(display, findings_of(data["findings"], display), errors_of(data["errors"], display),
                      parsed=bool(data["parsed"]), cached=True)


@dataclass
class ResultCache:
    """File and run entries under ``directory``, for one settings ``fingerprint``."""

    directory: Path
    fingerprint: str
    hits: int = 0
    misses: int = 0
    writes: int = 0
    enabled: bool = True
    warning: str | None = None
    """Set when the folder could not be created: the run goes on uncached."""

    def prepare(self) -> None:
        """Create the folder with its ``.gitignore`` and ``CACHEDIR.TAG`` (both idempotent)."""
        try:
            _prepare(self.directory)
        except OSError as exc:
            self.enabled = False
            self.warning = f"cache disabled: cannot write {self.directory}: {exc.strerror or exc}"

    def key(self, relpath: str, module_name: str | None, digest: str) -> str:
        """The file entry key for one file's content at one place."""
        text = "\0".join((self.fingerprint, relpath, module_name or "", digest))
        return sha256_hex(text.encode())

    def run_key(self, files: list[tuple[str, ...]]) -> str:
        """The run entry key for a project state: each file's (relpath, module, display, digest, role)."""
        text = "\0".join((self.fingerprint, *("\1".join(f) for f in sorted(files))))
        return sha256_hex(text.encode())

    def _entry(self, kind: str, key: str) -> str:
        # Sharded by the first two hex digits: no folder grows past a few thousand files. A string,
        # not a `Path`: a one-file run reads every other file's entry, and pathlib's joins and
        # `read_bytes` cost it a few milliseconds more than these.
        return os.path.join(self._folder, kind, key[:2], key[2:] + _SUFFIX[kind])

    @property
    def _folder(self) -> str:
        return os.fspath(self.directory)

    def _read(self, kind: str, key: str) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        try:
            with open(self._entry(kind, key), "rb") as handle:
                raw = handle.read()
            data = json.loads(raw) if kind == "runs" else marshal.loads(raw)
            if not isinstance(data, dict) or data.get("v") != CACHE_VERSION:
                raise ValueError("other cache version")
        except (OSError, ValueError, TypeError, AttributeError, EOFError, MemoryError):
            # Missing, truncated, hand-edited or from another version: recompute.
            self.misses += 1
            return None
        return data

    def _write(self, kind: str, key: str, data: dict[str, Any]) -> None:
        if not self.enabled:
            return
        target = Path(self._entry(kind, key))
        entry = {"v": CACHE_VERSION, **data}
        try:
            blob = json.dumps(entry, separators=(",", ":")).encode() if kind == "runs" else marshal.dumps(entry)
        except ValueError:  # a value `marshal` cannot write (not a plain one): this entry costs a miss
            return
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(target, blob)
            self.writes += 1
        except OSError:
            pass  # a full disk or a read-only folder costs speed, never the run

    def get_file(self, key: str) -> dict[str, Any] | None:
        """A file entry: ``facts`` (a `FileFacts`, built from its cached form; its calls decoded
        when the project asks for them), ``findings`` and ``errors`` rows, ``parsed``."""
        from layoutcheck.model.facts import from_cache_data

        data = self._read("files", key)
        if data is None:
            return None
        try:
            if not isinstance(data["findings"], list) or not isinstance(data["errors"], list):
                raise TypeError("bad rows")
            for row in data["findings"]:
                if len(row) != 9:
                    raise ValueError("bad finding row")
            for row in data["errors"]:
                if len(row) != 4:
                    raise ValueError("bad error row")
            data["parsed"] = bool(data["parsed"])
            if data["facts"] is not None:
                data["facts"] = from_cache_data(data["facts"])
        except (KeyError, TypeError, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        return data

    def put_file(self, key: str, data: dict[str, Any]) -> None:
        self._write("files", key, data)

    def memo_key(self, relpath: str, module_name: str | None) -> str:
        """The key of a file's function records (`get_memo`): its place, not its content."""
        return sha256_hex("\0".join((self.fingerprint, relpath, module_name or "", "functions")).encode())

    def get_memo(self, key: str) -> Any:
        """The records of the module-level functions of the file's last one-file extraction
        (`layoutcheck.model.reuse.FunctionMemo`), or None. Checked where it is read: a record that does
        not fit is walked again."""
        data = self._read("functions", key)
        return None if data is None else data.get("memo")

    def put_memo(self, key: str, memo: dict[str, Any]) -> None:
        self._write("functions", key, {"memo": memo})

    def get_run(self, key: str, displays: Mapping[str, str]) -> dict[str, FileResult] | None:
        """Every checked file's result for a project state, by relpath (shown as ``displays[relpath]``)."""
        data = self._read("runs", key)
        if data is None:
            return None
        try:
            results = {rel: result_of(entry, displays[rel]) for rel, entry in data["results"].items()}
            if set(results) != set(displays):
                raise KeyError("other files")
        except (KeyError, TypeError, ValueError, AttributeError):
            self.misses += 1
            return None
        self.hits += 1
        return results

    def put_run(self, key: str, results: Mapping[str, FileResult]) -> None:
        """Store a run's results (by relpath), unless one holds an error its content does not explain."""
        rows = {}
        for rel, result in results.items():
            data = result_data(result)
            if data is None:
                return
            rows[rel] = data
        self._write("runs", key, {"results": rows})


def _prepare(directory: Path) -> None:
    """Create the cache folder with its ``.gitignore`` and ``CACHEDIR.TAG`` (both idempotent)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in ((".gitignore", _GITIGNORE), ("CACHEDIR.TAG", _CACHEDIR_TAG)):
        marker = directory / name
        if not marker.exists():
            _write_atomic(marker, text.encode())


def _write_atomic(target: Path, data: bytes) -> None:
    """Write through a temporary file and `os.replace`: readers never see half a file."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ---------------------------------------------------------------- stat index

_STAT_INDEX = "stats.marshal"
_RACY_NS = 2_000_000_000
"""A stat whose mtime is younger than this is not recorded: the file may change again within the
filesystem's timestamp granularity, keeping its size and mtime."""


class StatIndex:
    """Each project file's (size, ``st_mtime_ns``, digest), by absolute path, in one `marshal` file.

    `digest` answers from the record when the stat matches and reads the file otherwise; the
    caller writes the index back with `save` (once, and only when a record changed)."""

    def __init__(self, directory: Path, enabled: bool = True):
        import time

        self.path = os.path.join(os.fspath(directory), _STAT_INDEX)
        self.enabled = enabled
        self.records: dict[str, tuple[int, int, str]] = {}
        self.changed = False
        self.read = 0
        """Files whose bytes `digest` read (their stat was unknown or differed)."""
        self._recent = time.time_ns() - _RACY_NS
        if not enabled:
            return
        try:
            with open(self.path, "rb") as handle:
                data = marshal.loads(handle.read())
            if isinstance(data, dict) and data.get("v") == CACHE_VERSION and isinstance(data.get("files"), dict):
                self.records = data["files"]
        except (OSError, ValueError, TypeError, EOFError, MemoryError):
            pass  # missing or unreadable: every file is read and hashed once

    def lookup(self, path: str) -> tuple[str | None, os.stat_result | None]:
        """The recorded digest of ``path`` if its stat still matches (else None), and that stat."""
        try:
            st = os.stat(path)
        except OSError:
            return None, None
        record = self.records.get(path)
        if (record is not None and type(record) is tuple and len(record) == 3
                and record[0] == st.st_size and record[1] == st.st_mtime_ns):
            return record[2], st
        return None, st

    def record(self, path: str, st: os.stat_result | None, content_digest: str) -> None:
        """Remember ``content_digest`` for ``path`` at ``st`` (taken before the read), unless too recent."""
        self.read += 1
        if st is None or st.st_mtime_ns >= self._recent:
            self.records.pop(path, None)
            return
        record = (st.st_size, st.st_mtime_ns, content_digest)
        if self.records.get(path) != record:
            self.records[path] = record
            self.changed = True

    def save(self) -> None:
        if not (self.enabled and self.changed):
            return
        try:
            _write_atomic(Path(self.path), marshal.dumps({"v": CACHE_VERSION, "files": self.records}))
        except (OSError, ValueError):
            pass  # costs a re-read next run, never the run
        self.changed = False


# ---------------------------------------------------------------- validated configuration


def _validated_entry(directory: Path, key: str) -> Path:
    return directory / "config" / f"{key}.json"


def read_validated_config(directory: Path, key: str) -> CheckSettings | None:
    """The settings an earlier run validated for the table hashed to ``key``; None if absent or unusable."""
    from layoutcheck.lint.settings import CheckSettings

    try:
        data = json.loads(_validated_entry(directory, key).read_bytes())
        if data.get("v") != CACHE_VERSION or data.get("key") != key:
            raise ValueError("other cache version or key")
        return CheckSettings.from_json(data["settings"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None  # missing, truncated or hand-edited: validate again


def write_validated_config(directory: Path, key: str, settings: CheckSettings) -> None:
    """Store validated ``settings`` under ``key``; a folder that cannot be written is skipped silently."""
    entry = {"v": CACHE_VERSION, "key": key, "settings": settings.to_json()}
    target = _validated_entry(directory, key)
    try:
        _prepare(directory)
        target.parent.mkdir(exist_ok=True)
        _write_atomic(target, json.dumps(entry, separators=(",", ":")).encode())
    except OSError:
        pass  # costs the next run a validation, never this run


def digest(data: bytes) -> str:
    """The content hash a cache key uses."""
    return sha256_hex(data)

