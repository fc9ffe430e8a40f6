"""Which functions the debug mode hooks, and installing wrappers in their place by dotted path.

* `settings`: the ``[tool.layoutcheck.runtime]`` table as one frozen
  dataclass (`RuntimeSettings`, each `HookSpec`), and the ``LAYOUTCHECK*``
  environment variables applied on top;
* `presets`: known trainers' hook targets, as data (``preset = "miles"``);
* `install`: a `HookSet` puts a wrapper in place of ``package.module:function``
  now or when the program imports the module, and restores it;
* `targets`: whether a hook's module exists, judged without importing it (a
  typo, or a module this process does not use), and near names.

No pydantic and no torch: the configuration is validated by `layoutcheck.config`.
"""

from __future__ import annotations

from layoutcheck.lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from layoutcheck.runtime.hooks.install import HookSet
    from layoutcheck.runtime.hooks.presets import PRESETS
    from layoutcheck.runtime.hooks.settings import HookSpec, RuntimeSettings

_LAZY = {
    "HookSet": "layoutcheck.runtime.hooks.install",
    "PRESETS": "layoutcheck.runtime.hooks.presets",
    "HookSpec": "layoutcheck.runtime.hooks.settings",
    "RuntimeSettings": "layoutcheck.runtime.hooks.settings",
}

__all__ = ["HookSet", "HookSpec", "PRESETS", "RuntimeSettings"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
