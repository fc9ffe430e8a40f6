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
`Session` per process holds the checker, the installed hooks and the run
report (``report`` / ``$LAYOUTCHECK_REPORT``, written at exit and by
`Session.write_report`).
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
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layoutcheck import geometry
from layoutcheck.errors import ConfigError, LayoutSpecError, Violation
from layoutcheck.runtime.activation import ray_env
from layoutcheck.runtime.hooks.install import HookSet
from layoutcheck.runtime.hooks.settings import (
    BOUNDARY,
    ENV_CONFIG,
    ENV_REPORT,
    TRACER_ROLES,
    HookSpec,
    RuntimeSettings,
    effective,
    env_mode,
)

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

    def __call__(self) -> Any:
        if self._fn is None:
            module, _, qualname = self.target.partition(":")
            try:
                value: Any = importlib.import_module(module)
                for part in qualname.split("."):
                    value = getattr(value, part)
            except (ImportError, AttributeError) as err:
                raise LayoutSpecError(f"{self.key} = {self.target!r} cannot be loaded: {err}") from None
            self._fn = value
        return self._fn()


class Session:
    """One process's debug mode: settings, checker, hooks and report."""

    def __init__(self, settings: RuntimeSettings, *, config_file: Path | None, root: Path,
                 trace_default: bool = False) -> None:
        from layoutcheck.runtime.checker.layout_checker import CrossRankOptions, LayoutChecker

        self.settings = settings
        # The tracer: `tracer` (with LAYOUTCHECK_TRACE applied), else `trace_default` (on under the
        # pytest plugin, off in a debug run). Its roles are hooked only when it is on.
        self._tracing = settings.tracer if settings.tracer is not None else trace_default
        self._session_tracer: Any = None
        self.config_file = config_file
        self.root = root
        parallel = settings.parallel_state_target
        self.checker = LayoutChecker(
            settings.mode,
            parallel_state=None if parallel is None else _Target(parallel, "tool.layoutcheck.runtime.parallel-state"),
            layout=settings.layout_value,
            buckets=settings.buckets,
            cross_rank=CrossRankOptions(settings.cross_rank_every, settings.cross_rank_timeout)
            if settings.cross_rank else None,
        )
        self.boundaries = self._boundaries(settings, config_file)
        """The boundary contracts, by function (`layoutcheck.runtime.contract.boundary.BoundarySpec`)."""
        self._coordinates = self._coordinate_sources(settings, config_file)
        if parallel is None and self._coordinates.configured:
            # the roles read Miles's parallel state: a trainer that keeps its coordinates elsewhere gives them here
            self.checker.parallel_state = self._coordinates.as_parallel_state()
        self._hooks = HookSet(self._wrap, on_error=self._hook_error)
        self._hooks.add(s for s in settings.hook_specs() if self._tracing or s.role not in TRACER_ROLES)

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
        self._hooks.add(s for s in self.settings.hook_specs() if s.role in TRACER_ROLES)

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

    @staticmethod
    def _boundaries(settings: RuntimeSettings, config_file: Path | None) -> dict[str, Any]:
        from layoutcheck.runtime.contract.boundary import parse_boundary

        out = {}
        for target, table in settings.boundary_tables().items():
            where = str(config_file) if target in settings.boundaries and config_file else (
                f"preset {settings.preset!r}" if target not in settings.boundaries else None)
            try:
                out[target] = parse_boundary(target, table, source_file=where)
            except LayoutSpecError as err:  # validated with the file already: a preset's own table is wrong
                raise ConfigError(f'runtime.boundaries."{target}" in {where}: {err}',
                                  key=f'runtime.boundaries."{target}"', source=where) from None
        return out

    def _coordinate_sources(self, settings: RuntimeSettings, config_file: Path | None) -> Any:
        from layoutcheck.runtime.checker.boundaries import Coordinates
        from layoutcheck.runtime.contract.boundary import parse_source

        sources = {key.replace("-", "_"): None if value is None else parse_source(value, what=f"`{key}`")
                   for key, value in settings.coordinate_sources().items()}
        return Coordinates(parallel_state=self.checker.parallel_state, **sources)

    def _wrap(self, spec: HookSpec, original: Callable[..., Any]) -> Callable[..., Any]:
        boundary = self.boundaries.get(spec.target)
        try:
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
        except LayoutSpecError as err:
            raise LayoutSpecError(f"{err} [{self._configured_at(spec, boundary)}]") from None
        if spec.role == "producer" and self.settings.report:
            return self._reporting(wrapper)
        return wrapper

    def _configured_at(self, spec: HookSpec, boundary: Any) -> str:
        # The key and the file that asked for this hook, for an error at installation.
        if boundary is not None:
            where = boundary.source_file
            key = boundary.key
        elif self.settings.preset is not None and spec.role not in self.settings.hooks:
            key, where = f"runtime.preset = {self.settings.preset!r}", str(self.config_file) if self.config_file else None
        else:
            key, where = f"runtime.hooks.{spec.role}", str(self.config_file) if self.config_file else None
        return f"configured as `{key}`" + (f" in {where}" if where else "")

    def _reporting(self, producer: Callable[..., Any]) -> Callable[..., Any]:
        """The producer's wrapper, writing the report of the rollouts so far before each new rollout.

        A process that never exits normally (a Ray actor killed at the end
        of a job) still leaves the report of every rollout but its last.
        """
        import functools

        @functools.wraps(producer)
        def layoutcheck_reporting(*args: Any, **kwargs: Any) -> Any:
            if self.checker.checked["rollouts"]:
                self._write_quietly()
            return producer(*args, **kwargs)

        return layoutcheck_reporting

    def _write_quietly(self) -> Path | None:
        try:
            return self.write_report()
        except Exception as err:  # a report must never fail the training step, nor the exit
            print(f"layoutcheck: could not write the run report: {err}", file=sys.stderr)
            return None

    def _hook_error(self, spec: HookSpec, err: LayoutSpecError) -> None:
        # raise mode: the error surfaces where the hook was installed (the program's import);
        # warn / record: the function runs unchecked, and the user is told once.
        if self.mode == "raise":
            raise err
        text = f"layoutcheck could not hook `{spec.target}` ({spec.role}): {err}; its calls go through unchecked"
        self.checker.recorder.add_note(text)
        if self.mode == "warn":
            from layoutcheck.runtime.reporting.modes import LayoutWarning

            warnings.warn(text, LayoutWarning, stacklevel=2)

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

    def run_report(self) -> Any:
        """What this process saw, as a `layoutcheck.runtime.reporting.runreport.RunReport`."""
        from layoutcheck.version import __version__
        from layoutcheck.runtime.reporting.runreport import RankInfo, RunReport, ViolationRecord

        rank, world = _rank_and_world()
        cp = self._cp_coordinates()
        fields = self.checker.observations.report_fields()
        rollouts = self.checker.violation_rollouts
        return RunReport(
            layoutcheck_version=__version__,
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            mode=self.mode,
            config_file=str(self.config_file) if self.config_file else None,
            hooks=[str(s) for s in self.hooks],
            rank=RankInfo(
                rank=rank, world_size=world, local_rank=int(os.environ.get("LOCAL_RANK", 0) or 0),
                cp_rank=cp[0], cp_size=cp[1], pid=os.getpid(), host=socket.gethostname(),
            ),
            violations=[ViolationRecord(**v.to_dict(), rollout=r) for v, r in zip(self.checker.violations, rollouts)],
            notes=self.checker.notes,
            **fields,
        )

    def write_report(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the run report (atomically) to ``path``, else to `report_path`; returns where."""
        target = Path(path) if path is not None else self.report_path()
        if target is None:
            raise LayoutSpecError(
                "no report path: set `report` in [tool.layoutcheck.runtime] or LAYOUTCHECK_REPORT, or pass a path"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(self.run_report().to_json(), encoding="utf-8")
        os.replace(tmp, target)
        return target

    def _cp_coordinates(self) -> tuple[int | None, int | None]:
        try:
            state = self.checker.parallel_state() if self.checker.parallel_state is not None else None
            cp = getattr(state, "cp", None)
            return (getattr(cp, "rank", None), getattr(cp, "size", None)) if cp is not None else (None, None)
        except Exception:  # the parallel state may be gone at exit: the report goes out without it
            return (None, None)

    def _at_exit(self) -> None:
        # Only a process that hooked something reports: a launcher or a Ray driver stays quiet.
        if not self._hooks.installed:
            return
        try:  # boundary checks still waiting for device values: the step is over, waiting is free now
            self.checker.flush(wait=True)
        except Exception as err:  # noqa: BLE001 - the exit goes on
            print(f"layoutcheck: deferred checks could not run at exit: {err}", file=sys.stderr)
        written = self._write_quietly() if self.settings.report else None
        if self.settings.summary:
            rank, world = _rank_and_world()
            who = f" [rank {rank}]" if world > 1 else ""
            tail = f"; report: {written}" if written else ""
            print(f"layoutcheck{who}: {self.summary()}{tail}", file=sys.stderr)


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
          environ: Mapping[str, str]) -> tuple[RuntimeSettings, Path | None, Path]:
    from layoutcheck.configfile import find_config_file, load_config

    named = config if config is not None else environ.get(ENV_CONFIG) or None
    if named is not None:
        loaded = load_config(named)
    else:
        start = Path(search_from) if search_from is not None else Path.cwd()
        found = find_config_file(start.absolute())
        if found is None:
            return RuntimeSettings(), None, start.absolute()
        loaded = load_config(found)
    if "runtime" not in loaded.table:
        return RuntimeSettings(), loaded.path, loaded.root
    return loaded.config.runtime.settings(), loaded.path, loaded.root


def activate(
    mode: str | None = None,
    *,
    config: str | os.PathLike[str] | None = None,
    search_from: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    trace_default: bool | None = None,
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
        settings, file, root = _load(config, search_from, env)
        settings = effective(settings, env)
        if env.get(ENV_REPORT):  # a path in the environment is the shell's: relative to the working folder
            settings = dataclasses.replace(settings, report=str(Path(env[ENV_REPORT]).expanduser().absolute()))
        if mode is not None:
            from layoutcheck.runtime.reporting.modes import check_mode

            settings = dataclasses.replace(settings, mode=check_mode(mode))
        if not settings.hook_specs():
            where = f"[tool.layoutcheck.runtime] in {file}" if file else "no configuration file was found"
            raise ConfigError(
                f"layoutcheck is switched on, but no hooks are configured ({where}): set `preset = \"miles\"` "
                "or `hooks` in [tool.layoutcheck.runtime], or name the file with LAYOUTCHECK_CONFIG",
                key="tool.layoutcheck.runtime.hooks", source=str(file) if file else None,
            )
        session = Session(settings, config_file=file, root=root, trace_default=bool(trace_default))
        _SESSION = session
        atexit.register(session._at_exit)
        ray_env.install(session.mode, session.config_file, env)
        return session


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

    A configuration error must not break every Python process of the
    environment (``pip`` included): it is printed to stderr, once, naming the
    key and the file, and nothing is hooked.
    """
    env = os.environ if environ is None else environ
    try:
        if env_mode(env) is None:
            return None
        return activate(environ=env)
    except (ConfigError, LayoutSpecError) as err:
        print(f"layoutcheck: {err}\nlayoutcheck: nothing is checked in this process (pid {os.getpid()}).",
              file=sys.stderr)
        return None
