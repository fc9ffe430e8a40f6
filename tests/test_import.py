"""Importing layoutcheck is cheap: no torch, and every documented name resolves.

Each import runs in a fresh interpreter (a subprocess), since this test
process has imported torch long ago.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import layoutcheck


def run(code: str) -> None:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_import_layoutcheck_does_not_import_torch():
    run("import layoutcheck, sys; assert 'torch' not in sys.modules")


def test_import_layoutcheck_does_not_load_the_runtime():
    run("import layoutcheck, sys; assert 'layoutcheck.runtime' not in sys.modules, sorted(sys.modules)")


@pytest.mark.parametrize(
    "module",
    ["layoutcheck.runtime", "layoutcheck.runtime.contract.checks", "layoutcheck.runtime.checker.layout_checker",
     "layoutcheck.runtime.contract.adapters", "layoutcheck.runtime.crossrank.distributed"],
)
def test_runtime_modules_do_not_import_torch(module):
    run(f"import {module}, sys; assert 'torch' not in sys.modules")


@pytest.mark.parametrize(
    "module",
    ["layoutcheck.typing", "layoutcheck.runtime.tracing", "layoutcheck.runtime.tracing.tags",
     "layoutcheck.runtime.tracing.trace_switch", "layoutcheck.runtime.tracing.propagation",
     "layoutcheck.runtime.tracing.tagging", "layoutcheck.runtime.tracing.session_tracer"],
)
def test_tracer_modules_that_must_load_without_torch_or_typeguard(module):
    # layoutcheck.typing is typeguard's plug-in (loaded whenever typeguard is imported): it
    # must cost nothing; the tracer's switch is read before anything else is loaded.
    run(f"import {module}, sys; assert 'torch' not in sys.modules and 'typeguard' not in sys.modules, {module!r}")


def test_import_layoutcheck_does_not_import_typeguard():
    run("import layoutcheck, sys; layoutcheck.Padded; assert 'typeguard' not in sys.modules and 'torch' not in sys.modules")


def test_checks_over_plain_ints_run_without_torch():
    run(
        "import sys\n"
        "from layoutcheck import check_micro_batch, check_rollout\n"
        "v = check_micro_batch(max_seq_lens=[384, 256], total_lengths=[300, 130])\n"
        "assert [x.invariant for x in v] == ['G1'], v\n"
        "data = {'tokens': [[1] * 300], 'total_lengths': [300], 'max_seq_lens': [14080]}\n"
        "assert [x.invariant for x in check_rollout(data, unit=128)] == ['O3']\n"
        "assert 'torch' not in sys.modules\n"
    )


def test_every_public_name_is_importable():
    for name in layoutcheck.__all__:
        assert getattr(layoutcheck, name) is not None, name
    assert set(layoutcheck.__all__) <= set(dir(layoutcheck))


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        layoutcheck.nope  # noqa: B018


def test_top_level_reexports_every_runtime_name():
    # layoutcheck/__init__.py lists the runtime names lazily (so the lint path
    # never loads the runtime); this keeps that list from drifting.
    import layoutcheck.runtime as runtime

    assert set(runtime.__all__) <= set(layoutcheck.__all__)
    for name in runtime.__all__:
        assert getattr(layoutcheck, name) is getattr(runtime, name), name


def test_top_level_reexports_every_tracer_name():
    # The tracer's modules import torch, so the runtime package does not load them;
    # layoutcheck/__init__.py lists their public names lazily, and this keeps the lists in sync.
    import importlib

    import layoutcheck.typing

    modules = [
        "layoutcheck.runtime.tracing.tags", "layoutcheck.runtime.tracing.tracer", "layoutcheck.runtime.tracing.tagging"
    ]
    for module in map(importlib.import_module, modules):
        assert set(module.__all__) <= set(layoutcheck.__all__), module.__name__
        for name in module.__all__:
            assert getattr(layoutcheck, name) is getattr(module, name), name
    assert layoutcheck.Padded is layoutcheck.typing.Padded
    lazy = {name for name, module in layoutcheck._LAZY.items() if module in modules}
    assert lazy == {n for m in modules for n in importlib.import_module(m).__all__}


RUNTIME_SUBPACKAGES = ["activation", "checker", "contract", "crossrank", "hooks", "reporting", "tracing"]


@pytest.mark.parametrize("name", RUNTIME_SUBPACKAGES)
def test_runtime_subpackage_loads_nothing_until_a_name_is_used(name):
    # Each subpackage's public names load their module on first access: importing the
    # package (as importing any of its modules does) loads none of its modules, nor torch.
    run(
        f"import sys, layoutcheck.runtime.{name} as package\n"
        f"loaded = sorted(m for m in sys.modules if m.startswith('layoutcheck.runtime.{name}.'))\n"
        "assert not loaded and 'torch' not in sys.modules, loaded\n"
    )


@pytest.mark.parametrize("name", RUNTIME_SUBPACKAGES)
def test_runtime_subpackage_exports_each_public_name_from_its_module(name):
    import importlib

    package = importlib.import_module(f"layoutcheck.runtime.{name}")
    assert package.__all__ and sorted(package.__all__) == sorted(package._LAZY), name
    assert package.__doc__ and package.__doc__.strip(), name
    for public in package.__all__:
        module = importlib.import_module(package._LAZY[public])
        assert module.__name__.startswith(package.__name__ + "."), (public, module.__name__)
        assert getattr(package, public) is getattr(module, public), public
    assert set(package.__all__) <= set(dir(package))
    with pytest.raises(AttributeError, match=f"module 'layoutcheck.runtime.{name}' has no attribute 'nope'"):
        package.nope  # noqa: B018
