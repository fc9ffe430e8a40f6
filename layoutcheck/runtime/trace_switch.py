"""Whether the tracer runs: ``LAYOUTCHECK_TRACE``, the ``tracer`` config key, and the default per mode.

Precedence: the environment variable (``LAYOUTCHECK_TRACE=0|1``, set per run
without touching the config), then the setting (``tracer = true|false`` in
``[tool.layoutcheck.runtime]``, passed in by the caller that read the
config), then the default for the mode.

The default is on in ``raise`` and ``record`` mode (tests, CI, debugging
runs: the point is to find the bug) and off in ``warn`` mode (production
runs): on the reference data path the tracer costs more than the 1.05x
budget of an always-on check (``benchmarks/tracer_overhead.py``; figures in
README "The tracer"), while the hooks' boundary checks stay on in every mode.

No torch import: the activation path asks before anything is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from layoutcheck.errors import ConfigError

__all__ = ["DEFAULT_TRACE", "TRACE_ENV", "tracer_enabled"]

TRACE_ENV = "LAYOUTCHECK_TRACE"

DEFAULT_TRACE: dict[str, bool] = {"raise": True, "record": True, "warn": False}
"""The tracer's default per mode when neither the environment nor the config says."""

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


def tracer_enabled(mode: str, setting: bool | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the tracer runs in ``mode``, given the config ``setting`` (``None``: not set) and the environment.

    A value of ``LAYOUTCHECK_TRACE`` other than ``0``/``1`` (or
    ``true``/``false``, ``yes``/``no``, ``on``/``off``) raises `ConfigError`
    naming the variable; so does a setting that is not a bool.
    """
    env = os.environ if environ is None else environ
    raw = env.get(TRACE_ENV)
    if raw is not None:
        value = raw.strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise ConfigError(
            f"environment variable {TRACE_ENV}={raw!r}: expected 0 or 1 (or true/false)",
            key=TRACE_ENV, source="environment",
        )
    if setting is not None:
        if not isinstance(setting, bool):
            raise ConfigError(
                f"`tracer` must be true or false, got {setting!r}", key="tracer", source="[tool.layoutcheck.runtime]"
            )
        return setting
    if mode not in DEFAULT_TRACE:
        from layoutcheck.runtime.reporting import check_mode

        check_mode(mode)  # raises the usual LayoutSpecError
    return DEFAULT_TRACE[mode]
