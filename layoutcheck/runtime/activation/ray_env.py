"""Carrying the debug mode into Ray workers.

Real trainers run as Ray actors, started by a driver. An actor on a cluster
started before the driver (``ray start --head``, then ``ray.init(address=
"auto")``) does not inherit the driver's environment (measured with ray
2.60), so ``LAYOUTCHECK`` set in the user's shell never reaches it. When the
debug mode is active in the driver, this module hooks ``ray.init`` (when the
program imports ray, or at once if it already has) so that the job's
``runtime_env`` carries layoutcheck's variables to every worker, where the
``.pth`` file then activates the hooks at interpreter start. Values the user
put in ``runtime_env["env_vars"]`` win. ``LAYOUTCHECK_CONFIG`` and
``LAYOUTCHECK_REPORT`` are passed as absolute paths, since a worker's working
folder is Ray's, not the driver's.

A job submitted with ``ray job submit --runtime-env-json '{"env_vars":
{"LAYOUTCHECK": "raise", "LAYOUTCHECK_CONFIG": "/abs/pyproject.toml"}}'``
needs none of this: Ray gives those variables to the driver and the workers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from layoutcheck.runtime.hooks.install import HookSet
from layoutcheck.runtime.hooks.settings import ENV_CONFIG, ENV_MODE, ENV_REPORT, ENV_TRACE, HookSpec

__all__ = ["install", "uninstall", "worker_env"]

_HOOKS: HookSet | None = None


def worker_env(mode: str, config_file: Path | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables a Ray worker needs to activate like this process (its session's ``mode`` and ``config_file``)."""
    out = {ENV_MODE: environ.get(ENV_MODE) or mode}
    if config_file is not None:
        out[ENV_CONFIG] = str(config_file)
    if environ.get(ENV_REPORT):
        out[ENV_REPORT] = str(Path(environ[ENV_REPORT]).expanduser().absolute())
    if environ.get(ENV_TRACE):
        out[ENV_TRACE] = environ[ENV_TRACE]
    return out


def _with_env(runtime_env: Any, variables: Mapping[str, str]) -> dict[str, Any]:
    merged = dict(runtime_env) if isinstance(runtime_env, Mapping) else {}
    user = merged.get("env_vars") or {}
    merged["env_vars"] = {**variables, **user}
    return merged


def install(mode: str, config_file: Path | None, environ: Mapping[str, str]) -> None:
    """Hook ``ray.init`` so that the job's ``runtime_env`` carries `worker_env` (only when ``LAYOUTCHECK`` is set)."""
    global _HOOKS
    if _HOOKS is not None or not environ.get(ENV_MODE):
        return
    variables = worker_env(mode, config_file, environ)

    def wrap(spec: HookSpec, init: Callable[..., Any]) -> Callable[..., Any]:
        def init_with_layoutcheck(*args: Any, **kwargs: Any) -> Any:
            job_config = kwargs.get("job_config")
            if job_config is not None and getattr(job_config, "runtime_env", None):
                job_config.set_runtime_env(_with_env(job_config.runtime_env, variables))
            else:
                kwargs["runtime_env"] = _with_env(kwargs.get("runtime_env"), variables)
            return init(*args, **kwargs)

        init_with_layoutcheck.__wrapped__ = init  # type: ignore[attr-defined]
        init_with_layoutcheck.__doc__ = init.__doc__
        return init_with_layoutcheck

    _HOOKS = HookSet(wrap, on_error=lambda spec, err: None)  # a ray without `init`: nothing to carry
    _HOOKS.add([HookSpec("ray", "ray:init")])


def uninstall() -> None:
    """Restore ``ray.init``."""
    global _HOOKS
    if _HOOKS is not None:
        _HOOKS.remove()
        _HOOKS = None
