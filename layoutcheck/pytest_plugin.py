"""The pytest plugin: a project's CPU tests run with the layout checks on, and the linter's findings as test items.

Registered under the ``pytest11`` entry point, so it is loaded by every
pytest run in an environment that has layoutcheck; ``-p no:layoutcheck``
leaves it out. Loading it imports nothing beyond pytest and
``layoutcheck``'s two pure-Python modules: the runtime (and torch, through
the code it hooks) is imported only when the checks are switched on, libcst
only when ``--layoutcheck-lint`` asks for the linter.

Switching on (marker > command line > environment > ini, as pytest-timeout
orders its sources):

* ``--layoutcheck`` / ``--no-layoutcheck``; ``--layoutcheck-mode MODE``
  (switches on too); ``--layoutcheck-config FILE``;
* ``LAYOUTCHECK=raise|warn|record`` (``1``: on, ``0``: off) and
  ``LAYOUTCHECK_CONFIG`` in the environment;
* ini keys ``layoutcheck = true``, ``layoutcheck_mode``, ``layoutcheck_config``;
* ``@pytest.mark.layoutcheck(...)`` for one test.

When on, the hooks of ``[tool.layoutcheck.runtime]`` are installed in
``pytest_load_initial_conftests`` (before any conftest is imported) through
`layoutcheck.runtime.activation.session.activate`; a session that the environment
already activated at interpreter start is reused. Each test phase records
the violations it produced; in ``raise`` mode a test with any fails with
their messages, even when the code under test swallowed the `LayoutError`.
``warn`` and ``record`` list them in the terminal summary without failing.
The summary also gives the run's padding figures from the run report, merged
over pytest-xdist workers.

``--layoutcheck-lint`` runs the linter once over the project (or
``layoutcheck_lint_paths``) and adds one failing item per file with
findings.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections import Counter
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

__all__ = ["HELP", "LayoutFixture", "LintFile", "LintItem", "lint_files", "merge_figures", "summary_lines"]

HELP = {
    "enable": "Switch layoutcheck's runtime checks on: install the hooks of [tool.layoutcheck.runtime] before "
    "conftest files are imported; in raise mode a layout violation fails the test it happened in.",
    "disable": "Switch layoutcheck's runtime checks off (beats the ini key and LAYOUTCHECK).",
    "mode": "What a violation does during a test: raise (a LayoutError, and the test fails), warn (a "
    "LayoutWarning) or record (listed in the summary only). Default: raise.",
    "config": "The pyproject.toml or layoutcheck.toml with the [tool.layoutcheck] table (default: "
    "LAYOUTCHECK_CONFIG, else the nearest one above the rootdir).",
    "lint": "Run the layoutcheck linter on the project's files: each file with findings becomes a failing test item.",
    "lint_paths": "Files and folders the linter checks under --layoutcheck-lint (default: the rootdir).",
}
"""Help texts, each shared by a command-line option and its ini key."""

MARKER = (
    "layoutcheck(enabled=True, mode=None): switch layoutcheck's runtime checks on or off for this test, or "
    "give its mode (raise, warn, record); positional `False` or `'record'` work too"
)

_MODES = ("raise", "warn", "record")
_PACKAGE = str(Path(__file__).resolve().parent) + os.sep
"""layoutcheck's own files (a failure hides their frames)."""
_STATE = pytest.StashKey["_State"]()
_TEST = pytest.StashKey["_TestRun"]()


# ---------------------------------------------------------------- settings and where they came from


@dataclasses.dataclass(frozen=True)
class _Settings:
    """The plugin's settings for this run, each with the source it came from (for error messages)."""

    enabled: bool
    enabled_from: str
    mode: str
    mode_from: str
    config: str | None
    config_from: str
    lint: bool
    lint_paths: tuple[Path, ...]


def _ini_source(config: pytest.Config, key: str) -> str:
    return f"ini key `{key}` in {config.inipath}" if config.inipath else f"ini key `{key}`"


def _check_mode(value: str, source: str) -> str:
    mode = value.strip().lower()
    if mode not in _MODES:
        raise pytest.UsageError(
            f"layoutcheck: {source}: unknown mode {value!r}: expected one of {', '.join(_MODES)}"
        )
    return mode


def _env_mode(environ: os._Environ[str] | dict[str, str]) -> tuple[bool | None, str | None]:
    """``LAYOUTCHECK``: (on/off/unset, its mode if it names one); a bad value is a usage error naming the variable."""
    raw = environ.get("LAYOUTCHECK")
    if raw is None:
        return None, None
    from layoutcheck.errors import ConfigError
    from layoutcheck.runtime.hooks.settings import env_mode  # no torch, no pydantic: the one parser of the variable

    try:
        mode = env_mode(environ)
    except ConfigError as err:
        raise pytest.UsageError(f"layoutcheck: {err}") from None
    if mode is None:
        return False, None
    return True, mode or None


