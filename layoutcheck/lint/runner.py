"""Checks a project: discovery, the cache, a process pool for the facts, the project phase.

`run` is the one entry point (the CLI and the benchmark call it). Its order
keeps start-up and warm runs cheap:

1. discover the checked files, and the project's other files (the
   top-level package each named path belongs to, so a one-file pre-commit
   run still sees the owners and helpers around it), and read their bytes
   (no parser yet);
2. look the project state up in the cache (one run entry keyed by every
   file's content): a hit gives every result, and never imports an AST
   walker, libcst, pydantic or the rules (a hit implies that an earlier run
   with the same settings fingerprint validated this configuration table and
   resolved this selection without error);
3. otherwise get the configuration's validated values (pydantic only for a
   table no earlier run validated), resolve the rule selection, and take each
   file's facts from its file entry, extracting the misses (`ast`, one
   traversal each) in this process or, past `PARALLEL_THRESHOLD` files, in a
   process pool whose workers receive the rules and settings once, through
   the pool initializer; the other files of the project are read for context
   only when their text mentions what the model needs;
4. run the project phase and the rules' queries (`layoutcheck.lint.engine`),
   write fixes, store the new entries, and sort everything by path, line,
   column and rule, so the output never depends on the parallelism.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from layoutcheck.configfile import LoadedConfig, resolve_config
from layoutcheck.lint.discovery import SourceFile, discover
from layoutcheck.lint.findings import INTERNAL, INVALID_INPUT, FileError, FileResult, Finding, FixOutcome
from layoutcheck.globs import any_match
from layoutcheck.lint.selection import SelectionOverrides
from layoutcheck.lint.sources import MAX_FILE_BYTES, read_source

if TYPE_CHECKING:
    from layoutcheck.lint.cache import ResultCache
    from layoutcheck.lint.replay import InputLog
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
    """Checked files whose results (or facts) came from the cache."""
    linted: int = 0
    """Checked files read and judged afresh in this run (their facts were not in the cache)."""
    parsed: int = 0
    """Of those, files parsed (the others the text prefilter cleared)."""
    workers: int = 1
    """Processes that linted: 1 means this process."""
    fixed: int = 0
    """Findings resolved by ``fix``."""
    unsafe_hidden: int = 0
    """Findings left with an unsafe fix that ``fix`` did not apply (``unsafe_fixes`` would)."""
    noqa_added: int = 0
    """``# noqa`` directives written by ``add_noqa``."""
    functions_reused: int = 0
    """Module-level functions of a one-file run's file whose facts its previous such run had found
    (`layoutcheck.model.reuse`): not walked again."""
    read: int = 0
    """Files whose bytes were read to find their cache keys: their stat was not the one the cache
    recorded (the others' recorded digest stood; 0 under ``--no-cache``, which reads all)."""


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
        preview=settings.preview,
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
    no_python_files: bool = False
    """The paths hold no Python file at all (none excluded either, nothing that failed): ruff's "No Python files
    found", a warning, and exit 1 in ``layoutcheck check`` (ruff exits 0)."""
    project: Any = None
    """The project model (`layoutcheck.model.project.Project`), when the run was asked to keep it."""

    @property
    def fixed_files(self) -> list[FileResult]:
        """Files a fix changed (written, or for ``--diff`` only computed)."""
        return [f for f in self.files if f.fix is not None]


# ---------------------------------------------------------------- the workers

_Task = tuple[str, "str | None", bytes, bool, bool, tuple[int, ...]]
"""(display path, module name, file bytes, checked, light (a test), indexes of the rules to run on it)."""


@dataclass
class _Reader:
    """Turns a file's bytes into its facts (and its syntax rules' findings): sent once to each worker."""

    rules: tuple[type[LintRule], ...]
    settings: LintSettings
    memo: Any = None
    """The function records of the one file a one-file run extracts here (`layoutcheck.model.reuse`)."""

    def __call__(self, task: _Task) -> Any:
        from layoutcheck.lint.engine import ProjectFile, file_facts, run_local
        from layoutcheck.lint.sources import SourceDecodeError, decode_source

        display, module, data, checked, light, indexes = task
        try:
            try:
                source, _ = decode_source(data)
            except SourceDecodeError as exc:
                return FileError(display, exc.line, str(exc), column=exc.column)
            rules = [self.rules[i] for i in indexes]
            facts = file_facts(source, self.settings, rules if checked else self.rules, checked=checked, light=light,
                               memo=self.memo)
            local = None
            if checked:
                file = ProjectFile(display, display, module, source, facts, rules=tuple(rules))
                local = run_local(file, self.settings)
            return facts, local
        except Exception as exc:  # the engine contains rule crashes; this is a bug in it
            return FileError(display, None, f"internal error: {type(exc).__name__}: {exc}", kind=INTERNAL)


