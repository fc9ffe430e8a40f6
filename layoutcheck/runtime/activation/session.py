"""Debug mode: the configured hooks, switched on in a process with no change to its code.

``LAYOUTCHECK=raise|warn|record`` (or ``1``: the configured mode) in the
environment of any Python process activates the hooks of
``[tool.layoutcheck.runtime]`` at interpreter start, through the ``.pth``
file layoutcheck installs (``startup/_layoutcheck_startup.py``); every
process that inherits the variable is covered: subprocesses, multiprocessing
children, every rank ``torchrun`` starts, and Ray workers (`ray_env` carries
the variables into ``ray.init``'s ``runtime_env``). The same can be done from
code, or by the pytest plugin, with `activate`; `trace` gives a block of code
the session's tracer.

The configuration is ``$LAYOUTCHECK_CONFIG`` (a ``pyproject.toml`` or
``layoutcheck.toml``), else the nearest one above the working folder. One
`Session` per process holds the checker, the installed hooks, what was set
up (`Session.setup`: each hook's calls, and what did not go in) and the run
report (``report`` / ``$LAYOUTCHECK_REPORT``, appended at each rollout and
at exit, `layoutcheck.runtime.reporting.runlog`).

A configuration mistake stops the run before its first step. A debug run
never checks on what a mistake left to a default: an unknown key, a table the
file cannot contain, a bad value, an unknown ``LAYOUTCHECK`` value end the
process at interpreter start, and a hook target that does not resolve ends it
as soon as the program shows it (its package imported without the module,
its module imported without the function or with one that does not fit, the
first hooked call for a top-level package that cannot be found), each with
one message naming the key and the file (or the variable) and the fix, no
traceback, exit status 2 (`_stop`). What can only be known at exit (a module
that exists but was never imported) is reported then: raise mode exits with
status 1; every mode puts it in the exit summary and the run report. A
preset's hook whose module the process never imports is "not exercised" (a
preset covers every path of its trainer; a process runs some), never a
problem. Through the API (`activate`), the mistakes raise `ConfigError`s as
before, and what was not set up is reported at the **end of the first step**
(the first hook call after the checks began a second rollout) or at exit.

A hook stays wrapped: every hooked function is found again at each step
boundary (a rollout beginning) and at exit; one replaced since is wrapped
again at the boundary or reported as lost at exit (`Session._refresh_hooks`).
The exit summary always has a second line with the hooks installed (wrapped
now) and the calls each saw. A process whose hooks saw no call (a launcher,
a Ray driver, ``pip``) says nothing about hooks its program never imported.
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib
import os
import socket
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layoutcheck import geometry
from layoutcheck.errors import ConfigError, LayoutSpecError, Violation
from layoutcheck.runtime.activation import exit_status, ray_env
from layoutcheck.runtime.hooks.install import HookSet
from layoutcheck.runtime.hooks.settings import (
    BOUNDARY,
    ENV_CONFIG,
    ENV_MODE,
    ENV_REPORT,
    TRACER_ROLES,
    HookSpec,
    RuntimeSettings,
    effective,
    env_mode,
)
from layoutcheck.runtime.hooks.targets import module_state, not_installed_reason
from layoutcheck.runtime.reporting.runlog import RunLog, chunk
from layoutcheck.runtime.reporting.setup import HookStatus, SetupLedger

if TYPE_CHECKING:
    from layoutcheck.runtime.tracing.tracer import Tracer

__all__ = ["Mark", "Session", "activate", "active_session", "deactivate", "trace"]

_LOCK = threading.RLock()
_SESSION: Session | None = None


@dataclasses.dataclass(frozen=True)
class Mark:
    """A position in a session's violations and notes (`Session.mark`)."""

    violations: int
    notes: int


class _Target:
    """A ``pkg.mod:function`` resolved on first call (the module may not be importable at activation)."""

    def __init__(self, target: str, key: str) -> None:
        self.target, self.key = target, key
        self._fn: Callable[[], Any] | None = None

    def load(self) -> Callable[[], Any]:
        """The function (imported once); `LayoutSpecError` naming the key when it cannot be loaded."""
        if self._fn is None:
            module, _, qualname = self.target.partition(":")
            try:
                value: Any = importlib.import_module(module)
                for part in qualname.split("."):
                    value = getattr(value, part)
            except (ImportError, AttributeError) as err:
                raise LayoutSpecError(f"{self.key}: {self.target!r} cannot be loaded: {err}") from None
            self._fn = value
        return self._fn

    def __call__(self) -> Any:
        return self.load()()


