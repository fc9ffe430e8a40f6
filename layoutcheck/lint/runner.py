"""Checks a tree: discovery, the result cache, and a process pool for what is left.

`run` is the one entry point (the CLI and the benchmark call it). Its order
keeps start-up and warm runs cheap:

1. discover the files and read their bytes (no libcst yet);
2. look each file up in the cache; a run whose files all hit never imports
   libcst, pydantic or the rules (a hit implies that an earlier run with the
   same settings fingerprint validated this configuration table and resolved
   this selection without error);
3. get the configuration's validated values (`LoadedConfig.settings`: pydantic
   only for a table no earlier run validated), resolve the rule selection
   (imports the rules) and lint the misses, in
   this process or, past `PARALLEL_THRESHOLD` files, in a process pool whose
   workers receive the rules and settings once, through the pool initializer
   (Fixit re-reads its config and re-imports its rules for every file);
4. store the new results, write fixes, and sort everything by path, line,
   column and rule, so the output never depends on the parallelism.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from layoutcheck.configfile import LoadedConfig, resolve_config
from layoutcheck.lint.discovery import SourceFile, discover
from layoutcheck.lint.findings import INTERNAL, FileError, FileResult, Finding
from layoutcheck.lint.selection import SelectionOverrides
from layoutcheck.lint.sources import MAX_FILE_BYTES, read_source

if TYPE_CHECKING:
    from layoutcheck.lint.cache import ResultCache
    from layoutcheck.lint.rule import LintRule
    from layoutcheck.lint.selection import RuleSelection
    from layoutcheck.lint.settings import CheckSettings, LintSettings

__all__ = ["PARALLEL_THRESHOLD", "RunResult", "RunStats", "run", "select_rules", "worker_count"]

PARALLEL_THRESHOLD = 8
"""With ``jobs`` unset, files to lint beyond which a process pool pays for its start-up."""


@dataclass
class RunStats:
    """What a run did, for tests, ``--verbose``-style reporting and the benchmark."""

    files: int = 0
    """Files found and read."""
    cached: int = 0
    """Results taken from the cache."""
    linted: int = 0
    """Results computed in this run."""
    parsed: int = 0
    """Of those, files libcst parsed (the others the text prefilter cleared)."""
    workers: int = 1
    """Processes that linted: 1 means this process."""
    fixed: int = 0
    """Findings resolved by ``fix``."""


class _LazySelection:
    """The rule selection, resolved (importing the rules) only when a run needs it."""

    def __init__(self, loaded: LoadedConfig, overrides: SelectionOverrides,
                 rules: Sequence[type[LintRule]] | None, use_cache: bool):
        self.loaded, self.overrides, self.explicit = loaded, overrides, rules
        self.use_cache = use_cache
        self._value: RuleSelection | None = None

    @property
    def settings(self) -> CheckSettings:
        """The configuration's validated values (`LoadedConfig.settings`)."""
        return self.loaded.settings(use_cache=self.use_cache)

    def get(self) -> RuleSelection:
        if self._value is None:
            # A bad table fails before the rules (and libcst) are imported.
            self._value = select_rules(self.loaded, self.settings, self.overrides, self.explicit)
        return self._value


def select_rules(
    loaded: LoadedConfig,
    settings: CheckSettings,
    overrides: SelectionOverrides = SelectionOverrides(),
    rules: Sequence[type[LintRule]] | None = None,
) -> RuleSelection:
    """Resolve the configured and command-line selection (imports the rules).

    ``settings`` are ``loaded``'s validated values; ``rules`` replaces the
    registry. Raises `ConfigError` for a selector that names no rule, naming
    the key and file it was written in.
    """
    from layoutcheck.lint.registry import all_rules
    from layoutcheck.lint.selection import resolve_selection
    from layoutcheck.lint.suppressions import UnusedSuppression

    base = tuple(rules) if rules is not None else all_rules()
    universe = tuple(dict.fromkeys((*base, UnusedSuppression)))
    return resolve_selection(
        universe,
        select=settings.select,
        extend_select=settings.extend_select,
        ignore=settings.ignore,
        per_file_ignores=settings.per_file_ignores,
        overrides=overrides,
        describe=loaded.describe,
        always=(UnusedSuppression,) if overrides.report_unused_suppressions else (),
    )


class _LazyRules(Sequence["type[LintRule]"]):
    """The selected rules as a sequence that imports them on first use.

    The output formats take the rules, but only SARIF reads them: a fully
    cached run printing text never pays for importing libcst.
    """

    def __init__(self, selection: _LazySelection):
        self._selection = selection

    @overload
    def __getitem__(self, index: int) -> type[LintRule]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[type[LintRule]]: ...
    def __getitem__(self, index: Any) -> Any:
        return self._selection.get().rules[index]

    def __len__(self) -> int:
        return len(self._selection.get().rules)

    def __iter__(self) -> Iterator[type[LintRule]]:
        return iter(self._selection.get().rules)


