"""Hooks by dotted path: every reference a caller can hold is rebound, and restored.

Real modules written to a temporary folder and imported for real: the target
module, callers that import the function by name before and after the hook,
a class with a method, a static method and a class method.
"""

from __future__ import annotations

import importlib
import itertools
import sys
import textwrap
import threading

import pytest

from layoutcheck.errors import LayoutSpecError
from layoutcheck.runtime.hooks.install import HookSet
from layoutcheck.runtime.hooks.settings import HookSpec


_COUNTER = itertools.count()


@pytest.fixture
def pkg(tmp_path, monkeypatch):
    """A fresh package `hk<N>` with a target module and callers; removed from sys.modules afterwards."""
    name = f"hookpkg{next(_COUNTER)}"
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "data.py").write_text(textwrap.dedent("""
        def get_batch(data_iterator, keys, pad_multiplier=128):
            return ("batch", data_iterator, tuple(keys), pad_multiplier)

        class Builder:
            def build(self, x):
                return ("build", x)

            @staticmethod
            def static(x):
                return ("static", x)

            @classmethod
            def klass(cls, x):
                return ("klass", cls.__name__, x)

        NOT_A_FUNCTION = 3
        """))
    (root / "early.py").write_text(f"from {name}.data import get_batch\n")
    (root / "late.py").write_text(f"from {name}.data import get_batch\nfrom {name} import data\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]


def tagging(spec: HookSpec, original):
    def wrapper(*args, **kwargs):
        return ("hooked", spec.role, original(*args, **kwargs))

    return wrapper


def test_a_hook_added_before_the_import_is_installed_when_the_module_is_imported(pkg):
    hooks = HookSet(tagging)
    hooks.add([HookSpec("batch-builder", f"{pkg}.data:get_batch")])
    assert hooks.pending and not hooks.installed
    assert pkg + ".data" not in sys.modules  # adding imports nothing
    late = importlib.import_module(f"{pkg}.late")
    assert late.get_batch("it", ["tokens"]) == ("hooked", "batch-builder", ("batch", "it", ("tokens",), 128))
    assert late.data.get_batch is late.get_batch
    # the module is handed back to its real loader: nothing of ours stays on it
    assert type(late.data.__loader__).__name__ == "SourceFileLoader"
    assert hooks.installed and not hooks.pending
    hooks.remove()
    assert late.get_batch("it", []) == ("batch", "it", (), 128)
    assert late.data.get_batch("it", []) == ("batch", "it", (), 128)


def test_copies_taken_by_name_before_the_hook_are_rebound_and_restored(pkg):
    early = importlib.import_module(f"{pkg}.early")
    data = sys.modules[f"{pkg}.data"]
    original = data.get_batch
    hooks = HookSet(tagging)
    hooks.add([HookSpec("batch-builder", f"{pkg}.data:get_batch")])
    assert early.get_batch is data.get_batch is not original
    assert early.get_batch("x", ())[0] == "hooked"
    later = importlib.import_module(f"{pkg}.late")  # a copy of the wrapper, taken after installation
    assert later.get_batch is data.get_batch
    hooks.remove()
    assert early.get_batch is data.get_batch is later.get_batch is original


def test_methods_static_methods_and_class_methods(pkg):
    data = importlib.import_module(f"{pkg}.data")
    hooks = HookSet(tagging)
    hooks.add([
        HookSpec("batch-builder", f"{pkg}.data:Builder.build"),
        HookSpec("batch-builder", f"{pkg}.data:Builder.static"),
        HookSpec("batch-builder", f"{pkg}.data:Builder.klass"),
    ])
    b = data.Builder()
    assert b.build(1) == ("hooked", "batch-builder", ("build", 1))
    assert data.Builder.static(2) == ("hooked", "batch-builder", ("static", 2))
    assert b.klass(3) == ("hooked", "batch-builder", ("klass", "Builder", 3))
    assert isinstance(vars(data.Builder)["static"], staticmethod)
    hooks.remove()
    assert b.build(1) == ("build", 1) and data.Builder.static(2) == ("static", 2)
    assert data.Builder.klass(3) == ("klass", "Builder", 3)


def test_installing_twice_or_from_two_hook_sets_wraps_once(pkg):
    data = importlib.import_module(f"{pkg}.data")
    spec = HookSpec("batch-builder", f"{pkg}.data:get_batch")
    first, second = HookSet(tagging), HookSet(tagging)
    first.add([spec, spec])
    second.add([spec])
    assert data.get_batch("x", ()) == ("hooked", "batch-builder", ("batch", "x", (), 128))
    assert len(first.installed) == 1 and not second.installed
    first.remove()
    assert data.get_batch("x", ())[0] == "batch"


def test_concurrent_installation_installs_one_wrapper(pkg):
    data = importlib.import_module(f"{pkg}.data")
    spec = HookSpec("batch-builder", f"{pkg}.data:get_batch")
    sets = [HookSet(tagging) for _ in range(8)]
    threads = [threading.Thread(target=s.add, args=([spec],)) for s in sets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(len(s.installed) for s in sets) == 1
    assert data.get_batch("x", ())[0] == "hooked"
    for s in sets:
        s.remove()
    assert data.get_batch("x", ())[0] == "batch"


def test_a_missing_target_names_the_path_and_the_attribute(pkg):
    importlib.import_module(f"{pkg}.data")
    with pytest.raises(LayoutSpecError, match=rf"cannot hook `{pkg}.data:get_bach` \(producer\): `{pkg}.data` has no attribute `get_bach`"):
        HookSet(tagging).add([HookSpec("producer", f"{pkg}.data:get_bach")])
    with pytest.raises(LayoutSpecError, match="it is a int, not a function"):
        HookSet(tagging).add([HookSpec("producer", f"{pkg}.data:NOT_A_FUNCTION")])


def test_an_install_error_surfaces_from_the_import_or_goes_to_on_error(pkg):
    def refuse(spec, original):
        raise LayoutSpecError(f"`{original.__name__}` has no parameter `args`")

    hooks = HookSet(refuse)
    hooks.add([HookSpec("producer", f"{pkg}.data:get_batch")])
    with pytest.raises(LayoutSpecError, match="has no parameter `args`"):
        importlib.import_module(f"{pkg}.data")
    assert f"{pkg}.data" not in sys.modules  # the import failed, as any import that raises

    seen = []
    quiet = HookSet(refuse, on_error=lambda spec, err: seen.append((spec.target, str(err))))
    quiet.add([HookSpec("producer", f"{pkg}.data:get_batch")])
    data = importlib.import_module(f"{pkg}.data")
    assert data.get_batch("x", ())[0] == "batch"  # left alone
    assert seen == [(f"{pkg}.data:get_batch", "`get_batch` has no parameter `args`")]
    assert len(quiet.errors) == 1


def test_the_finder_leaves_sys_meta_path_when_nothing_is_watched(pkg):
    hooks = HookSet(tagging)
    hooks.add([HookSpec("producer", f"{pkg}.data:get_batch")])
    finders = [type(f).__name__ for f in sys.meta_path]
    assert "_PostImportFinder" in finders
    hooks.remove()
    assert "_PostImportFinder" not in [type(f).__name__ for f in sys.meta_path]
    importlib.import_module(f"{pkg}.data")
    assert sys.modules[f"{pkg}.data"].get_batch("x", ())[0] == "batch"


# --- a hook stays in place: reload, a second import, an assignment over it (issue 29, point 3) --------


def test_a_reloaded_module_gets_its_new_function_wrapped_at_once(pkg):
    hooks = HookSet(tagging)
    hooks.add([HookSpec("batch-builder", f"{pkg}.data:get_batch"), HookSpec("batch-builder", f"{pkg}.data:Builder.build")])
    data = importlib.import_module(f"{pkg}.data")
    before = data.get_batch
    importlib.reload(data)  # the body runs again: new function and class objects
    assert data.get_batch is not before
    assert data.get_batch("x", ())[0] == "hooked" and data.Builder().build(1)[0] == "hooked"
    assert len(hooks.installed) == 2 and hooks.lost == {} and hooks.take_reinstalled() == []
    hooks.refresh(reinstall=False)  # found again: nothing lost
    assert hooks.lost == {}
    hooks.remove()
    assert data.get_batch("x", ())[0] == "batch" and data.Builder().build(1)[0] == "build"


def test_a_hooked_module_imported_again_under_another_name_is_wrapped_too(pkg, tmp_path, monkeypatch):
    hooks = HookSet(tagging)
    hooks.add([HookSpec("batch-builder", f"{pkg}.data:get_batch")])
    importlib.import_module(f"{pkg}.data")
    monkeypatch.syspath_prepend(str(tmp_path / pkg))  # the package's folder on the path: `data` is the same file
    try:
        second = importlib.import_module("data")
        assert second is not sys.modules[f"{pkg}.data"]
        assert second.get_batch("x", ())[0] == "hooked"
        hooks.remove()
        assert second.get_batch("x", ())[0] == "batch"
    finally:
        sys.modules.pop("data", None)


def test_a_function_assigned_over_the_wrapper_is_reinstalled_or_reported_lost(pkg):
    hooks = HookSet(tagging)
    hooks.add([HookSpec("batch-builder", f"{pkg}.data:get_batch")])
    data = importlib.import_module(f"{pkg}.data")

    def patched(data_iterator, keys):
        return ("patched",)

    data.get_batch = patched
    hooks.refresh(reinstall=False)  # at exit: said, not fixed
    (why,) = hooks.lost.values()
    assert f"`{pkg}.data:get_batch` was replaced by `{__name__}.{patched.__qualname__}`" in why
    assert not hooks.installed  # "installed" means wrapped now
    hooks.refresh(reinstall=True)  # a step boundary: wrapped again
    assert data.get_batch("x", ()) == ("hooked", "batch-builder", ("patched",))
    assert hooks.lost == {} and [s.target for s, _ in hooks.take_reinstalled()] == [f"{pkg}.data:get_batch"]
    assert len(hooks.installed) == 1
    hooks.remove()
    assert data.get_batch is patched


def test_a_waiting_hook_whose_package_lacks_the_module_is_told_when_the_package_is_imported(pkg):
    missing = []
    hooks = HookSet(tagging, on_missing=lambda spec, why: missing.append((spec.target, why)))
    hooks.add([HookSpec("batch-builder", f"{pkg}.dataa:get_batch"), HookSpec("producer", f"{pkg}.data:get_batch")])
    assert missing == []
    importlib.import_module(pkg)  # the package's body ran: it has no `dataa`
    assert missing == [(f"{pkg}.dataa:get_batch", f"module `{pkg}.dataa` does not exist: `{pkg}` has no module "
                        f"`dataa`; did you mean `{pkg}.data`?")]
    assert len(hooks.pending) == 2
    hooks.remove()