class Session:
    """One process's debug mode: settings, checker, hooks, what was set up, and the report.

    ``problems``: configuration problems found while reading it (kept, not
    raised); ``key_prefix``: how the runtime table's keys are spelled in its
    file (``tool.layoutcheck`` in a pyproject.toml, empty in a layoutcheck.toml).
    """

    def __init__(self, settings: RuntimeSettings, *, config_file: Path | None, root: Path,
                 trace_default: bool = False, problems: Sequence[ConfigError] = (),
                 key_prefix: str = "tool.layoutcheck", stop_on_mistake: bool = False) -> None:
        from layoutcheck.runtime.checker.layout_checker import CrossRankOptions, LayoutChecker
        from layoutcheck.runtime.checker.background import ValueWorker

        self.settings = settings
        # The tracer: `tracer` (with LAYOUTCHECK_TRACE applied), else `trace_default` (on under the
        # pytest plugin, off in a debug run). Its roles are hooked only when it is on.
        self._tracing = settings.tracer if settings.tracer is not None else trace_default
        self._session_tracer: Any = None
        self.config_file = config_file
        self.root = root
        self._key_prefix = key_prefix
        self.debug_run = True
        """Whether the end of the first step and the exit report what was not set up (raise mode: fail there).

        The pytest plugin sets it off: it reports per test, and a module no test imports is no mistake."""
        self.stop_on_mistake = stop_on_mistake
        """Whether a configuration mistake found while the program runs (a hook target that does not resolve or
        fit) ends the process at once with one message and status 2 (`_stop`): a session the environment started.
        Otherwise it is raised (raise mode) or reported, as an API caller expects."""
        self._called = False
        self.setup = SetupLedger(problems=problems)
        """Each configured hook (installed or not, its calls) and the configuration's problems."""
        parallel = settings.parallel_state_target
        self.checker = LayoutChecker(
            settings.mode,
            parallel_state=None if parallel is None else _Target(parallel, self._key("parallel-state")),
            layout=settings.layout_value,
            buckets=settings.buckets,
            cross_rank=CrossRankOptions(settings.cross_rank_every, settings.cross_rank_timeout)
            if settings.cross_rank else None,
        )
        # a field no contract can read is a configuration problem like the set-up's (summary, raise mode's exit)
        self.checker.on_problem = self._checker_problem
        if settings.value_checks == "background":  # B6 of CPU tensors beside the trainer (a thread, at its first job)
            self.checker.values_worker = ValueWorker()
        self.boundaries = self._boundaries(settings, config_file)
        """The boundary contracts, by function (`layoutcheck.runtime.contract.boundary.BoundarySpec`)."""
        self._coordinates = self._coordinate_sources(settings)
        if parallel is None and self._coordinates.configured:
            # the roles read Miles's parallel state: a trainer that keeps its coordinates elsewhere gives them here
            self.checker.parallel_state = self._coordinates.as_parallel_state()
        self._first_step = True
        self._rollouts_seen = 0
        self._log: RunLog | None = None
        self._hooks = HookSet(self._wrap, on_error=self._hook_error, on_missing=self._hook_missing)
        self._add_hooks(s for s in settings.hook_specs() if self._tracing or s.role not in TRACER_ROLES)
        if not self._tracing:
            self.setup.tracer_off = sum(s.role in TRACER_ROLES for s in settings.hook_specs())

    # --- mode and results ----------------------------------------------

    @property
    def mode(self) -> str:
        """``raise``, ``warn`` or ``record``; settable (the pytest marker switches it per test)."""
        return self.checker.mode

    @mode.setter
    def mode(self, value: str) -> None:
        from layoutcheck.runtime.reporting.modes import check_mode

        self.checker.mode = check_mode(value)

    @property
    def hooks(self) -> tuple[HookSpec, ...]:
        """The hooks in place now (targets whose module is not imported yet are `pending`)."""
        return tuple(h.spec for h in self._hooks.installed)

    @property
    def pending(self) -> tuple[HookSpec, ...]:
        """Configured targets whose module the program has not imported (yet)."""
        return self._hooks.pending

    @property
    def violations(self) -> list[Violation]:
        return self.checker.violations

    @property
    def notes(self) -> list[str]:
        return self.checker.notes

    def mark(self) -> Mark:
        """Where the violation and note logs stand now (for "what happened since")."""
        return Mark(len(self.checker.recorder.violations), len(self.checker.recorder.notes))

    def violations_since(self, mark: Mark) -> list[Violation]:
        return list(self.checker.recorder.violations[mark.violations :])

    def notes_since(self, mark: Mark) -> list[str]:
        return list(self.checker.recorder.notes[mark.notes :])

    def summary(self) -> str:
        """One line: what was found and what was checked."""
        return self.checker.summary()

    # --- the tracer ---------------------------------------------------------

    @property
    def tracing(self) -> bool:
        """Whether the hooks run the tracer."""
        return self._tracing

    def default_tracer(self, on: bool) -> None:
        """Switch the tracer on when the configuration and ``LAYOUTCHECK_TRACE`` say nothing and no hook is in yet.

        The pytest plugin asks for it: a session the environment started at
        interpreter start is reused, and its hooks are usually still waiting
        for their modules. Once a hook is in, the session stays as it is.
        """
        if not on or self._tracing or self.settings.tracer is not None or self._hooks.installed:
            return
        self._tracing = True
        self.setup.tracer_off = 0
        self._add_hooks(s for s in self.settings.hook_specs() if s.role in TRACER_ROLES)

    @property
    def tracer(self) -> Any:
        """The session's `layoutcheck.Tracer` when the hooks run it, else ``None``."""
        return self._tracer_side().tracer if self.tracing else None

    def tracer_for_block(self) -> Any:
        """The session's tracer for a ``with`` block (`trace`), made if the hooks run none.

        ``LAYOUTCHECK_TRACE=0`` leaves it disabled (the block runs untraced).
        """
        tracer = self._tracer_side().tracer
        if not self.tracing:
            from layoutcheck.runtime.tracing.trace_switch import tracer_enabled

            tracer.enabled = tracer_enabled(self.mode, True)
        return tracer

    def _tracer_side(self) -> Any:
        if self._session_tracer is None:
            from layoutcheck.runtime.tracing.session_tracer import SessionTracer

            self._session_tracer = SessionTracer(self.checker)
        return self._session_tracer

    # --- hooks ------------------------------------------------------------

    def _checker_problem(self, err: ConfigError) -> None:
        # the checker names runtime keys (`runtime.boundaries."m:f".args.x`); a pyproject.toml spells them under
        # `tool.layoutcheck`
        key = ".".join(p for p in (self._key_prefix, err.key) if p) if err.key else None
        text = str(err) if not err.key or key == err.key else key + str(err)[len(err.key):]
        self.setup.problems.append(ConfigError(text, key=key, source=err.source))

    def _key(self, key: str) -> str:
        """A key of the runtime table as its file spells it, and the file: for messages."""
        dotted = ".".join(p for p in (self._key_prefix, "runtime", key) if p)
        return f"{dotted} in {self.config_file}" if self.config_file else dotted

    def _add_hooks(self, specs: Iterable[HookSpec]) -> None:
        specs = list(specs)
        for spec in specs:
            self.setup.add(HookStatus(spec.role, spec.target, self._key(spec.origin)))
        self._hooks.add(specs)

    def _boundaries(self, settings: RuntimeSettings, config_file: Path | None) -> dict[str, Any]:
        from layoutcheck.runtime.contract.boundary import parse_boundary

        out = {}
        for target, table in settings.boundary_tables().items():
            mine = target in settings.boundaries
            where = (str(config_file) if config_file else None) if mine else f"preset {settings.preset!r}"
            try:
                out[target] = parse_boundary(target, table, source_file=where)
            except LayoutSpecError as err:  # validated with the file already: a preset's own table is wrong
                key = self._key(f'boundaries."{target}"') if mine else f'runtime.boundaries."{target}" ({where})'
                raise ConfigError(f"{key}: {err}", key=f'runtime.boundaries."{target}"', source=where) from None
        return out

    def _coordinate_sources(self, settings: RuntimeSettings) -> Any:
        from layoutcheck.runtime.checker.boundaries import Coordinates
        from layoutcheck.runtime.contract.boundary import parse_source

        sources = {key.replace("-", "_"): None if value is None else parse_source(value, what=f"`{key}`")
                   for key, value in settings.coordinate_sources().items()}
        return Coordinates(parallel_state=self.checker.parallel_state, **sources)

    def _wrap(self, spec: HookSpec, original: Callable[..., Any]) -> Callable[..., Any]:
        # A function that does not fit what its configuration says is refused here (`_hook_error` names the
        # key and the file): never checked under a wrong reading.
        boundary = self.boundaries.get(spec.target)
        if spec.role == BOUNDARY:
            wrapper = self.checker.wrap_boundary(boundary, original, self._coordinates)
            if self.tracing:  # what the contract says the call holds becomes the tracer's tags
                wrapper = self._tracer_side().boundary(boundary, wrapper, original, self._coordinates)
        else:
            if spec.role in TRACER_ROLES:
                from layoutcheck.runtime.checker.wrappers import check_tracer_signature

                check_tracer_signature(spec.role, original, spec.target)
            inputs = boundary.inputs if boundary is not None else None
            if self.tracing:
                wrapper = self._tracer_side().wrap(spec, original, inputs)
            else:
                wrapper = self.checker.wrap(spec.role, original, inputs)
        status = self.setup.add(HookStatus(spec.role, spec.target, self._key(spec.origin)))
        status.installed, status.problem = True, None
        return self._counted(status, wrapper)

    def _counted(self, status: HookStatus, wrapper: Callable[..., Any]) -> Callable[..., Any]:
        """``wrapper``, counting its calls and noticing when the checks begin a rollout (the report, the first step).

        The one layer the session adds to a hook: an int added and two
        compared per call, next to the checks' tens of microseconds.
        """
        import functools

        checker = self.checker

        @functools.wraps(wrapper)
        def layoutcheck_hook(*args: Any, **kwargs: Any) -> Any:
            if not self._called:
                self._first_call()
            status.calls += 1
            result = wrapper(*args, **kwargs)
            if checker.rollouts != self._rollouts_seen:
                self._rollout_began()
            return result

        return layoutcheck_hook

    def _first_call(self) -> None:
        """Before the first hooked call runs its checks: what only the running program can tell, judged once.

        By now the program set up its ``sys.path``: a hook the user named
        whose top-level package cannot be found is a typo, and the
        ``parallel-state`` and coordinate functions (``tp-size``, ``cp-size``,
        ``cp-rank``, ``cp-group``) the user named must load. In a session
        the environment started, either stops the process here (`_stop`),
        before a check runs on a guessed value.
        """
        self._called = True
        if not (self.stop_on_mistake and self.debug_run):
            return
        for spec in self._hooks.pending:
            if spec.origin == "preset":
                continue
            reason = not_installed_reason(spec.module, calls=1, at_exit=False)
            if reason is not None:
                status = self.setup.add(HookStatus(spec.role, spec.target, self._key(spec.origin)))
                _stop(_config_error(status.key, f"`{spec.target}` cannot be installed: {reason}"),
                      "at the program's first hooked call, before its checks ran")
        target = self.checker.parallel_state
        if self.settings.parallel_state is not None and isinstance(target, _Target):
            try:
                target.load()
            except LayoutSpecError as err:
                _stop(_config_error(self._key("parallel-state"), str(err)),
                      "at the program's first hooked call, before its checks ran")
        # The coordinate functions the user named (a preset's are the preset's: a process may never need them)
        # must load too: one that does not would leave every check that reads it skipped, call after call.
        for key, source in self._coordinates.configured_sources().items():
            if getattr(self.settings, key.replace("-", "_")) is None:
                continue
            try:
                self._coordinates.load(source)
            except LayoutSpecError as err:
                _stop(_config_error(self._key(key), f"{source.text!r} cannot be loaded: {str(err).partition(': ')[2]}"),
                      "at the program's first hooked call, before its checks ran")

    def _refresh_hooks(self, *, at_exit: bool) -> None:
        """Find every hooked function again; re-install one that was replaced (not at exit), record one lost.

        A step boundary (a rollout beginning) re-installs: the calls between
        the replacement and here went unchecked, which the summary says. A
        reload or a second import is seen by the import system and
        re-installed at once (`layoutcheck.runtime.hooks.install`).
        """
        self._hooks.refresh(reinstall=not at_exit)
        for spec, why in self._hooks.take_reinstalled():
            status = self.setup.hook(spec.role, spec.target)
            if status is not None:
                status.reinstalled.append(f"{why}; re-installed at a step boundary (calls in between went unchecked)")
        for spec, why in self._hooks.lost.items():
            status = self.setup.hook(spec.role, spec.target)
            if status is not None:
                status.lost = why

    def _rollout_began(self) -> None:
        """The checks began a rollout: append the report, and after the first step report what was not set up."""
        self._rollouts_seen = self.checker.rollouts
        self._refresh_hooks(at_exit=False)
        ending = self._first_step and self._rollouts_seen >= 2
        if ending:
            self._first_step = False
            self._settle_pending(at_exit=False)
        if self.settings.report:
            self._write_quietly(event="rollout")
        if ending:
            self._announce("at the end of the first step")

    def _settle_pending(self, *, at_exit: bool) -> None:
        """Give each hook still waiting for its module a reason, when there is one yet.

        A module that does not exist is a typo at any time; one that exists
        (or may, on another path) but was never imported is a problem only
        at exit, and only in a process whose hooks saw calls (a launcher or a
        driver never imports the trainer).
        """
        calls = self.setup.calls
        for spec in self._hooks.pending:
            status = self.setup.hook(spec.role, spec.target)
            if status is None or status.problem is not None:
                continue
            if spec.origin == "preset":
                # a preset covers every path of its trainer; one process runs some: not a problem, but said
                status.not_exercised = at_exit and calls > 0 and module_state(spec.module) != "imported"
                continue
            status.problem = not_installed_reason(spec.module, calls=calls, at_exit=at_exit)

    def _announce(self, when: str) -> None:
        """Raise (raise mode) or warn (warn mode) about what was not set up, once; record mode leaves it to the summary."""
        if not self.debug_run or self.setup.announced or not self.setup.has_problems():
            return
        self.setup.announced = True
        if self.mode == "raise":
            raise self.setup.error(when)
        if self.mode == "warn":
            from layoutcheck.runtime.reporting.modes import LayoutWarning, user_stacklevel

            text = "\n".join(self.setup.issues())
            warnings.warn(f"the debug mode is not checking what its configuration says ({when}):\n{text}",
                          LayoutWarning, stacklevel=user_stacklevel())

    def _write_quietly(self, event: str = "end") -> Path | None:
        try:
            return self.write_report(event=event)
        except Exception as err:  # a report must never fail the training step, nor the exit
            print(f"layoutcheck: could not write the run report: {err}", file=sys.stderr)
            return None

    def _hook_error(self, spec: HookSpec, err: LayoutSpecError) -> None:
        # A session the environment started: the process stops here, in the import that installs the hook,
        # before any call of it (one message, no traceback). Otherwise raise mode: the error surfaces where the
        # hook was installed, naming the key and the file; warn / record: the function runs unchecked, and the
        # user is told once, and at exit.
        status = self.setup.add(HookStatus(spec.role, spec.target, self._key(spec.origin)))
        reason = str(err)
        status.problem = reason.removeprefix(f"cannot hook `{spec.target}` ({spec.role}): ")
        if self.stop_on_mistake and self.debug_run:
            _stop(_config_error(status.key, reason),
                  f"when the program imported `{spec.module}`, before any call of the hook")
        if self.mode == "raise":
            self.setup.announced = True  # raised here, at installation: before the end of the first step
            key, _, source = status.key.partition(" in ")
            raise ConfigError(f"{status.key}: {err}", key=key, source=source or None) from None
        text = f"layoutcheck could not hook `{spec.target}` ({spec.role}): {err}; its calls go through unchecked"
        self.checker.recorder.add_note(text)
        if self.mode == "warn":
            from layoutcheck.runtime.reporting.modes import LayoutWarning

            warnings.warn(text, LayoutWarning, stacklevel=2)

    def _hook_missing(self, spec: HookSpec, reason: str) -> None:
        """A package of a waiting hook's module was imported without the module: the hook can never go in.

        A hook the user named: a typo, which stops a session the environment
        started at once, before any step (`_stop`), and is the hook's problem
        otherwise. A preset's: this trainer's version or set-up has no such
        path; the summary lists it as not exercised at exit.
        """
        if spec.origin == "preset":
            return
        status = self.setup.add(HookStatus(spec.role, spec.target, self._key(spec.origin)))
        status.problem = reason
        if self.stop_on_mistake and self.debug_run:
            _stop(_config_error(status.key, f"`{spec.target}` cannot be installed: {reason}"),
                  f"when the program imported `{spec.module.rpartition('.')[0]}`, before any step")

    def close(self) -> None:
        """Uninstall every hook (restoring every name it patched)."""
        self._hooks.remove()

    # --- the run report ---------------------------------------------------

    def report_path(self) -> Path | None:
        """Where `write_report` writes by default: ``report`` with ``{rank}``/``{pid}`` filled in."""
        if not self.settings.report:
            return None
        rank, world = _rank_and_world()
        text = self.settings.report.replace("{pid}", str(os.getpid()))
        if "{rank}" in text:
            text = text.replace("{rank}", str(rank))
        elif world > 1:
            stem, dot, suffix = text.rpartition(".")
            text = f"{stem}.rank{rank}.{suffix}" if dot and "/" not in suffix else f"{text}.rank{rank}"
        path = Path(text).expanduser()
        return path if path.is_absolute() else self.root / path

    def _report_state(self) -> dict[str, Any]:
        """The run report's fields that stand for the whole run: the mode, the hooks and the set-up problems."""
        return {
            "mode": self.mode,
            "hooks": [str(s) for s in self.hooks],
            "hook_calls": [
                {"role": h.role, "target": h.target, "installed": h.installed and h.lost is None, "calls": h.calls,
                 "problem": h.problem if h.lost is None else f"lost its wrapper: {h.lost}"}
                for h in self.setup.hooks
            ],
            "problems": [{"key": p.key, "source": p.source, "message": str(p)} for p in self.setup.problems],
        }

    def _report_header(self) -> dict[str, Any]:
        from layoutcheck.version import __version__

        rank, world = _rank_and_world()
        cp = self._cp_coordinates()
        return {
            "layoutcheck_version": __version__,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "mode": self.mode,
            "config_file": str(self.config_file) if self.config_file else None,
            "rank": {
                "rank": rank, "world_size": world, "local_rank": int(os.environ.get("LOCAL_RANK", 0) or 0),
                "cp_rank": cp[0], "cp_size": cp[1], "pid": os.getpid(), "host": socket.gethostname(),
            },
            "pid": os.getpid(),
        }

    def run_report(self) -> Any:
        """What this process saw, as a `layoutcheck.runtime.reporting.runreport.RunReport` (the whole run, in memory)."""
        from layoutcheck.runtime.reporting.runreport import RunReport, ViolationRecord

        header = self._report_header()
        del header["pid"], header["mode"]
        fields = self.checker.observations.report_fields()
        rollouts = self.checker.violation_rollouts
        return RunReport(
            **header,
            **self._report_state(),
            violations=[ViolationRecord(**v.to_dict(), rollout=r) for v, r in zip(self.checker.violations, rollouts)],
            notes=self.checker.notes,
            violations_dropped=dict(self.checker.recorder.dropped),
            **fields,
        )

    def write_report(self, path: str | os.PathLike[str] | None = None, *, event: str = "end") -> Path:
        """Write the run report; returns where.

        Without ``path``: append to the session's report (`report_path`, JSON
        Lines, `layoutcheck.runtime.reporting.runlog`) what is new since its
        last write, with the run's totals as they stand; ``event`` is
        ``"rollout"`` during the run and ``"end"`` for the last write. With
        ``path``: the whole report as one JSON document, written atomically.
        """
        if path is not None:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            tmp.write_text(self.run_report().to_json(), encoding="utf-8")
            os.replace(tmp, target)
            return target
        target = self.report_path()
        if target is None:
            raise LayoutSpecError(
                "no report path: set `report` in [tool.layoutcheck.runtime] or LAYOUTCHECK_REPORT, or pass a path"
            )
        if self._log is None or self._log.path != target:
            self._log = RunLog(target)
        recorder, observed = self.checker.recorder, self.checker.observation_log
        return self._log.write(
            self._report_header,
            lambda cursor: chunk(recorder, observed, cursor, event=event, state=self._report_state()),
        )

    def _cp_coordinates(self) -> tuple[int | None, int | None]:
        try:
            state = self.checker.parallel_state() if self.checker.parallel_state is not None else None
            cp = getattr(state, "cp", None)
            return (getattr(cp, "rank", None), getattr(cp, "size", None)) if cp is not None else (None, None)
        except Exception:  # the parallel state may be gone at exit: the report goes out without it
            return (None, None)

    def _at_exit(self) -> None:
        # A process whose hooks neither went in nor saw a problem (a launcher, a Ray driver, pip) stays quiet.
        last_step: list[Any] = []
        recorder = self.checker.recorder
        seen = at_exit = len(recorder.violations) + sum(recorder.dropped.values())
        if self._hooks.installed:
            try:  # boundary checks still waiting for device values or the worker thread: the steps are over
                self.checker.flush(wait=True)
            except Exception as err:  # noqa: BLE001 - the exit goes on
                print(f"layoutcheck: deferred checks could not run at exit: {err}", file=sys.stderr)
            at_exit = len(recorder.violations) + sum(recorder.dropped.values())
            try:  # the last step's X1 checks, then layoutcheck's own gloo groups, before the interpreter's teardown
                last_step = self.checker.close_cross_rank()
            except Exception as err:  # noqa: BLE001 - the exit goes on
                print(f"layoutcheck: the cross-rank side group could not be closed at exit: {err}", file=sys.stderr)
        if self._hooks.installed:
            self._refresh_hooks(at_exit=True)  # "installed" at exit means still wrapped: a lost one is said
        if self.debug_run:
            self._settle_pending(at_exit=True)
        problems = self.debug_run and self.setup.has_problems()
        if not self._hooks.installed and not problems:
            return
        written = self._write_quietly() if self.settings.report else None
        rank, world = _rank_and_world()
        who = f" [rank {rank}]" if world > 1 else ""
        listed = bool(problems) and self.mode == "raise" and not self.setup.announced  # the block below lists them
        if self.settings.summary or problems:
            tail = f"; report: {written}" if written else ""
            print(f"layoutcheck{who}: {self.summary()}{tail}\n"
                  f"layoutcheck{who}: {self.setup.summary(listed_below=listed)}", file=sys.stderr)
        at_exit -= seen
        if at_exit and self.mode == "raise" and not exit_status.already_failing():
            # value checks that ran after the last hooked call (the worker thread, device copies) found these
            print(f"layoutcheck{who}: exit status 1: raise mode, and the value checks finished at exit found "
                  f"{at_exit} violation{'s' if at_exit != 1 else ''}", file=sys.stderr)
            exit_status.fail(1)
        if last_step and self.mode == "raise" and not exit_status.already_failing():
            # X1 is exchanged at step boundaries: the last step's disagreement is found here, and fails the run
            print(f"layoutcheck{who}: exit status 1: raise mode, and the last step's cross-rank exchange found "
                  f"{len(last_step)} X1 violation{'s' if len(last_step) != 1 else ''}", file=sys.stderr)
            exit_status.fail(1)
        if problems and self.mode == "raise":
            if listed:
                print(f"layoutcheck{who}: {self.setup.error('at exit')}", file=sys.stderr)
            if not exit_status.already_failing():
                print(f"layoutcheck{who}: exit status 1: raise mode, and the run was not checked as configured",
                      file=sys.stderr)
            exit_status.fail(1)