def _ini_bool(config: pytest.Config, key: str) -> bool:
    try:
        return bool(config.getini(key))
    except (ValueError, pytest.UsageError) as err:  # pytest >= 9 raises UsageError itself, without the source
        raise pytest.UsageError(f"layoutcheck: {_ini_source(config, key)}: {err}") from None


def _resolve(config: pytest.Config) -> _Settings:
    """Command line > environment > ini, with validators that name where a bad value came from."""
    opt = config.known_args_namespace
    env_on, env_mode = _env_mode(os.environ)

    if getattr(opt, "layoutcheck", None) is not None:
        enabled = bool(opt.layoutcheck)
        enabled_from = "--layoutcheck" if enabled else "--no-layoutcheck"
    elif getattr(opt, "layoutcheck_mode", None):
        enabled, enabled_from = True, "--layoutcheck-mode"
    elif env_on is not None:
        enabled, enabled_from = env_on, f"LAYOUTCHECK={os.environ['LAYOUTCHECK']!r} (environment)"
    else:
        enabled, enabled_from = _ini_bool(config, "layoutcheck"), _ini_source(config, "layoutcheck")

    if getattr(opt, "layoutcheck_mode", None):
        mode, mode_from = _check_mode(opt.layoutcheck_mode, "--layoutcheck-mode"), "--layoutcheck-mode"
    elif env_mode is not None:
        mode, mode_from = env_mode, "LAYOUTCHECK (environment)"
    elif config.getini("layoutcheck_mode"):
        mode_from = _ini_source(config, "layoutcheck_mode")
        mode = _check_mode(str(config.getini("layoutcheck_mode")), mode_from)
    else:
        mode, mode_from = "raise", "the default"

    invocation = config.invocation_params.dir
    if getattr(opt, "layoutcheck_config", None):
        file, file_from = str(invocation / opt.layoutcheck_config), "--layoutcheck-config"
    elif os.environ.get("LAYOUTCHECK_CONFIG"):
        file, file_from = os.environ["LAYOUTCHECK_CONFIG"], "LAYOUTCHECK_CONFIG (environment)"
    elif config.getini("layoutcheck_config"):
        base = config.inipath.parent if config.inipath else config.rootpath
        file_from = _ini_source(config, "layoutcheck_config")
        file = str(base / str(config.getini("layoutcheck_config")))
    else:
        file, file_from = None, f"the nearest pyproject.toml or layoutcheck.toml above {config.rootpath}"
    if file is not None and not Path(file).is_file():
        raise pytest.UsageError(f"layoutcheck: {file_from}: configuration file {file} does not exist")

    lint = getattr(opt, "layoutcheck_lint", None)
    if lint is None:
        lint = _ini_bool(config, "layoutcheck_lint")
    paths = tuple(Path(p) for p in config.getini("layoutcheck_lint_paths")) or (config.rootpath,)
    return _Settings(enabled, enabled_from, mode, mode_from, file, file_from, bool(lint), paths)


# ---------------------------------------------------------------- run state


