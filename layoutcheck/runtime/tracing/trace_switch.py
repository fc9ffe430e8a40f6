"""Whether the tracer runs: ``LAYOUTCHECK_TRACE``, the ``tracer`` config key, and the default per mode.

Precedence: the environment variable (``LAYOUTCHECK_TRACE=0|1``, set per run
without touching the config), then the setting (``tracer = true|false`` in
``[tool.layoutcheck.runtime]``, passed in by the caller that read the
config), then the default for the mode.

This module's default, for a `Tracer` built by hand, is on in ``raise`` and
``record`` mode and off in ``warn`` mode. The debug mode decides its own
default (`layoutcheck.runtime.activation.session.Session`): on under the pytest
plugin (CI, small inputs), off in a debug run, since on the reference data
path the tracer costs more than the 1.05x budget of an always-on check
(``benchmarks/runtime_overhead.py``; figures in README "The tracer"), while
the hooks' boundary checks stay on in every mode.

The environment is parsed by `layoutcheck.runtime.hooks.settings` (one reading of
``LAYOUTCHECK_TRACE``); its ``tracer`` key is ``None`` when not set. No
torch import: the activation path asks before anything is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from layoutcheck.errors import ConfigError
from layoutcheck.runtime.hooks.settings import ENV_TRACE, env_flag

__all__ = ["DEFAULT_TRACE", "TRACE_ENV", "tracer_enabled"]

TRACE_ENV = ENV_TRACE

DEFAULT_TRACE: dict[str, bool] = {"raise": True, "record": True, "warn": False}
"""The tracer's default per mode when neither the environment nor the config says."""


def tracer_enabled(mode: str, setting: bool | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the tracer runs in ``mode``, given the config ``setting`` (``None``: not set) and the environment.

    ``LAYOUTCHECK_TRACE`` is read as `layoutcheck.runtime.hooks.settings` reads it
    (``1``/``0``, ``on``/``off``, ...; anything else raises `ConfigError`
    naming the variable); so is a setting that is not a bool.
    """
    flag = env_flag(os.environ if environ is None else environ, ENV_TRACE)
    if flag is not None:
        return flag
    if setting is not None:
        if not isinstance(setting, bool):
            raise ConfigError(
                f"`tracer` must be true or false, got {setting!r}", key="tracer", source="[tool.layoutcheck.runtime]"
            )
        return setting
    if mode not in DEFAULT_TRACE:
        from layoutcheck.runtime.reporting.modes import check_mode

        check_mode(mode)  # raises the usual LayoutSpecError
    return DEFAULT_TRACE[mode]