class _NoHooks(ConfigError):
    """Switched on with no hooks configured (or no file found): reported at start and exit, never a stop.

    A process that finds no file may be one the run did not mean to check
    (a tool started elsewhere, a Ray helper in another folder)."""


def _config_error(key_in_file: str, message: str) -> ConfigError:
    """A `ConfigError` for ``KEY in FILE`` (as `Session._key` spells it) and a message that may repeat the key."""
    key, _, source = key_in_file.partition(" in ")
    text = message if message.startswith(key_in_file) else f"{key_in_file}: {message}"
    return ConfigError(text, key=key, source=source or None)


def _stop(err: ConfigError, when: str) -> None:
    """End the process now, with one message and status 2: a configuration mistake in a debug run (never returns).

    The message is the error's (which names the key and the file, or the
    variable), then one line: when the process stopped, and the fix. No
    traceback, no summary: nothing was checked. Status 2, as a command-line
    tool ends on a usage error; a layout violation is 1.
    """
    what = str(err).strip()
    if err.source == "environment":
        fix = f"set {err.key} to one of the values above"
    elif err.key == ENV_CONFIG:
        fix = f"point {ENV_CONFIG} at a pyproject.toml or layoutcheck.toml, or unset it"
    elif err.key and err.source:
        fix = f"correct `{err.key}` in {err.source}"
    else:
        fix = "correct the configuration"
    print(f"layoutcheck: configuration error: {what}\n"
          f"layoutcheck: stopped {when} (pid {os.getpid()}, exit status 2): {fix}, or unset {ENV_MODE} to run "
          "without the debug mode.", file=sys.stderr)
    exit_status.fail(2)