@dataclasses.dataclass(eq=False)  # registered as a plugin: pytest keeps plugins in sets
class _State:
    """What the plugin keeps for the run (in ``config.stash``)."""

    settings: _Settings
    session: Any = None
    """The `layoutcheck.runtime.activation.session.Session`, once the checks are on."""
    owned: bool = False
    """This plugin activated the session (so it deactivates it at the end)."""
    per_test: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    """Violations per test node id (from the reports, so xdist workers' arrive here too)."""
    failed: set[str] = dataclasses.field(default_factory=set)
    """Tests the plugin failed because of violations."""
    figures: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Run-report figures of each xdist worker (the controller's summary merges them)."""
    lint: Counter[str] = dataclasses.field(default_factory=Counter)
    """Lint items run, from their reports: ``files`` with findings, ``findings``, run-level ``errors``.
    Counted where the reports arrive (under pytest-xdist the controller, which collects nothing)."""

    # Registered as a plugin of the run (pytest_configure), so that these hooks, which are not
    # given the config, reach the run's state.

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.lint.update(getattr(report, "layoutcheck_lint", None) or {})
        data = getattr(report, "layoutcheck", None)
        if data:
            self.per_test.setdefault(report.nodeid, []).extend(data["violations"])
            if report.failed and data["mode"] == "raise":
                self.failed.add(report.nodeid)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """pytest-xdist, on the controller: a worker's run-report figures."""
        figures = getattr(node, "workeroutput", {}).get("layoutcheck")
        if figures:
            self.figures.append(figures)


def _activate(config: pytest.Config, state: _State, mode: str) -> Any:
    """Install the configured hooks (or reuse the active session); configuration errors name the key and file."""
    from layoutcheck.errors import LayoutSpecError
    from layoutcheck.runtime.activation.session import activate, active_session

    existing = active_session()
    try:
        # CI runs small inputs: the tracer is on unless the `tracer` key or LAYOUTCHECK_TRACE says otherwise
        session = activate(mode, config=state.settings.config, search_from=config.rootpath, trace_default=True)
    except LayoutSpecError as err:  # ConfigError among them
        raise pytest.UsageError(f"layoutcheck: {err}") from None
    if session.setup.problems:  # a session the environment started kept them: here they stop the run, as always
        raise pytest.UsageError("layoutcheck: " + "\n".join(str(p) for p in session.setup.problems))
    # Tests report per test; a hooked module no test imports is no mistake (debug runs report it at exit).
    session.debug_run = False
    # Each test's findings belong to it (a phase fails, `layout.expect` blocks): value checks run in the call
    session.checker.inline_values()
    state.session, state.owned = session, state.owned or existing is None
    return session


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Resolve the settings and, when on, install the hooks before any conftest is imported."""
    opt = early_config.known_args_namespace
    if getattr(opt, "help", False) or getattr(opt, "version", False):
        return
    state = _State(_resolve(early_config))
    early_config.stash[_STATE] = state
    if state.settings.enabled:
        _activate(early_config, state, state.settings.mode)
    elif "LAYOUTCHECK" in os.environ:
        # The environment activated hooks at interpreter start; the command line (or ini) says off.
        from layoutcheck.runtime.activation.session import active_session, deactivate

        if active_session() is not None and early_config.known_args_namespace.layoutcheck is False:
            deactivate()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("layoutcheck", "layoutcheck (padded-sequence layouts)")
    group.addoption("--layoutcheck", action="store_true", dest="layoutcheck", default=None, help=HELP["enable"])
    group.addoption("--no-layoutcheck", action="store_false", dest="layoutcheck", help=HELP["disable"])
    group.addoption("--layoutcheck-mode", dest="layoutcheck_mode", metavar="MODE", default=None, help=HELP["mode"])
    group.addoption("--layoutcheck-config", dest="layoutcheck_config", metavar="FILE", default=None,
                    help=HELP["config"])
    group.addoption("--layoutcheck-lint", action="store_true", dest="layoutcheck_lint", default=None,
                    help=HELP["lint"])
    parser.addini("layoutcheck", HELP["enable"], type="bool", default=False)
    parser.addini("layoutcheck_mode", HELP["mode"], default="")
    parser.addini("layoutcheck_config", HELP["config"], default="")
    parser.addini("layoutcheck_lint", HELP["lint"], type="bool", default=False)
    parser.addini("layoutcheck_lint_paths", HELP["lint_paths"], type="paths", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    if _STATE not in config.stash and not (config.option.help or config.option.version):
        # Registered after the initial conftests (e.g. by `pytest_plugins`): conftest imports are not hooked,
        # but hooks rebind the names callers took by then.
        state = _State(_resolve(config))
        config.stash[_STATE] = state
        if state.settings.enabled:
            _activate(config, state, state.settings.mode)
    state = config.stash.get(_STATE, None)
    if state is not None:
        config.pluginmanager.register(state, "layoutcheck-state")


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    """One line each for the runtime checks and the linter, with where their settings came from."""
    state = config.stash.get(_STATE, None)
    if state is None:
        return None
    s, lines = state.settings, []
    if state.session is not None:
        n = len(state.session.settings.hook_specs())
        lines.append(f"layoutcheck: runtime checks on ({s.enabled_from}), mode {s.mode} ({s.mode_from}), "
                     f"{n} hook{'s' if n != 1 else ''} from {state.session.config_file}")
    if s.lint:
        lines.append(f"layoutcheck: lint {', '.join(str(p) for p in s.lint_paths)}")
    return lines or None


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or state.session is None or not state.owned:
        return
    from layoutcheck.runtime.activation.session import deactivate

    if state.session.settings.report:  # deactivate() skips the at-exit report: write it now
        try:
            state.session.write_report()
        except Exception as err:  # noqa: BLE001 - the run's outcome must not depend on the report
            config.get_terminal_writer().line(f"layoutcheck: could not write the run report: {err}")
    deactivate()


# ---------------------------------------------------------------- one test


@dataclasses.dataclass
class _TestRun:
    """One test's layoutcheck state: on or off, its mode, what each phase found."""

    enabled: bool
    mode: str
    lazy: bool = False
    """The checks were switched on for this test only (marker or fixture with the plugin off)."""
    previous_mode: str | None = None
    consumed: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    """Ranges of the session's violation log that `LayoutFixture.expect` accounted for."""
    found: dict[str, list[Any]] = dataclasses.field(default_factory=dict)


def _marker_settings(item: pytest.Item, enabled: bool, mode: str) -> tuple[bool, str]:
    marker = item.get_closest_marker("layoutcheck")
    if marker is None:
        return enabled, mode
    given = ", ".join([*map(repr, marker.args), *(f"{k}={v!r}" for k, v in marker.kwargs.items())])
    where = f"@pytest.mark.layoutcheck({given}) on {item.nodeid}"
    args, kwargs = list(marker.args), dict(marker.kwargs)
    if len(args) > 1 or set(kwargs) - {"enabled", "mode"}:
        raise pytest.UsageError(f"layoutcheck: {where}: takes one of `enabled` (bool) or `mode` (a mode name)")
    if args:
        kwargs["mode" if isinstance(args[0], str) else "enabled"] = args[0]
    on = kwargs.get("enabled", True)
    if not isinstance(on, bool):
        raise pytest.UsageError(f"layoutcheck: {where}: `enabled` must be True or False, got {on!r}")
    if "mode" in kwargs and kwargs["mode"] is not None:
        mode = _check_mode(str(kwargs["mode"]), where)
    return on, mode


def _test_run(item: pytest.Item) -> _TestRun | None:
    """This test's run, created at its setup; switches the checks on lazily when only the marker (or fixture) asks."""
    run = item.stash.get(_TEST, None)
    if run is not None:
        return run
    state = item.config.stash.get(_STATE, None)
    if state is None:
        return None
    allowed, mode = _marker_settings(item, True, state.settings.mode)  # marker > command line > env > ini
    wants = allowed and (state.settings.enabled or item.get_closest_marker("layoutcheck") is not None
                         or "layout" in getattr(item, "fixturenames", ()))
    run = _TestRun(enabled=wants, mode=mode)
    if wants:
        if state.session is None:
            run.lazy = True
            try:
                _activate(item.config, state, mode)
            except pytest.UsageError as err:
                raise pytest.fail.Exception(str(err), pytrace=False) from None
        run.previous_mode, state.session.mode = state.session.mode, mode
        _fresh_rollout_state(state.session.checker)
    elif state.session is not None:
        # Off for this test: violations neither raise nor fail it.
        run.previous_mode, state.session.mode = state.session.mode, "record"
    item.stash[_TEST] = run
    return run


def _fresh_rollout_state(checker: Any) -> None:
    """Forget the previous test's rollout (its micro-batches, pending replay tensors), keeping every violation.

    Tests are independent: the last micro-batch of one must not be compared
    with the next one's (G4, G5).
    """
    checker.start_run()


def _end_test(item: pytest.Item, run: _TestRun) -> None:
    state = item.config.stash[_STATE]
    if state.session is None:
        return
    if run.previous_mode is not None:
        state.session.mode = run.previous_mode
    if run.lazy:
        from layoutcheck.runtime.activation.session import deactivate

        deactivate()
        state.session, state.owned = None, False


def _unconsumed(session: Any, start: Any, run: _TestRun) -> list[Any]:
    found = session.violations_since(start)
    first = start.violations
    return [v for i, v in enumerate(found, first) if not any(a <= i < b for a, b in run.consumed)]


def _failure(found: Sequence[Any], when: str) -> str:
    from layoutcheck.errors import MESSAGE_LIMIT, format_violations

    phase = {"setup": "while setting up", "call": "during", "teardown": "while tearing down"}[when]
    return (f"layoutcheck found {format_violations(found, limit=MESSAGE_LIMIT)}\n"
            f"(recorded {phase} this test: the code under test went on past them, so layoutcheck fails it)")


def _phase(item: pytest.Item, when: str) -> Generator[None, object, object]:
    """Around one phase: record its violations; in raise mode fail the phase that produced any."""
    run = _test_run(item) if when == "setup" else item.stash.get(_TEST, None)
    state = item.config.stash.get(_STATE, None)
    session = state.session if state is not None else None
    if run is None or session is None:
        return (yield)
    start = session.mark()
    problems_before = len(session.setup.problems)
    try:
        result = yield
    except BaseException as err:
        found = _unconsumed(session, start, run) if run.enabled else []
        run.found[when] = found
        if found and not all(v in getattr(err, "violations", ()) for v in found):
            # The phase failed with another error (a LayoutError swallowed, then an IndexError, say): show them.
            item.add_report_section(when, "layoutcheck", _failure(found, when))
        raise
    finally:
        if when == "teardown":
            _end_test(item, run)
    found = _unconsumed(session, start, run) if run.enabled else []
    run.found[when] = found
    problems = [str(p).strip() for p in session.setup.problems[problems_before:]] if run.enabled else []
    if (found or problems) and run.mode == "raise":
        pytest.fail("\n".join(([_failure(found, when)] if found else []) + (
            [_problem_failure(problems, when)] if problems else [])), pytrace=False)
    if problems and run.mode == "warn":
        from layoutcheck.runtime.reporting.modes import LayoutWarning

        item.warn(LayoutWarning(_problem_failure(problems, when)))  # shown at the test, not at this line
    return result


def _problem_failure(problems: Sequence[str], when: str) -> str:
    # A field the configuration names that the call's data cannot give: this test's calls were not checked as
    # configured, so raise mode must not let it pass as checked (a debug run fails at exit for the same reason).
    phase = {"setup": "while setting up", "call": "during", "teardown": "while tearing down"}[when]
    k = len(problems)
    return (f"layoutcheck could not check {phase} this test as configured: {k} configuration problem"
            f"{'s' if k != 1 else ''}:\n" + "\n".join(f"  {p}" for p in problems) +
            "\nfix: correct the configuration; the rest of each contract was still checked")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _phase(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _phase(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _phase(item, "teardown"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    run = item.stash.get(_TEST, None)
    found = run.found.get(call.when) if run is not None else None
    if found:
        # A plain attribute: pytest-xdist serialises a report's __dict__, so the controller gets it too.
        report.layoutcheck = {"mode": run.mode, "violations": [v.to_dict() for v in found]}
    if report.failed and call.excinfo is not None and _raised_layout_error(call.excinfo.value):
        if not item.config.getoption("fulltrace", False):
            report.longrepr = _layout_error_repr(item, call.excinfo)
    elif isinstance(item, LintItem) and call.when == "call":
        # What the summary counts (a plain attribute, as above): a run-level error is an item with no findings.
        report.layoutcheck_lint = {"files": 1, "findings": item.count} if item.count else {"errors": 1}
    return report


def _raised_layout_error(error: BaseException) -> bool:
    # Without layoutcheck.errors imported, nothing can have raised a LayoutError: no import to find out.
    errors = sys.modules.get("layoutcheck.errors")
    return errors is not None and isinstance(error, errors.LayoutError)


def _hidden(entry: Any, excinfo: pytest.ExceptionInfo[BaseException]) -> bool:
    """A traceback entry the failure leaves out: layoutcheck's own frames, and any frame with `__tracebackhide__`.

    layoutcheck's frames are the hook, the checker and the report that
    raised: they say nothing about the user's code, and the violation
    already names the function, the sample and the field. Judged by file, as
    `__tracebackhide__` would mark every one of them (``--fulltrace`` shows them all).
    """
    return str(entry.path).startswith(_PACKAGE) or bool(entry.ishidden(excinfo))


def _layout_error_repr(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:
    """A `LayoutError`'s failure: the violations first, then the test's own frames down to the hooked call."""
    entries = list(excinfo.traceback)
    # From the test's own file on (pytest's and pluggy's frames above it say nothing), as pytest cuts its tracebacks.
    first = next((i for i, entry in enumerate(entries) if Path(entry.path) == item.path), 0)
    frames = [entry for entry in entries[first:] if not _hidden(entry, excinfo)]
    cwd = item.config.invocation_params.dir
    lines = [f"layoutcheck found {excinfo.value}", "",
             "where (layoutcheck's own frames hidden; --fulltrace shows them):"]
    for entry in frames:
        path = Path(entry.path)
        shown = path.relative_to(cwd) if path.is_relative_to(cwd) else path
        lines.append(f"  {shown}:{entry.lineno + 1}: in {entry.name}")
        source = entry.statement if entry.source is not None else None
        if source is not None:
            lines.extend(f"    {line.strip()}" for line in str(source).splitlines()[:3])
    try:  # a value-style failure (no traceback of its own) that pytest and pytest-xdist render as they know how
        pytest.fail("\n".join(lines), pytrace=False)
    except pytest.fail.Exception as failure:
        return item.repr_failure(pytest.ExceptionInfo.from_exception(failure))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(_STATE, None)
    workeroutput = getattr(session.config, "workeroutput", None)
    if state is not None and workeroutput is not None and state.session is not None:
        workeroutput["layoutcheck"] = _figures(state.session)  # an xdist worker: the controller merges


# ---------------------------------------------------------------- the fixture


class LayoutFixture:
    """What the ``layout`` fixture gives a test: the session, this test's violations, and geometry assertions."""

    def __init__(self, item: pytest.Item, run: _TestRun, session: Any) -> None:
        self._item, self._run = item, run
        self.session = session
        """The `~layoutcheck.runtime.activation.Session` (its ``checker``, ``mode``, ``hooks``, ``run_report()``)."""
        self._start = session.mark()

    @property
    def checker(self) -> Any:
        """The session's `layoutcheck.LayoutChecker`."""
        return self.session.checker

    @property
    def violations(self) -> list[Any]:
        """The violations recorded in this test so far, except those an `expect` block accounted for."""
        return _unconsumed(self.session, self._start, self._run)

    @property
    def notes(self) -> list[str]:
        """Checks that could not run in this test so far (warn and record modes)."""
        return self.session.notes_since(self._start)

    @property
    def mode(self) -> str:
        """The mode for the rest of this test; setting it lasts until the test ends."""
        return self.session.mode

    @mode.setter
    def mode(self, value: str) -> None:
        self.session.mode = _check_mode(value, f"layout.mode in {self._item.nodeid}")
        self._run.mode = self.session.mode

    def assert_clean(self) -> None:
        """Fail the test now if it has recorded any violation."""
        if self.violations:
            pytest.fail(_failure(self.violations, "call"), pytrace=False)

    @contextmanager
    def expect(self, *invariants: str) -> Iterator[list[Any]]:
        """A block that must produce violations of exactly these invariants (``"O3"``, ``"G1"``...).

        Inside, violations are recorded, not raised; the block's list is
        yielded. Leaving it fails the test if an expected invariant did not
        occur or another one did; the expected violations do not fail the test.
        """
        if not invariants:
            raise pytest.UsageError("layout.expect() needs at least one invariant id, e.g. layout.expect('G1')")
        previous, self.session.mode = self.session.mode, "record"
        start = self.session.mark()
        block: list[Any] = []
        try:
            yield block
        finally:
            self.session.mode = previous
            block.extend(self.session.violations_since(start))
            self._run.consumed.append((start.violations, start.violations + len(block)))
        seen = {v.invariant for v in block}
        missing, extra = sorted(set(invariants) - seen), sorted(seen - set(invariants))
        if missing or extra:
            from layoutcheck.errors import format_violations

            what = "; ".join(filter(None, (
                f"expected {', '.join(missing)} did not occur" if missing else "",
                f"unexpected {', '.join(extra)}" if extra else "",
            )))
            got = format_violations(block, limit=5) if block else "no layout violations"
            pytest.fail(f"layout.expect({', '.join(map(repr, invariants))}): {what}; got {got}", pytrace=False)

    def assert_rollout(self, rollout_data: Any, **kwargs: Any) -> None:
        """`layoutcheck.check_rollout` (O1-O5) on a producer's output; fail with its messages if it finds any."""
        from layoutcheck import check_rollout

        self._assert(check_rollout(rollout_data, **kwargs))

    def assert_batch(self, batch: Any, **kwargs: Any) -> None:
        """`layoutcheck.check_batch` (G1-G4, G6) on a batch builder's output; fail with its messages if it finds any."""
        from layoutcheck import check_batch

        self._assert(check_batch(batch, **kwargs))

    def assert_local_length(self, tensor: Any, padded: int, cp_size: int = 1, scheme: str = "zigzag") -> None:
        """The last dimension of ``tensor`` is this CP rank's local length for ``P`` (`geometry.local_length`)."""
        from layoutcheck import geometry
        from layoutcheck.errors import metadata_only

        expected = geometry.local_length(padded, cp_size, scheme)
        with metadata_only():
            actual = int(tensor.shape[-1])
        if actual != expected:
            pytest.fail(f"local length {actual} != {expected}, the local length of P={padded} for cp={cp_size} "
                        f"({scheme})", pytrace=False)

    def trace(self, **kwargs: Any) -> Any:
        """The session's tracer for a ``with`` block of this test (`layoutcheck.trace`).

        Ops in the block carry tags and a layout broken there is one of this
        test's violations (in raise mode the test fails). ``layout="bshd"``
        gives the run's layout; ``enabled=False`` leaves the block untraced.
        """
        return _tracer_context(self.session, **kwargs)

    def _assert(self, found: Sequence[Any]) -> None:
        if found:
            from layoutcheck.errors import format_violations

            pytest.fail(format_violations(found, limit=20), pytrace=False)


def _tracer_context(session: Any, **kwargs: Any) -> Any:
    # The one place the fixture enters the tracer: the session's (its log and mode), imported on use (torch).
    from layoutcheck.runtime.activation.session import trace

    return trace(session=session, **kwargs)


@pytest.fixture
def layout(request: pytest.FixtureRequest) -> LayoutFixture:
    """layoutcheck's view of this test: its session, recorded violations, and layout assertions.

    Requesting it switches the runtime checks on for the test if the run has
    them off (the configured hooks, installed for this test only).
    """
    item = request.node
    run = _test_run(item)
    state = item.config.stash.get(_STATE, None)
    if run is None or state is None or state.session is None:
        pytest.fail("the layout fixture needs the layoutcheck plugin's runtime checks, which are off for this "
                    "test (@pytest.mark.layoutcheck(False))", pytrace=False)
    return LayoutFixture(item, run, state.session)


# ---------------------------------------------------------------- lint items


def lint_files(paths: Sequence[str | os.PathLike[str]], *, config_file: str | None, cwd: Path) -> tuple[
    dict[str, tuple[str, int]], list[str]
]:
    """The linter's findings per file (rendered as ``layoutcheck check`` prints them, and counted); run-level errors.

    The one call into the linter (``layoutcheck.lint.runner.run``, behind
    ``layoutcheck check``); paths display relative to ``cwd``. A file that
    does not parse counts as a file with findings; a bad configuration, a
    missing path or an internal error comes back as a run-level error.
    """
    from layoutcheck.configfile import resolve_config
    from layoutcheck.errors import ConfigError
    from layoutcheck.lint.findings import INVALID_INPUT
    from layoutcheck.lint.output import format_findings
    from layoutcheck.lint.runner import run

    try:
        loaded = resolve_config(paths, config_file, cwd=cwd)
        result = run(paths, loaded=loaded, cwd=cwd)
    except ConfigError as err:
        return {}, [str(err)]
    per_file: dict[str, tuple[str, int]] = {}
    for file in result.files:
        bad = [e for e in file.errors if e.kind == INVALID_INPUT]
        if file.findings or bad:
            text = format_findings(file.findings, bad, output_format="text", rules=result.rules)
            per_file[file.path] = (text, len(file.findings) + len(bad))
    errors = [format_findings([], [e], output_format="concise", rules=()) for e in result.errors
              if e.kind != INVALID_INPUT]
    return per_file, errors


class LintFailure(Exception):
    """A file's lint findings (the item's failure shows them as `layoutcheck check` does)."""


class LintFile(pytest.File):
    """A file with lint findings; its one item is ``path::layoutcheck-lint`` (its node id is the file's path)."""

    def __init__(self, *, findings: Sequence[tuple[str, str, int]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.findings = findings

    def collect(self) -> list[pytest.Item]:
        return [LintItem.from_parent(self, name=name, text=text, count=count) for name, text, count in self.findings]


class LintItem(pytest.Item):
    """One file's lint findings, or a run-level lint error: fails with them as `layoutcheck check` prints them."""

    def __init__(self, *, text: str, count: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.text, self.count = text, count

    def runtest(self) -> None:
        raise LintFailure(self.text)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, LintFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        where = self.parent.name if self.parent is not None else self.name
        return self.path, None, f"{where}: {self.count} layoutcheck finding{'s' if self.count != 1 else ''}"


def _lint_items(session: pytest.Session, state: _State) -> list[pytest.Item]:
    """Lint once; collect one `LintFile` per file with findings, reported like any collected file."""
    cwd = session.config.invocation_params.dir
    per_file, errors = lint_files([str(p) for p in state.settings.lint_paths],
                                  config_file=state.settings.config, cwd=cwd)
    files = [LintFile.from_parent(session, path=(cwd / display).resolve(),
                                  findings=[("layoutcheck-lint", text, count)])
             for display, (text, count) in sorted(per_file.items())]
    if errors:
        files.append(LintFile.from_parent(session, path=session.config.rootpath / "layoutcheck-lint",
                                          findings=[(f"error-{i}", text, 0) for i, text in enumerate(errors)]))
    items: list[pytest.Item] = []
    for node in files:  # the hooks `collect_one_node` calls, so the terminal counts the items
        session.ihook.pytest_collectstart(collector=node)
        report = session.ihook.pytest_make_collect_report(collector=node)
        session.ihook.pytest_collectreport(report=report)
        items.extend(x for x in report.result if isinstance(x, pytest.Item))
    return items


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    # tryfirst: before -k / -m deselection, so lint items can be selected like any test.
    state = config.stash.get(_STATE, None)
    if state is not None and state.settings.lint:
        config.addinivalue_line("markers", "layoutcheck_lint: a file's layoutcheck lint findings")
        items.extend(_lint_items(session, state))


# ---------------------------------------------------------------- the summary


def _figures(session: Any) -> dict[str, Any]:
    """The run report's padding figures, as plain data (what an xdist worker sends to the controller)."""
    report = session.run_report()
    return {
        "processes": 1,
        "mode": report.mode,
        "config_file": report.config_file,
        "hooks": list(report.hooks),
        "checked": dict(getattr(session.checker, "checked", {})),
        "notes": len(report.notes),
        "problems": [str(p).strip() for p in session.setup.problems],
        "totals": report.totals.model_dump(),
        "shapes": [[list(s.shape), s.count] for s in report.shapes],
    }


def merge_figures(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Sum the totals and shape counts of several processes' figures (xdist workers)."""
    totals: Counter[str] = Counter()
    checked: Counter[str] = Counter()
    padded_known = False
    shapes: Counter[tuple[int, ...]] = Counter()
    for part in parts:
        checked.update(part.get("checked", {}))
        for key, value in part["totals"].items():
            if key == "padded_tokens":
                padded_known = padded_known or value is not None
            totals[key] += value or 0
        for shape, count in part["shapes"]:
            shapes[tuple(shape)] += count
    merged = dict(totals)
    if not padded_known:
        merged["padded_tokens"] = None
    first = parts[0] if parts else {}
    return {
        "processes": sum(p.get("processes", 1) for p in parts),
        "mode": first.get("mode"), "config_file": first.get("config_file"), "hooks": first.get("hooks", []),
        "checked": dict(checked), "notes": sum(p.get("notes", 0) for p in parts), "totals": merged,
        "problems": list(dict.fromkeys(text for p in parts for text in p.get("problems", []))),
        "shapes": [[list(s), n] for s, n in shapes.most_common()],
    }


def summary_lines(figures: dict[str, Any] | None, per_test: dict[str, list[dict[str, Any]]],
                  failed: set[str], *, limit: int = 10) -> list[str]:
    """The summary: where the checks came from, violations per test, the padding figures."""
    lines: list[str] = []
    checked = ""
    if figures is not None:
        hooks = figures["hooks"]
        source = figures["config_file"] or "no configuration file"
        workers = figures.get("processes", 1)
        where = f" ({workers} xdist workers)" if workers > 1 else ""
        checked = ", ".join(f"{n} {what}" for what, n in figures.get("checked", {}).items()) or "nothing"
        lines.append(f"runtime checks{where}: {len(hooks)} hook{'s' if len(hooks) != 1 else ''} from {source}; "
                     f"checked {checked}")
    if per_test:
        n = sum(len(v) for v in per_test.values())
        lines.append(f"{n} layout violation{'s' if n != 1 else ''} in {len(per_test)} "
                     f"test{'s' if len(per_test) != 1 else ''}:")
        for nodeid, found in list(sorted(per_test.items()))[:limit]:
            counts = Counter(v["invariant"] for v in found)
            where = ", ".join(sorted({v["where"] for v in found}))
            status = "FAILED" if nodeid in failed else "recorded"
            lines.append(f"  {status:<8} {nodeid}: {', '.join(f'{k} x{c}' for k, c in sorted(counts.items()))} "
                         f"in {where}")
        if len(per_test) > limit:
            lines.append(f"  ... and {len(per_test) - limit} more tests")
    elif figures is not None:
        lines.append("no layout violations")
    if figures is not None:
        t = figures["totals"]
        parts = []
        if t.get("padded_tokens") and t.get("true_tokens"):
            parts.append(f"max_seq_lens {t['true_tokens']:,} true tokens padded to {t['padded_tokens']:,} "
                         f"({t['padded_tokens'] / t['true_tokens']:.2f}x)")
        if t.get("batch_positions") and t.get("batch_true_tokens"):
            parts.append(f"micro-batches {t['batch_true_tokens']:,} tokens in {t['batch_positions']:,} positions "
                         f"({t['batch_positions'] / t['batch_true_tokens']:.2f}x)")
        shapes = figures["shapes"]
        if shapes:
            parts.append(f"{len(shapes)} distinct token shape{'s' if len(shapes) != 1 else ''}")
        lines.append("padding: " + ("; ".join(parts) if parts else "no figures in the run report"))
        if figures.get("notes"):
            lines.append(f"{figures['notes']} check(s) could not run (see the run report's notes)")
        problems = figures.get("problems", [])
        if problems:
            lines.append(f"{len(problems)} configuration problem{'s' if len(problems) != 1 else ''} (fields left "
                         "out of the checks):")
            lines += [f"  {p}" for p in problems[:limit]]
    return lines


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or hasattr(config, "workerinput"):
        return
    if state.figures:  # pytest-xdist: the workers checked, the controller merges
        figures: dict[str, Any] | None = merge_figures(state.figures)
    elif state.session is not None:
        figures = _figures(state.session)
    else:
        figures = None
    lines = summary_lines(figures, state.per_test, state.failed)
    if state.settings.lint:
        files, findings, errors = (state.lint[key] for key in ("files", "findings", "errors"))
        line = (f"lint: {files} file{'s' if files != 1 else ''} with findings "
                f"({findings} finding{'s' if findings != 1 else ''})")
        lines.append(line + (f"; {errors} error{'s' if errors != 1 else ''} (see the failures)" if errors else ""))
    if not lines:
        return
    terminalreporter.write_sep("-", "layoutcheck")
    for line in lines:
        terminalreporter.write_line(line)
