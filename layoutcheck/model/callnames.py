"""Names of calls that are never the project's own functions.

Part of the per-file walk (`layoutcheck.model.extract`): a call of a builtin,
of an outside library's module or of a common container, tensor or logger
method is neither recorded as a call of the project (`CallSitesMixin.record_call`)
nor as a per-sample transform of a field (`StoresMixin.transform`).
"""

from __future__ import annotations

import builtins

__all__ = ["BUILTINS", "COMMON_METHODS", "EXTERNAL"]

BUILTINS = frozenset(dir(builtins))
"""The builtins: a bare call of one (not shadowed by an import) is never the project's."""
EXTERNAL = frozenset({
    "torch", "numpy", "math", "os", "sys", "logging", "re", "json", "itertools", "functools", "collections",
    "typing", "dataclasses", "time", "random", "copy", "pathlib", "shutil", "subprocess", "asyncio",
    "threading", "datetime", "warnings", "inspect", "operator", "contextlib", "abc", "enum", "string",
    "struct", "hashlib", "pickle", "argparse", "traceback", "tempfile", "glob", "io", "socket", "uuid",
    "statistics", "pytest", "unittest", "wandb", "tqdm", "numpy.random",
})
"""Outside libraries' top-level modules: a call rooted in one is never the project's."""
COMMON_METHODS = frozenset({
    "append", "extend", "insert", "pop", "remove", "clear", "items", "keys", "values", "get", "setdefault",
    "update", "copy", "size", "numel", "dim", "view", "reshape", "to", "cuda", "cpu", "item", "tolist",
    "float", "long", "int", "bool", "half", "bfloat16", "contiguous", "clone", "detach", "unsqueeze",
    "squeeze", "flatten", "sum", "mean", "max", "min", "format", "join", "split", "strip", "startswith",
    "endswith", "replace", "lower", "upper", "add", "discard", "index", "count", "sort", "fill_", "zero_",
    "copy_", "chunk", "narrow", "expand", "permute", "transpose", "masked_fill", "masked_fill_", "new_zeros",
    "new_full", "new_ones", "new_empty", "info", "debug", "warning", "error", "exception", "isoformat",
    "encode", "decode", "read", "write", "close", "cumsum", "diff", "nonzero", "any", "all", "argmax",
    "softmax", "log_softmax", "exp", "log", "gather", "scatter_", "index_select", "repeat", "type_as",
    "numpy", "wait", "synchronize", "register_buffer", "parameters", "named_parameters",
})
"""Methods of containers, tensors and loggers: a call of one is never the project's own function
(`CallSitesMixin.record_call` skips it unless the receiver is `self`/`cls` or an imported module)."""