def _rank_and_world() -> tuple[int, int]:
    # torch.distributed when it is up (never imported here), else the launcher's variables.
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:
        pass
    try:
        return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    except ValueError:
        return 0, 1


def _load(config: str | os.PathLike[str] | None, search_from: str | os.PathLike[str] | None,
          environ: Mapping[str, str]) -> tuple[RuntimeSettings, Path | None, Path, list[ConfigError], str]:
    """The runtime settings, their file, its folder, the problems left out of them, and the key prefix."""
    from layoutcheck.configfile import find_config_file, load_config

    named = config if config is not None else environ.get(ENV_CONFIG) or None
    if named is not None and config is None and not Path(named).expanduser().is_file():
        # Named by the variable, not by a file the user is looking at: the message says where the path came from.
        try:
            load_config(named)
        except ConfigError as err:
            raise ConfigError(f"{ENV_CONFIG} (environment variable) names {Path(named).expanduser().absolute()}: "
                              f"{err}", key=ENV_CONFIG) from None
    if named is not None:
        loaded = load_config(named)
    else:
        start = Path(search_from) if search_from is not None else Path.cwd()
        found = find_config_file(start.absolute())
        if found is None:
            return RuntimeSettings(), None, start.absolute(), [], "tool.layoutcheck"
        loaded = load_config(found)
    settings, problems = loaded.runtime_settings()
    return settings, loaded.path, loaded.root, problems, loaded.key_prefix


