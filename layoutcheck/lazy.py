"""Public names loaded on first access: the ``__getattr__`` and ``__dir__`` of a package's ``__init__``.

A package lists each public name with the module that defines it (explicit:
one name, one module). Importing the package then loads none of them, so
importing one small module of it (``layoutcheck.runtime.hooks.settings``
while a configuration is validated, say) loads nothing else, and torch is
imported only by the names that need it. Each ``__init__`` also imports its
names under ``TYPE_CHECKING``, for type checkers and readers.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: `import layoutcheck` stays as cheap as a replayed `check` needs
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, MutableMapping


def lazy_exports(
    package: str, namespace: MutableMapping[str, object], names: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, whose globals are ``namespace``, exporting ``names`` (name -> module)."""

    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