_WORKER: _Reader | None = None


def _init_worker(reader: _Reader) -> None:
    global _WORKER
    _WORKER = reader
    # The collector stays off, as in the parent's `_gc_paused` (a forked worker inherits it off; a
    # spawned one turns it off): a walked tree goes by reference counting when its file is done (no
    # node of the model refers back to an ancestor), and with the collector on, its passes over
    # every tree under construction cost the workers a fifth of their time (measured on verl: 5.4 s
    # of CPU for the run with it on, 4.3 s off).
    gc.disable()
    # Import the extractor once per worker, not once per file.
    import layoutcheck.model.extract  # noqa: F401


def _work(task: _Task) -> Any:
    assert _WORKER is not None, "pool initializer did not run"
    result = _WORKER(task)
    if isinstance(result, tuple):
        result = (_encoded(result[0]), result[1])
    return _young(result)


def _encoded(facts: Any) -> Any:
    """``facts`` as the cache keeps them (`layoutcheck.model.facts.cache_data`, `marshal` bytes), to
    send back to the run's process: `marshal` reads them back in about half the time `pickle`
    takes for the dataclasses (the workers' encoding costs about what pickling did), and the
    run's process writes the same form to the cache without encoding the facts again (verl:
    unpickling 0.05 s of the run's CPU; decoding 0.026 s; the cache's encoding 0.08 s saved).
    Facts `marshal` cannot write (not plain values: a bug) go as they are, pickled."""
    import marshal

    from layoutcheck.model.facts import cache_data

    try:
        return marshal.dumps(cache_data(facts))
    except ValueError:
        return facts


def _decoded(facts: Any) -> tuple[Any, bytes | None]:
    """The facts a worker sent (`_encoded`), and their encoded form when they came encoded."""
    if type(facts) is not bytes:
        return facts, None
    import marshal

    from layoutcheck.model.facts import from_cache_data

    return from_cache_data(marshal.loads(facts)), facts


def _young(result: Any) -> Any:
    """``result``, after collecting the cycles the file's walk left (``ast.dump``'s closures): the
    objects made since the last file only, so the cost is the file's, never the worker's."""
    gc.collect(0)
    return result


@contextmanager
def _gc_paused() -> Iterator[Callable[[], None]]:
    """Keep the cyclic garbage collector off while a lint builds what it keeps.

    Importing the rules and the model, the facts the workers send back (a
    million small objects on Megatron-LM) and the project model all live
    until the run ends and hold next to no garbage. With the collector on,
    every full collection scans them all again: most of the time spent
    unpickling the workers' facts (measured: 1.0 s with it on, 0.2 s off, for
    Megatron-LM's 611 files) goes to collections that find nothing. So the
    collector is off until the caller calls the yielded ``resume()`` (before
    fixes, which make garbage), which freezes what exists (`gc.freeze`: out of
    the collector's sight) and turns it back on. On exit they are unfrozen, so
    a process that runs many checks (the tests, an editor) collects them as
    usual. Does nothing when the collector is off or something else froze
    objects. The trees walked meanwhile, here or in the workers (`_init_worker`),
    go by reference counting: they hold no cycle.
    """
    if not gc.isenabled() or gc.get_freeze_count():
        yield lambda: None
        return
    gc.disable()

    def resume() -> None:
        if not gc.isenabled():
            gc.freeze()
            gc.enable()

    try:
        yield resume
    finally:
        resume()
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