def activate(
    mode: str | None = None,
    *,
    config: str | os.PathLike[str] | None = None,
    search_from: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    trace_default: bool | None = None,
    lenient: bool = False,
    stop_on_mistake: bool = False,
) -> Session:
    """Install the configured hooks in this process and return the session.

    ``mode`` overrides the configuration and ``LAYOUTCHECK``; ``config``
    overrides ``LAYOUTCHECK_CONFIG`` and the search from ``search_from``
    (default: the working folder). ``trace_default``: whether the tracer runs
    when neither the ``tracer`` key nor ``LAYOUTCHECK_TRACE`` says (default
    off: a debug run; the pytest plugin passes ``True``). Idempotent: when a
    session is active, it is returned (with its mode switched when ``mode``
    is given, and its tracer default when it has built no hook yet). Raises
    `ConfigError` (naming the key and the file) for a bad configuration, and
    `LayoutSpecError` in raise mode for a hook that cannot be installed on an
    already imported module.

    ``lenient``: a key the file cannot contain and a bad
    ``LAYOUTCHECK``/``LAYOUTCHECK_TRACE`` value do not raise; the session
    starts with the rest and keeps them in `Session.setup` (reported at the
    end of the first step and at exit). ``stop_on_mistake``: what
    interpreter start uses (`activate_from_environment`): a hook target
    found not to resolve while the program runs ends the process with one
    message (`Session.stop_on_mistake`).
    """
    global _SESSION
    env = os.environ if environ is None else environ
    with _LOCK:
        if _SESSION is not None:
            if mode is not None:
                _SESSION.mode = mode
            if trace_default is not None:
                _SESSION.default_tracer(trace_default)
            return _SESSION
        settings, file, root, problems, prefix = _load(config, search_from, env)
        settings = effective(settings, env, problems=problems)
        if problems and not lenient:
            raise _one_error(problems)
        if env.get(ENV_REPORT):  # a path in the environment is the shell's: relative to the working folder
            settings = dataclasses.replace(settings, report=str(Path(env[ENV_REPORT]).expanduser().absolute()))
        if mode is not None:
            from layoutcheck.runtime.reporting.modes import check_mode

            settings = dataclasses.replace(settings, mode=check_mode(mode))
        if not settings.hook_specs():
            table = ".".join(p for p in (prefix, "runtime") if p) or "runtime"
            where = f"[{table}] in {file}" if file else "no configuration file was found"
            raise _NoHooks(
                f"layoutcheck is switched on, but no hooks are configured ({where}): set `preset = \"miles\"` "
                f"or `hooks` in [{table}], or name the file with LAYOUTCHECK_CONFIG"
                + "".join(f"\n  ({str(p).splitlines()[0]})" for p in problems),
                key=f"{table}.hooks", source=str(file) if file else None,
            )
        session = Session(settings, config_file=file, root=root, trace_default=bool(trace_default),
                          problems=problems, key_prefix=prefix, stop_on_mistake=stop_on_mistake)
        _SESSION = session
        atexit.register(session._at_exit)
        ray_env.install(session.mode, session.config_file, env)
        return session