@dataclass
class RunResult:
    """Everything one run found, sorted (path, line, column, rule)."""

    files: list[FileResult]
    """One result per checked file, by path."""
    findings: list[Finding]
    errors: list[FileError]
    """Paths that could not be walked and files that could not be checked."""
    stats: RunStats
    rules: Sequence[type[LintRule]]
    """The selected rules (resolved on first use)."""
    warnings: list[str] = field(default_factory=list)

    @property
    def fixed_files(self) -> list[FileResult]:
        """Files a fix changed (written, or for ``--diff`` only computed)."""
        return [f for f in self.files if f.fix is not None]


# ---------------------------------------------------------------- the workers

_Task = tuple[str, "str | None", bytes, tuple[int, ...]]
"""(display path, module name, file bytes, indexes of the rules to run)."""


@dataclass
class _Linter:
    """What every worker needs, sent once through the pool initializer."""

    rules: tuple[type[LintRule], ...]
    settings: LintSettings
    known: frozenset[str]
    fix: bool

    def __call__(self, task: _Task) -> FileResult:
        from layoutcheck.lint.engine import lint_bytes

        display, module_name, data, indexes = task
        try:
            return lint_bytes(data, display, [self.rules[i] for i in indexes], self.settings,
                              module_name=module_name, known_rules=self.known, fix=self.fix)
        except Exception as exc:  # the engine contains rule crashes; this is a bug in it
            return FileResult(display, errors=[FileError(
                display, None, f"internal error: {type(exc).__name__}: {exc}", kind=INTERNAL)])


_WORKER: _Linter | None = None


def _init_worker(linter: _Linter) -> None:
    global _WORKER
    _WORKER = linter
    # Import the engine once per worker, not once per file.
    import layoutcheck.lint.engine  # noqa: F401


def _work(task: _Task) -> FileResult:
    assert _WORKER is not None, "pool initializer did not run"
    return _WORKER(task)


@contextmanager
def _gc_spares_imports() -> Iterator[Callable[[], None]]:
    """Keep the cyclic garbage collector off the modules a lint imports.

    Importing libcst and the rules creates some 100k objects that live as long
    as the process and hold next to no garbage. With the collector on, dozens
    of collections scan them while they load and the older-generation ones scan
    them again while files are parsed: some 6 ms of a one-file run spent on
    nothing. So the collector is off until the caller calls the yielded
    ``imported()``, which freezes what exists (`gc.freeze`: out of the
    collector's sight) and turns it back on. On exit they are unfrozen, so a
    process that runs many checks (the tests, an editor) collects them as
    usual. Does nothing when the collector is off or something else froze objects.
    """
    if not gc.isenabled() or gc.get_freeze_count():
        yield lambda: None
        return
    gc.disable()

    def imported() -> None:
        if not gc.isenabled():
            gc.freeze()
            gc.enable()

    try:
        yield imported
    finally:
        imported()
        gc.unfreeze()


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))  # honours container and taskset limits
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def worker_count(jobs: int | None, tasks: int) -> int:
    """Processes for ``tasks`` files: ``jobs`` if given (0 or None: automatic)."""
    if tasks <= 1:
        return 1
    if jobs:
        return max(1, min(jobs, tasks))
    if tasks <= PARALLEL_THRESHOLD:
        return 1
    return max(1, min(_cpu_count(), tasks))


def _start_method() -> str:
    """``fork`` is cheapest (workers inherit the imported rules), but unsafe once torch
    (and its threads) is loaded: then ``forkserver``, else ``spawn``."""
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    if sys.platform == "linux" and "fork" in methods and "torch" not in sys.modules:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


def _execute(tasks: list[_Task], linter: _Linter, jobs: int | None,
             warnings: list[str]) -> tuple[list[FileResult], int]:
    workers = worker_count(jobs, len(tasks))
    if workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        # A few chunks per worker: small per-task overhead, and no worker idles
        # long behind one big chunk.
        chunksize = max(1, len(tasks) // (workers * 4))
        context = multiprocessing.get_context(_start_method())
        try:
            with ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker,
                                     initargs=(linter,)) as pool:
                return list(pool.map(_work, tasks, chunksize=chunksize)), workers
        except (BrokenProcessPool, OSError) as exc:
            warnings.append(f"process pool failed ({type(exc).__name__}: {exc}); linting in one process")
    return [linter(task) for task in tasks], 1


# ---------------------------------------------------------------- the run


def _settings_fingerprint(loaded: LoadedConfig, overrides: SelectionOverrides,
                          rules: Sequence[type[LintRule]] | None) -> str:
    """Everything besides a file's own bytes and place that can change its result.

    The configuration enters as the table the user wrote, not the validated
    model: a hit then also proves that an earlier run validated this table,
    so a warm run needs neither pydantic nor the rules (see `configfile`).
    """
    from layoutcheck.lint.cache import fingerprint, tool_signature

    if rules is None:
        rule_ids: Any = "registry"  # covered by the rules' source stats in tool_signature
    else:
        rule_ids = []
        for rule in rules:
            module = sys.modules.get(rule.__module__)
            source = getattr(module, "__file__", None)
            stamp = None
            if source:
                try:
                    st = os.stat(source)
                    stamp = (st.st_size, st.st_mtime_ns)
                except OSError:
                    pass
            rule_ids.append([rule.__module__, rule.__qualname__, rule.code, rule.name, stamp])
    return fingerprint({
        "tool": tool_signature(),
        "config": loaded.table,
        "overrides": [overrides.select, overrides.extend_select, overrides.ignore,
                      overrides.report_unused_suppressions],
        "rules": rule_ids,
    })


