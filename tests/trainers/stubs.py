"""What a CPU cannot import or run, stubbed for a trainer's data path, with the reason for each.

Only the child processes that run a trainer install these (`install`), never
the test process. Everything not listed here is the real package, pinned
(`trainers.pins`).

Two kinds:

* **Module stubs** (`MODULE_STUBS`): an import of the module, or of anything
  below it, gives a stub module. Any name read from it is a placeholder that
  is harmless at import time (a base class, an annotation, ``@decorator``,
  ``@decorator(...)``) and raises `StubUsed` as soon as the data path really
  uses it (calls it with data, reads an attribute of what it returned). So a
  stub can never stand in silently for code that matters.
* **CUDA calls on CPU** (`CUDA_ON_CPU`): the trainers place tensors with
  ``torch.cuda.current_device()`` and ``.cuda()``, and pin host memory; on a
  CPU build each raises. Here the current device is the CPU, ``.cuda()`` keeps
  a tensor where it is, and pinning is a no-op. Shapes and values are those of
  the GPU run.
"""

from __future__ import annotations

import importlib.machinery
import inspect
import sys
import types
from collections.abc import Iterable
from typing import Any

__all__ = ["CUDA_ON_CPU", "MODULE_STUBS", "StubUsed", "install", "install_cuda_on_cpu", "install_module_stubs"]

MODULE_STUBS: dict[str, str] = {
    "sglang": "the inference server. Its package needs CUDA kernels (sgl-kernel, triton) to import; the trainers "
              "import it at module level for weight sync to the engines and for one pydantic type in their chat "
              "templates. The training data path never calls it.",
    "torch_memory_saver": "a CUDA extension that offloads GPU memory while an actor sleeps; used by the actors' "
                          "sleep/wake methods only.",
    "megatron.training": "Megatron-LM's training package is not part of the megatron-core wheel on PyPI (which is "
                         "real here); slime's actor module imports its argument, checkpoint and tokenizer helpers at "
                         "module level, none of which the data path calls.",
    "wandb": "the experiment tracker's client, a network service; imported at module level by the trainers' "
             "tracking utilities, never called on the data path.",
    "slime.utils.fp8_kernel": "Triton GPU kernels (fp8 quantisation for weight sync). Triton itself is not stubbed: "
                              "torch probes for it, and a stub would make torch believe it can compile kernels.",
}
"""Module prefix -> why it is stubbed."""

CUDA_ON_CPU: dict[str, str] = {
    "torch.cuda.current_device": "returns the CPU device: the trainers create every tensor on it",
    "torch.Tensor.cuda": "returns the tensor itself: it is already on the (CPU) current device",
    "torch.Tensor.pin_memory": "returns the tensor itself: pinned host memory needs a GPU driver",
    "torch.empty_like": "ignores pin_memory=True, for the same reason (routing-replay buffers are pinned)",
}
"""What the CUDA-on-CPU shim replaces -> what it does instead."""


class StubUsed(RuntimeError):
    """The data path used something that is only a stub here: the harness must not stub it."""


def _decoratable(obj: object) -> bool:
    return inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj)


class _Inert:
    """What calling a placeholder returns: ``@placeholder(...)`` still decorates; any other use raises."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and _decoratable(args[0]):
            return args[0]
        raise StubUsed(f"{self._name} is a stub (tests/trainers/stubs.py); the data path called its result")

    def __getattr__(self, attr: str) -> Any:
        raise StubUsed(f"{self._name}.{attr}: {self._name} is a stub (tests/trainers/stubs.py)")


class _PlaceholderMeta(type):
    """Placeholder classes: subclassable, usable in annotations and as decorators; called with data, inert."""

    _stub_name: str

    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _placeholder(f"{cls._stub_name}.{attr}", cls.__module__)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and _decoratable(args[0]):
            return args[0]
        return _Inert(f"{cls._stub_name}(...)")

    def __getitem__(cls, item: object) -> Any:
        return cls


def _placeholder(name: str, module: str) -> type:
    return _PlaceholderMeta(name.rsplit(".", 1)[-1], (), {"_stub_name": name, "__module__": module})


class _StubModule(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        value = _placeholder(f"{self.__name__}.{attr}", self.__name__)
        setattr(self, attr, value)
        return value


class _StubFinder:
    """A `sys.meta_path` finder answering for the stubbed prefixes only, before the real ones."""

    def __init__(self, prefixes: Iterable[str]) -> None:
        self.prefixes = tuple(prefixes)

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if any(name == p or name.startswith(p + ".") for p in self.prefixes):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []  # a package: submodules resolve through this finder too
        module.__file__ = __file__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def install_module_stubs(names: Iterable[str]) -> None:
    """Stub the modules ``names`` (each a key of `MODULE_STUBS`) for the rest of this process."""
    names = list(names)
    unknown = [n for n in names if n not in MODULE_STUBS]
    if unknown:
        raise ValueError(f"no stub is documented for {unknown}: add it to MODULE_STUBS with the reason")
    present = [n for n in names if n in sys.modules]
    if present:
        raise RuntimeError(f"{present} already imported: install the stubs before importing the trainer")
    if names:
        sys.meta_path.insert(0, _StubFinder(names))


def install_cuda_on_cpu() -> None:
    """Make the trainers' CUDA placement calls work on a CPU build of torch (see `CUDA_ON_CPU`)."""
    import torch

    if torch.cuda.is_available():
        return  # a real GPU: nothing to stand in for
    cpu = torch.device("cpu")
    real_empty_like = torch.empty_like

    def empty_like(*args: Any, pin_memory: bool = False, **kwargs: Any) -> torch.Tensor:
        return real_empty_like(*args, **kwargs)

    torch.cuda.current_device = lambda: cpu  # type: ignore[assignment]
    torch.Tensor.cuda = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    torch.Tensor.pin_memory = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    torch.empty_like = empty_like  # type: ignore[assignment]


def install(module_stubs: Iterable[str] = (), *, cuda_on_cpu: bool = False) -> None:
    """Install the named module stubs and, if asked, the CUDA-on-CPU shim."""
    install_module_stubs(module_stubs)
    if cuda_on_cpu:
        install_cuda_on_cpu()