def _one_error(problems: Sequence[ConfigError]) -> ConfigError:
    if len(problems) == 1:
        return problems[0]
    text = "\n".join(f"  {p}" for p in problems)
    return ConfigError(f"{len(problems)} configuration problems:\n{text}", key=problems[0].key,
                       source=problems[0].source)


def active_session() -> Session | None:
    """The active session, if any."""
    return _SESSION


def trace(session: Session | None = None, *, enabled: bool = True, layout: str | None = None) -> Tracer:
    """The tracer for a block of code: ``with trace(): ...`` (what the pytest fixture's ``layout.trace()`` returns).

    With a debug-mode ``session`` (default: the active one, if any), its
    tracer (violations in its checker's log, in its mode), made for the block
    if the session runs without one; otherwise a new ``Tracer("raise")``.
    ``enabled=False`` (or ``LAYOUTCHECK_TRACE=0``) makes the block untraced.
    """
    if session is None:
        session = active_session()
    if session is None or not enabled:
        from layoutcheck.runtime.tracing.tracer import Tracer  # imports torch: only when a block is traced

        return Tracer("raise", enabled=enabled, layout=layout)
    tracer = session.tracer_for_block()
    if layout is not None:
        tracer.layout = geometry.check_layout(layout)
    return tracer


def deactivate() -> None:
    """Uninstall every hook and end the session (its report is not written: call `write_report` first)."""
    global _SESSION
    with _LOCK:
        session, _SESSION = _SESSION, None
        if session is None:
            return
        atexit.unregister(session._at_exit)
        session.close()
        ray_env.uninstall()