class _Workers:
    """The run's worker processes, alive for the whole run: they read the files' facts first, then
    extract those the project phase asks for (`analyse_project`'s ``extract_many``), which would
    otherwise be read one after another in this process while the workers sit idle.

    With one worker (or when the pool cannot start or breaks) everything runs in this process.
    """

    def __init__(self, reader: _Reader, count: int, warnings: list[str]):
        self.reader, self.count, self.warnings = reader, count, warnings
        self._pool: Any = None

    def __enter__(self) -> _Workers:
        if self.count > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            method = _start_method()
            if method == "fork":
                # Imported once here, the extractor is every forked worker's already: each worker
                # importing it after the fork (`_init_worker`) costs the run that import's CPU once
                # per worker (this process reads the facts with most of the same modules anyway).
                import layoutcheck.model.extract  # noqa: F401
            context = multiprocessing.get_context(method)
            try:
                self._pool = ProcessPoolExecutor(self.count, mp_context=context, initializer=_init_worker,
                                                 initargs=(self.reader,))
            except OSError as exc:
                self._failed(exc)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def _failed(self, exc: BaseException) -> None:
        self.warnings.append(f"process pool failed ({type(exc).__name__}: {exc}); linting in one process")
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool, self.count = None, 1

    def _map(self, function: Callable[[Any], Any], items: Sequence[Any], sizes: Sequence[int]) -> list[Any] | None:
        """``function`` over ``items`` in the pool, the largest items first (sizes: their lengths), in
        small chunks so no worker idles behind a big one; results in the order of ``items``.
        None when there is no pool (or it broke): the caller runs them here."""
        if self._pool is None or len(items) <= 1:
            return None
        from concurrent.futures.process import BrokenProcessPool

        order = sorted(range(len(items)), key=lambda i: -sizes[i])
        chunksize = max(1, len(items) // (self.count * 16))
        try:
            done = list(self._pool.map(function, [items[i] for i in order], chunksize=chunksize))
        except (BrokenProcessPool, OSError) as exc:
            self._failed(exc)
            return None
        out: list[Any] = [None] * len(items)
        for i, result in zip(order, done):
            out[i] = result
        return out

    def read(self, tasks: list[_Task]) -> list[Any]:
        """Each task's facts, local findings and the facts' cache form when the workers sent it
        (`_encoded`; else None), or its `FileError`, as `_Reader` gives them."""
        found = self._map(_work, tasks, [len(task[2]) for task in tasks])
        if found is None:
            found = [self.reader(task) for task in tasks]
        return [(*_decoded(result[0]), result[1]) if isinstance(result, tuple) else result for result in found]

    def extract(self, sources: Sequence[str]) -> list[Any]:
        """The facts of each text (`layoutcheck.model.extract.extract`), as the project phase asks."""
        found = self._map(_extract, sources, [len(text) for text in sources])
        if found is not None:
            return [_decoded(facts)[0] for facts in found]
        from layoutcheck.model.extract import extract

        return [extract(text, self.reader.settings) for text in sources]


def _extract(source: str) -> Any:
    assert _WORKER is not None, "pool initializer did not run"
    from layoutcheck.model.extract import extract

    return _young(_encoded(extract(source, _WORKER.settings)))


# ---------------------------------------------------------------- the run


def _settings_fingerprint(loaded: LoadedConfig, overrides: SelectionOverrides,
                          rules: Sequence[type[LintRule]] | None) -> str:
    """Everything besides the files' own bytes and places that can change a result.

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
                      overrides.report_unused_suppressions, overrides.preview],
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


def _context_roots(paths: Sequence[str | os.PathLike[str]], base: Path, log: InputLog | None = None) -> list[str]:
    """Where the project around each named path is: its top-level package folder, or for a
    file outside any package, its own folder.

    A one-file pre-commit run of ``pkg/sub/mod.py`` lints it in the project
    of ``pkg/``: the owners, helpers and callers around it count.
    """
    tops: list[str] = []
    is_file = log.is_file if log is not None else os.path.isfile
    for raw in paths or (".",):
        path = os.path.normpath(os.path.join(base, os.fspath(raw)))
        is_dir = os.path.isdir(path)  # the named path itself: discovery records it
        if not is_dir and not is_file(path):
            # Discovery reports a missing path; its parent (`/` for `/nope`) is no project.
            continue
        folder = path if is_dir else os.path.dirname(path)
        top = None
        while is_file(os.path.join(folder, "__init__.py")):
            top = folder
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
        if top is None and not is_dir:
            top = folder
        if top is not None and top not in tops:
            tops.append(top)
    return tops


@dataclass
class _Entry:
    """One project file during a run."""

    source: SourceFile
    data: bytes | None
    """The file's bytes; None until `load` when the cache's stat index vouched for ``digest``."""
    digest: str
    checked: bool
    text: str | None = None
    facts: Any = None
    local: Any = None
    key: str | None = None
    from_cache: bool = False
    encoded: bytes | None = None
    """``facts`` as the worker sent them (`_encoded`): the cache's form, written as it is."""
    light: bool = False
    """The file is under `test-paths` (and tests are not linted): imports and syntax only."""

    def load(self, max_file_bytes: int) -> bytes | FileError:
        """The file's bytes, read now if the stat index spared the read."""
        if self.data is None:
            data = read_source(self.source.path, self.source.display, max_file_bytes)
            if isinstance(data, FileError):
                return data
            self.data = data
        return self.data

    def facts_data(self, facts: Any) -> Any:
        """``facts`` (this file's, after the project phase) as the cache writes them: the workers'
        encoding when they are still the facts the workers sent."""
        if self.encoded is not None and facts is self.facts:
            import marshal

            return marshal.loads(self.encoded)
        from layoutcheck.model.facts import cache_data

        return cache_data(facts)


def run(
    paths: Sequence[str | os.PathLike[str]] = (".",),
    *,
    loaded: LoadedConfig | None = None,
    overrides: SelectionOverrides = SelectionOverrides(),
    rules: Sequence[type[LintRule]] | None = None,
    jobs: int | None = None,
    use_cache: bool = True,
    fix: bool = False,
    unsafe_fixes: bool = False,
    write_fixes: bool = True,
    add_noqa: bool = False,
    max_file_bytes: int = MAX_FILE_BYTES,
    cwd: str | os.PathLike[str] | None = None,
    force_exclude: bool = False,
    keep_project: bool = False,
    log: InputLog | None = None,
    respect_gitignore: bool | None = None,
) -> RunResult:
    """Check ``paths`` and return every finding and error, sorted.

    ``loaded`` is the configuration (found from ``paths`` when None);
    ``overrides`` the command-line selection; ``rules`` replaces the rule
    registry (tests use it for rules of their own); ``jobs`` the worker
    processes (None or 0: automatic); ``fix`` applies safe fixes (and unsafe
    ones with ``unsafe_fixes``) and, with ``write_fixes`` (off for ``--diff``),
    writes them back; ``add_noqa`` writes a ``# noqa: CODE`` comment for every
    finding instead (`layoutcheck.lint.noqa`); ``force_exclude``
    applies ``exclude`` to the named paths too (`discover`); ``keep_project``
    builds the project model even when the cache holds every result, and keeps
    it in `RunResult.project` (``layoutcheck model``); ``log`` records
    every file read, folder listed and name tested, for a later
    `layoutcheck.lint.replay`; ``respect_gitignore`` overrides the
    configuration's ``respect-gitignore`` (None: as configured). Raises `ConfigError` for a bad configuration
    or an unknown rule.
    """
    from layoutcheck.digests import sha256_hex

    base = Path(cwd) if cwd is not None else Path.cwd()
    if loaded is None:
        loaded = resolve_config(paths, cwd=base)
    selection = _LazySelection(loaded, overrides, rules, use_cache)
    stats = RunStats()
    warnings: list[str] = []

    cache: ResultCache | None = None
    if use_cache:  # json and the cache stay unimported under --no-cache
        from layoutcheck.lint.cache import ResultCache

        cache = ResultCache(loaded.cache_dir, _settings_fingerprint(loaded, overrides, rules))
        # Before discovery lists the folder that holds it: created later, it would be missing from
        # the listing this run records (`replay`), and the next run could not replay.
        cache.prepare()
    gitignore = loaded.respect_gitignore if respect_gitignore is None else respect_gitignore
    found = discover(paths, root=loaded.root, exclude=loaded.exclude,
                     skip_dirs=[loaded.cache_dir], cwd=base, force_exclude=force_exclude, log=log,
                     respect_gitignore=gitignore)
    results: dict[str, FileResult] = {}
    entries: list[_Entry] = []
    stat_index = None
    if cache is not None:
        from layoutcheck.lint.cache import StatIndex

        stat_index = StatIndex(loaded.cache_dir, cache.enabled)

    def _read(source: SourceFile, checked: bool) -> _Entry | FileError:
        # The stat index spares the read (and the hash) of a file whose size and mtime match its
        # record: a one-file run would otherwise read the whole project to find its cache keys.
        st = None
        if stat_index is not None:
            known, st = stat_index.lookup(source.path)
            if known is not None and st is not None and st.st_size <= max_file_bytes:
                return _Entry(source, None, known, checked)
        data = read_source(source.path, source.display, max_file_bytes)
        if isinstance(data, FileError):
            return data
        entry = _Entry(source, data, sha256_hex(data), checked)
        if stat_index is not None:
            stat_index.record(source.path, st, entry.digest)
        return entry

    for source in found.files:
        if log is not None:
            log.probe(source.path)
        read = _read(source, True)
        if isinstance(read, FileError):
            results[source.display] = FileResult(source.display, errors=[read])
            continue
        stats.files += 1
        entries.append(read)
    checked_paths = {e.source.path for e in entries} | {s.path for s in found.files}
    roots = _context_roots(paths, base, log)
    if roots:
        context = discover(roots, root=loaded.root, exclude=loaded.exclude, skip_dirs=[loaded.cache_dir],
                           cwd=base, force_exclude=True, log=log, respect_gitignore=gitignore)
        for source in context.files:
            if source.path in checked_paths:
                continue
            if log is not None:
                log.probe(source.path)
            read = _read(source, False)
            if not isinstance(read, FileError):
                entries.append(read)
    if stat_index is not None:
        stat_index.save()
        stats.read = stat_index.read

    run_key = None
    if cache is not None:
        run_key = cache.run_key([
            (e.source.relpath, e.source.module_name or "", e.source.display, e.digest, "c" if e.checked else "x")
            for e in entries
        ])
        displays = {e.source.relpath: e.source.display for e in entries if e.checked}
        hit = None if keep_project else cache.get_run(run_key, displays)
        # --fix must redo a project whose cached findings may have fixes; --add-noqa needs the texts.
        if hit is not None and not ((fix or add_noqa) and any(f.fix is not None for r in hit.values()
                                                                for f in r.findings)):
            for result in hit.values():
                results[result.path] = result
            stats.cached = len(hit)
            return _result(results, found, stats, selection, warnings)

    with _gc_paused() as resume, ExitStack() as stack:
        # Imports the rules and the engine (and pydantic for a table no run validated).
        chosen = selection.get()  # validates the selection even when there is nothing to lint
        from layoutcheck.lint.engine import ProjectFile, analyse_project
        from layoutcheck.lint.sources import SourceDecodeError, decode_source

        settings = selection.settings
        index = {rule: i for i, rule in enumerate(chosen.rules)}
        tests = settings.test_paths if not settings.lint_tests else ()
        kept: list[_Entry] = []
        for entry in entries:
            # Each path matched against `test-paths` once (a one-file run has hundreds of context files).
            entry.light = bool(tests) and any_match(tests, entry.source.relpath) is not None
            if not entry.checked and entry.light:
                # Context: tests are not the trainer; the others are read (their facts are only
                # extracted when their text mentions what the model needs, or it asks for them).
                continue
            kept.append(entry)
        entries = kept
        tasks: list[_Task] = []
        pending: list[_Entry] = []
        failed: set[str] = set()
        for entry in entries:
            if cache is not None:
                entry.key = cache.key(entry.source.relpath, entry.source.module_name, entry.digest)
                stored = cache.get_file(entry.key)
                if stored is not None and fix and any(row[7] for row in stored["findings"]):
                    stored = None  # --fix must redo a file whose cached findings it could fix
                if stored is not None and stored["facts"] is not None:
                    try:
                        entry.facts = stored["facts"]
                        if entry.checked:
                            from layoutcheck.lint.cache import errors_of, findings_of

                            entry.local = (findings_of(stored["findings"], entry.source.display),
                                           errors_of(stored["errors"], entry.source.display), stored["parsed"])
                        entry.from_cache = True
                        stats.cached += entry.checked
                        continue
                    except (KeyError, TypeError, ValueError):
                        entry.facts = None
            data = entry.load(max_file_bytes)
            if isinstance(data, FileError):  # gone or unreadable since its stat was taken
                if entry.checked:
                    results[entry.source.display] = FileResult(entry.source.display, errors=[data])
                    failed.add(entry.source.path)
                continue
            rule_indexes = tuple(index[r] for r in chosen.for_path(entry.source.relpath)) if entry.checked else ()
            tasks.append((entry.source.display, entry.source.module_name, data, entry.checked, entry.light,
                          rule_indexes))
            pending.append(entry)
        memo, memo_key = None, None
        if cache is not None and cache.enabled and len(tasks) == 1 and pending[0].checked:
            # A one-file run (a pre-commit hook): the file's unchanged leading functions keep the facts its
            # last such run found (`layoutcheck.model.reuse`); a run of many files walks them all.
            from layoutcheck.model.reuse import FunctionMemo

            memo_key = cache.memo_key(pending[0].source.relpath, pending[0].source.module_name)
            memo = FunctionMemo(cache.get_memo(memo_key))
        reader = _Reader(chosen.rules, settings, memo)
        workers = stack.enter_context(_Workers(reader, worker_count(jobs, len(tasks)), warnings))
        outcomes = workers.read(tasks)
        if memo is not None and memo_key is not None and cache is not None:
            kept = memo.entry()
            stats.functions_reused = memo.reused
            if kept is not None:
                cache.put_memo(memo_key, kept)
        stats.workers = workers.count
        for entry, outcome in zip(pending, outcomes):
            if isinstance(outcome, FileError):
                if entry.checked:
                    results[entry.source.display] = FileResult(entry.source.display, errors=[outcome])
                    failed.add(entry.source.path)
                continue
            entry.facts, entry.encoded, entry.local = outcome
            if entry.checked:
                stats.linted += 1
                stats.parsed += bool(entry.facts.extracted or (entry.local and entry.local[2]))
        if cache is not None and cache.warning:
            warnings.append(cache.warning)
        project_files: list[ProjectFile] = []
        for entry in entries:
            if entry.facts is None or entry.source.path in failed:
                continue
            if entry.text is None and (entry.checked or not entry.facts.extracted):
                # A context file's text is needed only when its facts are not all there (the
                # project may ask for them); a checked file's always (suppressions).
                data = entry.load(max_file_bytes)
                if isinstance(data, FileError):
                    if entry.checked:
                        results[entry.source.display] = FileResult(entry.source.display, errors=[data])
                    continue
                try:
                    entry.text, _ = decode_source(data)
                except SourceDecodeError:
                    if not entry.checked:
                        continue
                    raise
            project_files.append(ProjectFile(
                entry.source.display, entry.source.relpath, entry.source.module_name, entry.text, entry.facts,
                checked=entry.checked,
                rules=tuple(chosen.for_path(entry.source.relpath)) if entry.checked else (),
                is_package=os.path.basename(entry.source.path).startswith("__init__."),
                local=entry.local,
                light=entry.light,
            ))
        analyses, project = analyse_project(project_files, settings, known_rules=chosen.known_names(),
                                            all_rules=chosen.rules, extract_many=workers.extract)
        stack.close()  # the workers are done: the rest is this process's
        resume()  # what the run keeps is built; fixes make garbage
        by_display = {e.source.display: e for e in entries}
        for file in project_files:
            if not file.checked:
                continue
            entry = by_display[file.display]
            result = analyses[file.display].result()
            result.cached = entry.from_cache
            results[file.display] = result
            if cache is not None and entry.key is not None and not entry.from_cache and file.local is not None:
                local_errors = file.local[1]
                if all(e.kind == INVALID_INPUT for e in local_errors) and not any(
                    e.kind == INTERNAL for e in result.errors
                ):
                    from layoutcheck.lint.cache import error_row, finding_row

                    cache.put_file(entry.key, {
                        "facts": entry.facts_data(file.facts),
                        "findings": [finding_row(f) for f in file.local[0]],
                        "errors": [error_row(e) for e in local_errors],
                        "parsed": bool(file.local[2]),
                    })
        for file in project_files:
            if file.checked:
                continue
            entry = by_display[file.display]
            if cache is not None and entry.key is not None and not entry.from_cache:
                cache.put_file(entry.key, {"facts": entry.facts_data(file.facts), "findings": [], "errors": [],
                                           "parsed": False})
        if fix:
            _apply_fixes(project_files, analyses, results, chosen, settings, stats, write_fixes, by_display, cache,
                         unsafe_fixes)
        elif add_noqa:
            _add_noqa(project_files, results, stats, by_display)
        elif cache is not None and run_key is not None and results:
            checked = {e.source.relpath: results[e.source.display] for e in entries
                       if e.checked and e.source.display in results}
            if len(checked) == sum(e.checked for e in entries):
                cache.put_run(run_key, checked)
    out = _result(results, found, stats, selection, warnings)
    out.project = project if keep_project else None
    return out


def _apply_fixes(project_files: list[Any], analyses: dict[str, Any], results: dict[str, FileResult],
                 chosen: RuleSelection, settings: LintSettings, stats: RunStats, write_fixes: bool,
                 by_display: dict[str, _Entry], cache: ResultCache | None, unsafe: bool) -> None:
    """Fix the project pass by pass (`layoutcheck.lint.fix`), then write the changed files."""
    from layoutcheck.lint.fix import fix_project

    done = fix_project(project_files, analyses, settings, unsafe=unsafe, known_rules=chosen.known_names(),
                       all_rules=chosen.rules)
    stats.unsafe_hidden = done.hidden
    for file in project_files:
        if not file.checked:
            continue
        result = done.analyses[file.display].result()
        result.cached = results[file.display].cached if file.display in results else False
        result.errors.extend(done.errors.get(file.display, []))
        outcome = done.outcomes.get(file.display)
        if outcome is not None:
            entry = by_display[file.display]
            result.fix = replace(outcome, encoding=_encoding(entry.data))
            result.cached = False
            stats.fixed += outcome.applied
            if write_fixes:
                written = _write_fix(entry.source.path, result)
                if written is not None and cache is not None and file.local is not None and file.facts is not None:
                    # Cache what is now on disk: the next run starts warm.
                    from layoutcheck.digests import sha256_hex

                    from layoutcheck.lint.cache import error_row, finding_row
                    from layoutcheck.model.facts import cache_data

                    key = cache.key(entry.source.relpath, entry.source.module_name, sha256_hex(written))
                    cache.put_file(key, {
                        "facts": cache_data(file.facts), "findings": [finding_row(f) for f in file.local[0]],
                        "errors": [error_row(e) for e in file.local[1]], "parsed": bool(file.local[2]),
                    })
        results[file.display] = result


def _add_noqa(project_files: list[Any], results: dict[str, FileResult], stats: RunStats,
              by_display: dict[str, _Entry]) -> None:
    """Write ``# noqa: CODE`` for each finding of each checked file (`layoutcheck.lint.noqa.add_noqa`)."""
    from layoutcheck.lint.noqa import add_noqa

    for file in project_files:
        result = results.get(file.display)
        if not file.checked or result is None or not result.findings or file.source is None:
            continue
        if any(e.line is not None for e in result.errors):
            continue  # a syntax error: nothing to anchor a comment to
        text, count = add_noqa(file.source, result.findings)
        if not count:
            continue
        entry = by_display[file.display]
        outcome = FixOutcome(file.source, text, _encoding(entry.data), count)
        result.fix = outcome
        if _write_fix(entry.source.path, result) is not None:
            stats.noqa_added += count
        result.fix = None


def _encoding(data: bytes) -> str:
    from layoutcheck.lint.sources import decode_source

    return decode_source(data)[1]


def _result(results: dict[str, FileResult], found: Any, stats: RunStats, selection: _LazySelection,
            warnings: list[str]) -> RunResult:
    files = [results[name] for name in sorted(results)]
    findings = sorted(f for r in files for f in r.findings)
    errors = sorted([*found.errors, *(e for r in files for e in r.errors)],
                    key=lambda e: (e.path, e.line or 0, e.column or 0, e.message))
    nothing = not found.files and not found.errors and not found.excluded
    if nothing:
        warnings.append("no Python files found under the given path(s)")
    return RunResult(files, findings, errors, stats, _LazyRules(selection), warnings, no_python_files=nothing)