def _write_fix(path: str, result: FileResult) -> bytes | None:
    """Write a fixed file back in its encoding; on failure, record an error on ``result``."""
    assert result.fix is not None
    try:
        data = result.fix.fixed.encode(result.fix.encoding)
        with open(path, "wb") as handle:
            handle.write(data)
        return data
    except (OSError, UnicodeEncodeError) as exc:
        result.errors.append(FileError(result.path, None, f"cannot write the fix: {exc}", kind=INTERNAL))
        return None


def run(
    paths: Sequence[str | os.PathLike[str]] = (".",),
    *,
    loaded: LoadedConfig | None = None,
    overrides: SelectionOverrides = SelectionOverrides(),
    rules: Sequence[type[LintRule]] | None = None,
    jobs: int | None = None,
    use_cache: bool = True,
    fix: bool = False,
    write_fixes: bool = True,
    max_file_bytes: int = MAX_FILE_BYTES,
    cwd: str | os.PathLike[str] | None = None,
    force_exclude: bool = False,
) -> RunResult:
    """Check ``paths`` and return every finding and error, sorted.

    ``loaded`` is the configuration (found from ``paths`` when None);
    ``overrides`` the command-line selection; ``rules`` replaces the rule
    registry (tests use it for rules of their own); ``jobs`` the worker
    processes (None or 0: automatic); ``fix`` applies safe fixes and, with
    ``write_fixes`` (off for ``--diff``), writes them back; ``force_exclude``
    applies ``exclude`` to the named paths too (`discover`). Raises
    `ConfigError` for a bad configuration or an unknown rule.
    """
    base = Path(cwd) if cwd is not None else Path.cwd()
    if loaded is None:
        loaded = resolve_config(paths, cwd=base)
    selection = _LazySelection(loaded, overrides, rules, use_cache)
    stats = RunStats()
    warnings: list[str] = []

    found = discover(paths, root=loaded.root, exclude=loaded.exclude,
                     skip_dirs=[loaded.cache_dir], cwd=base, force_exclude=force_exclude)
    results: dict[str, FileResult] = {}
    pending: list[tuple[SourceFile, bytes, str | None]] = []  # with the cache key, when caching
    cache: ResultCache | None = None
    if use_cache:  # hashlib, json and the cache stay unimported under --no-cache
        from layoutcheck.lint.cache import ResultCache, digest

        cache = ResultCache(loaded.cache_dir, _settings_fingerprint(loaded, overrides, rules))
    for source in found.files:
        data = read_source(source.path, source.display, max_file_bytes)
        if isinstance(data, FileError):
            results[source.display] = FileResult(source.display, errors=[data])
            continue
        stats.files += 1
        key = None
        if cache is not None:
            key = cache.key(source.relpath, source.module_name, digest(data))
            hit = cache.get(key, source.display)
            # --fix must redo a file whose cached findings it could fix.
            if hit is not None and not (fix and any(f.fixable for f in hit.findings)):
                results[source.display] = hit
                stats.cached += 1
                continue
        pending.append((source, data, key))

    if pending or not found.files:
        with _gc_spares_imports() as imported:
            # Imports libcst, the rules, the engine (and pydantic for a table no run validated).
            chosen = selection.get()  # validates the selection even when there is nothing to lint
            import layoutcheck.lint.engine  # noqa: F401

            imported()
            index = {rule: i for i, rule in enumerate(chosen.rules)}
            tasks: list[_Task] = [
                (source.display, source.module_name, data,
                 tuple(index[r] for r in chosen.for_path(source.relpath)))
                for source, data, _ in pending
            ]
            linter = _Linter(chosen.rules, selection.settings, chosen.known_names(), fix)
            outcomes, stats.workers = _execute(tasks, linter, jobs, warnings)
        if cache is not None:
            cache.prepare()
            if cache.warning:
                warnings.append(cache.warning)
        for (source, _data, key), result in zip(pending, outcomes):
            results[source.display] = result
            stats.linted += 1
            stats.parsed += result.parsed
            if result.fix is not None:
                stats.fixed += result.fix.applied
                if write_fixes:
                    written = _write_fix(source.path, result)
                    if written is not None and cache is not None:
                        # Cache what is now on disk: the next run starts warm.
                        cache.put(cache.key(source.relpath, source.module_name, digest(written)), result)
            elif cache is not None and key is not None:
                cache.put(key, result)

    files = [results[name] for name in sorted(results)]
    findings = sorted(f for r in files for f in r.findings)
    errors = sorted([*found.errors, *(e for r in files for e in r.errors)],
                    key=lambda e: (e.path, e.line or 0, e.column or 0, e.message))
    return RunResult(files, findings, errors, stats, _LazyRules(selection), warnings)