def activate_from_environment(environ: Mapping[str, str] | None = None) -> Session | None:
    """What the ``.pth`` file runs at interpreter start: activate when ``LAYOUTCHECK`` says so.

    A configuration mistake stops the process here, before the program runs
    a line, with one message naming the key and the file (or the variable)
    and the fix, no traceback, and exit status 2 (`_stop`): an unknown
    ``LAYOUTCHECK`` or ``LAYOUTCHECK_TRACE`` value, a key or table the file
    cannot contain, a value of the wrong type or a malformed hook target. The
    checks never run on what a mistake left to a default (``parallel-stat``
    for ``parallel-state`` would check every sample at cp=1). A hook target
    whose module the program has not imported yet is judged when it can be:
    when its package is imported (a module the package lacks), when the
    module is (a function it lacks, a signature that does not fit its
    role), at the first hooked call (a top-level package that cannot be
    found); each stops the process the same way (`Session.stop_on_mistake`).
    Only a module that exists and is never imported is known at exit alone.

    No hooks at all (no file found, or a file without hooks) is printed now;
    at exit it is printed again and, in raise mode (the variable's, or the
    default when it names none), a process that ran code of its own exits
    with status 1. A process that ran only installed tools (``pip``: every
    module it imported comes from the standard library or site-packages)
    keeps its status: it may have been started in a folder the run did not
    mean to check.
    """
    env = os.environ if environ is None else environ
    try:
        wanted = env_mode(env)
    except ConfigError as err:
        _stop(err, "at start, before the program ran")
        return None  # only when `_stop` could not end the process (it was already failing)
    if wanted is None:
        return None
    try:
        return activate(environ=env, stop_on_mistake=True)
    except _NoHooks as err:
        print(f"layoutcheck: {err}\nlayoutcheck: nothing is checked in this process (pid {os.getpid()}).",
              file=sys.stderr)
        atexit.register(_unchecked_at_exit, err, wanted or "raise")
        return None
    except LayoutSpecError as err:  # ConfigError among them
        _stop(err if isinstance(err, ConfigError) else ConfigError(str(err)), "at start, before the program ran")
        return None


def _unchecked_at_exit(err: Exception, mode: str) -> None:
    """At exit of a process whose configuration could not be used: say so again, and fail in raise mode."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    print(f"layoutcheck: nothing was checked in this process (pid {os.getpid()}, {ENV_MODE}={mode}): {first}",
          file=sys.stderr)
    if mode == "raise" and _ran_own_code():
        exit_status.fail(1)


def _ran_own_code() -> bool:
    """Whether the process imported a module from outside the installed environment (a trainer's own code).

    ``pip`` and other installed tools import only the standard library and
    site-packages; a training job runs modules from its checkout (a path
    entry, an editable install, the script's folder). layoutcheck's own
    modules do not count.
    """
    import sysconfig

    installed = tuple({os.path.realpath(p) for key in ("stdlib", "platstdlib", "purelib", "platlib")
                       if (p := sysconfig.get_paths().get(key))})
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not path or name.partition(".")[0] in ("layoutcheck", "_layoutcheck_startup"):
            continue
        if not os.path.realpath(path).startswith(installed):
            return True
    return False
