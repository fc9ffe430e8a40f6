"""``[tool.layoutcheck.runtime]``: what the debug mode hooks and how, as one frozen dataclass.

Each key is defined once, here (name, type, default, description), as the
linter's keys are in `layoutcheck.lint.settings`; `layoutcheck.config`
builds the pydantic model that validates a TOML table from these fields, and
`effective` applies the environment (``LAYOUTCHECK``, ``LAYOUTCHECK_TRACE``,
``LAYOUTCHECK_REPORT``) and a preset on top. No pydantic and no torch here.

A hook target is a dotted path ``package.module:function`` (or
``package.module:Class.method``); nothing is imported to validate it: a hook
is installed when the program itself imports the module (`install`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from layoutcheck.errors import ConfigError
from layoutcheck.runtime.hooks.presets import PRESETS

if TYPE_CHECKING:
    from pydantic import PositiveFloat, PositiveInt

__all__ = [
    "ENV_CONFIG",
    "ENV_MODE",
    "ENV_REPORT",
    "ENV_TRACE",
    "BOUNDARY",
    "ROLES",
    "TARGET_PATTERN",
    "TRACER_ROLES",
    "HookSpec",
    "RuntimeSettings",
    "effective",
    "env_flag",
    "env_mode",
    "parse_target",
]

ENV_MODE = "LAYOUTCHECK"
"""``raise``, ``warn`` or ``record`` activate in that mode; ``1``/``on``/``true`` in the configured mode; ``0``/``off``/``false`` or empty: off; any other value stops the process at start (exit status 2)."""
ENV_CONFIG = "LAYOUTCHECK_CONFIG"
"""A ``pyproject.toml`` or ``layoutcheck.toml`` to read instead of searching upwards from the working folder."""
ENV_REPORT = "LAYOUTCHECK_REPORT"
"""Where to write the JSON run report (overrides ``report``)."""
ENV_TRACE = "LAYOUTCHECK_TRACE"
"""``1`` or ``0``: the tracer on or off (overrides ``tracer``)."""

ROLES: tuple[str, ...] = (
    "producer", "batch-builder", "replay-filler", "offset-helper", "cp-slicer", "response-slicer", "loss-function",
)
"""What a hooked function is, as the checks need to know (TOML spelling); a boundary contract is hooked as
``boundary`` (`BOUNDARY`)."""
BOUNDARY = "boundary"
Role = Literal[
    "producer", "batch-builder", "replay-filler", "offset-helper", "cp-slicer", "response-slicer", "loss-function",
]
TRACER_ROLES: tuple[str, ...] = ("cp-slicer", "response-slicer", "loss-function")
"""Roles hooked only while the tracer is on: the CP helpers it judges, and consumers it runs inside."""

_MODES = ("raise", "warn", "record")
_ON = ("1", "on", "true", "yes")
_OFF = ("", "0", "off", "false", "no")  # also in startup/_layoutcheck_startup.py, which imports nothing
TARGET_PATTERN = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)?\Z")


def _setting(default: Any = dataclasses.MISSING, *, factory: Any = None, description: str) -> Any:
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={"description": description})
    return dataclasses.field(default=default, metadata={"description": description})


@dataclasses.dataclass(frozen=True)
class HookSpec:
    """One function to hook: its role and where it lives (``pkg.mod:func``)."""

    role: str
    target: str
    origin: str = dataclasses.field(default="hooks", compare=False)
    """The key that configured it, relative to the runtime table: ``hooks.<role>``, or ``preset``."""

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    @property
    def qualname(self) -> str:
        return self.target.partition(":")[2]

    def __str__(self) -> str:
        return f"{self.role}: {self.target}"


def parse_target(text: str, *, key: str, source: str | None) -> str:
    """Check that ``text`` is ``pkg.mod:func`` or ``pkg.mod:Class.method``; `ConfigError` naming key and file if not."""
    if not isinstance(text, str) or not TARGET_PATTERN.match(text):
        where = f" in {source}" if source else ""
        raise ConfigError(
            f"{key}{where}: {text!r} is not a hook target; write `package.module:function` "
            "(or `package.module:Class.method`)",
            key=key, source=source,
        )
    return text


@dataclasses.dataclass(frozen=True)
class RuntimeSettings:
    """The ``[tool.layoutcheck.runtime]`` table (kebab-case keys in TOML)."""

    mode: Literal["raise", "warn", "record"] = _setting(
        "raise",
        description="What a violation does: `raise` a `LayoutError` (the training step fails), `warn` "
        "(a `LayoutWarning`), or `record` (kept for the report only). `LAYOUTCHECK=<mode>` overrides it.",
    )
    preset: Literal["miles", "slime", "verl"] | None = _setting(
        None,
        description="Fill in the hooks, boundaries and parallel coordinates of a known trainer (`miles`: the "
        "`miles.backends.training_utils` data path at 31f1ca961; `slime`: `slime.backends.megatron_utils` at a93386e51; `verl`: "
        "its Megatron path, `verl.models.mcore.util` and `verl.utils.seqlen_balancing`, 0.7-0.9). Roles given in "
        "`hooks`, and boundaries given in `boundaries`, replace the preset's for the same function.",
    )
    hooks: dict[Role, tuple[str, ...]] = _setting(
        factory=dict,
        description="Functions to check, by role (`producer`, `batch-builder`, `replay-filler`, "
        "`offset-helper`; with the tracer on, also `cp-slicer` (`slice_with_cp`), `response-slicer` "
        "(`slice_log_prob_with_cp`) and `loss-function` (a consumer of the batch, run inside the tracer)), "
        "each a list of `package.module:function` targets. A hook is installed when the program imports "
        "the module, in that module and in every module that imported the function by name.",
    )
    parallel_state: str | None = _setting(
        None,
        description="`package.module:function` returning the parallel state (`.tp.size`, `.cp.size`, "
        "`.cp.rank`); unset means one rank (tp = cp = 1).",
    )
    boundaries: dict[str, dict[str, Any]] = _setting(
        factory=dict,
        description="Boundary contracts, by function (`package.module:function`): what its arguments "
        "(`args.<parameter>`) and its return value (`returns`, `returns.<index or key>`) hold, in layout spaces "
        "(`\"T\"`, `\"len P\"`, `\"P packed cp\"`, `\"cu P packed\"`, ...), with `samples`, `unit`, `tight`, "
        "`scheme`, `tp-size`/`cp-size`/`cp-rank`, `cross-rank`; or a `role` with its `inputs`. Checked at every "
        "call: B1-B6 and X1 (README \"Boundary contracts\"; the keys in `layoutcheck.runtime.contract.boundary`).",
    )
    tp_size: str | int | None = _setting(
        None,
        description="The tensor-parallel size for boundary contracts (`tp` in their expressions): a function "
        "(`package.module:function`, or `package.module:function().attr.attr`) or an integer; unset: the "
        "parallel state's `.tp.size`, else 1.",
    )
    cp_size: str | int | None = _setting(
        None,
        description="The context-parallel size for boundary contracts (`cp`): as `tp-size`; unset: the parallel "
        "state's `.cp.size`, else 1.",
    )
    cp_rank: str | int | None = _setting(
        None,
        description="This process's context-parallel rank for boundary contracts (`rank`): as `tp-size`; unset: "
        "the parallel state's `.cp.rank`, else 0.",
    )
    cp_group: str | None = _setting(
        None,
        description="A function (`package.module:function`) returning this rank's context-parallel process group, "
        "for the boundaries' cross-rank check (X1); unset: the parallel state's `.cp.group`, else the group "
        "`cp-size` and `tp-size` give in Megatron's rank order.",
    )
    layout: Literal["bshd", "thd"] | None = _setting(
        None,
        description="The layout (`qkv_format`, `bshd` or `thd`), when known for the whole run; unset: read "
        "from the trainer's `args.qkv_format`, else from the batch builder's `qkv_format` argument.",
    )
    buckets: tuple[PositiveInt, ...] | None = _setting(
        None,
        description="Static shape buckets (multiples of 128, increasing, the max length last): each BSHD "
        "micro-batch must be padded to the smallest bucket that holds it (G6).",
    )
    tracer: bool | None = _setting(
        None,
        description="Tag tensors with their geometry along the data path and report a layout at the op that "
        "breaks it (the tracer). Unset: on under the pytest plugin (CI, small inputs), off in a debug run "
        "(it costs more than the hooks; see the docs' tracer page). `LAYOUTCHECK_TRACE=1|0` overrides it.",
    )
    report: str | None = _setting(
        None,
        description="Write the run report here, appended as JSON Lines as each rollout begins and at exit "
        "(relative to this file's folder; `{rank}` and `{pid}` are filled in). `LAYOUTCHECK_REPORT` overrides it.",
    )
    cross_rank: bool = _setting(
        True,
        description="When torch.distributed is initialised, check that all CP ranks of a micro-batch "
        "agree on P, the sample order and the CP scheme (a few ints on a gloo side group).",
    )
    cross_rank_every: PositiveInt = _setting(1, description="Check cross-rank agreement every N-th micro-batch.")
    cross_rank_timeout: PositiveFloat = _setting(
        30.0,
        description="Seconds to wait for the other CP ranks before giving up with an error that names the "
        "missing ranks (a rank whose process died is named as soon as the transport loses it). Raise mode raises "
        "it; warn and record modes record it and go on without cross-rank checks.",
    )
    value_checks: Literal["background", "inline"] = _setting(
        "inline",
        description="Where a boundary's value checks (B6, a row-padded batch's contents) of CPU tensors run: "
        "`inline`, in the call (a wrong value is raised at the call that made it, before any collective after it), "
        "or `background`, on one worker thread beside the trainer (the call only notes its tensors' version "
        "counters; what it finds is reported at the next hooked call, the step boundary or exit; a tensor written "
        "in place before its check ran is counted as not checked; for hosts with a spare core). Device tensors are always "
        "checked from an asynchronous copy at a later call; numpy arrays and lists in the call.",
    )
    summary: bool = _setting(
        True,
        description="Print a summary to stderr when the process exits: the violations and what was checked, then "
        "the hooks installed and the calls each saw. What was not set up as configured is printed even when off.",
    )

    def hook_specs(self) -> tuple[HookSpec, ...]:
        """Every hook: roles (preset first, an explicit role replaces the preset's), then boundaries.

        A boundary is hooked as ``boundary`` (its contract's checks), or as
        its ``role`` when it has one; a function that is a boundary is not
        hooked again by ``hooks``. Each spec's ``origin`` is the key that
        configured it.
        """
        roles: dict[str, tuple[tuple[str, ...], str]] = {}
        if self.preset is not None:
            roles.update({role: (targets, "preset") for role, targets in PRESETS[self.preset].hooks.items()})
        roles.update({role: (tuple(targets), f"hooks.{role}") for role, targets in self.hooks.items()})
        tables = self.boundary_tables()
        specs = [
            HookSpec(role, target, origin) for role in ROLES if role in roles
            for targets, origin in [roles[role]] for target in targets if target not in tables
        ]
        specs += [
            HookSpec(str(table.get("role") or BOUNDARY), target,
                     f'boundaries."{target}"' if target in self.boundaries else "preset")
            for target, table in tables.items()
        ]
        return tuple(specs)

    def boundary_tables(self) -> dict[str, Mapping[str, Any]]:
        """Every boundary's table: the preset's, then the configured ones (which replace the preset's)."""
        tables: dict[str, Mapping[str, Any]] = {}
        if self.preset is not None:
            tables.update(PRESETS[self.preset].boundaries)
        tables.update(self.boundaries)
        return tables

    def coordinate_sources(self) -> dict[str, str | int | None]:
        """``tp-size``, ``cp-size``, ``cp-rank``, ``cp-group``: configured, else the preset's."""
        preset = PRESETS[self.preset].coordinates if self.preset is not None else {}
        return {key: getattr(self, key.replace("-", "_")) if getattr(self, key.replace("-", "_")) is not None
                else preset.get(key) for key in ("tp-size", "cp-size", "cp-rank", "cp-group")}

    @property
    def layout_value(self) -> str | None:
        """The layout: configured, else the preset's (a trainer with one layout only), else ``None``."""
        if self.layout is not None:
            return self.layout
        return PRESETS[self.preset].layout if self.preset is not None else None

    @property
    def parallel_state_target(self) -> str | None:
        """The parallel-state function: explicit, else the preset's."""
        if self.parallel_state is not None:
            return self.parallel_state
        return PRESETS[self.preset].parallel_state if self.preset is not None else None


def env_mode(environ: Mapping[str, str]) -> str | None:
    """The mode ``LAYOUTCHECK`` asks for: a mode, ``""`` for "the configured mode", or ``None`` for off.

    Raises `ConfigError` for a value that is none of these, naming the variable.
    """
    raw = environ.get(ENV_MODE)
    if raw is None:
        return None
    value = raw.strip().lower()
    if value in _MODES:
        return value
    if value in _ON:
        return ""
    if value in _OFF:
        return None
    import difflib

    close = difflib.get_close_matches(value, _MODES, n=1)
    raise ConfigError(
        f"{ENV_MODE}={raw!r} (environment variable): "
        + (f"did you mean `{close[0]}`? " if close else "")
        + f"expected one of {', '.join(_MODES)}, 1 (the configured mode) or 0 (off)",
        key=ENV_MODE, source="environment",
    )


def env_flag(environ: Mapping[str, str], name: str) -> bool | None:
    """The on/off variable ``name`` (``1``/``0``, ``on``/``off``, ...), ``None`` when unset; else `ConfigError` naming it."""
    raw = environ.get(name)
    if raw is None:
        return None
    value = raw.strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ConfigError(f"{name}={raw!r} (environment variable): expected 1 or 0", key=name, source="environment")


def effective(
    settings: RuntimeSettings, environ: Mapping[str, str], *, problems: list[ConfigError] | None = None
) -> RuntimeSettings:
    """``settings`` with the environment applied: ``LAYOUTCHECK`` mode, ``LAYOUTCHECK_TRACE``, ``LAYOUTCHECK_REPORT``.

    A bad value raises `ConfigError` naming the variable; with ``problems``,
    it is appended there instead and the variable left out (the
    configuration's own value applies), so that the debug mode reports it
    without going quiet.
    """
    changes: dict[str, Any] = {}
    for name, read in ((ENV_MODE, env_mode), (ENV_TRACE, lambda env: env_flag(env, ENV_TRACE))):
        try:
            value = read(environ)
        except ConfigError as err:
            if problems is None:
                raise
            problems.append(err)
            continue
        if name == ENV_MODE and value:
            changes["mode"] = value
        elif name == ENV_TRACE and value is not None:
            changes["tracer"] = value
    report = environ.get(ENV_REPORT)
    if report:
        changes["report"] = report
    return dataclasses.replace(settings, **changes) if changes else settings
