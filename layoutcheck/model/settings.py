"""The domain settings the project model and the padding rules read, as a plain frozen dataclass.

`LintSettings` is what ``[tool.layoutcheck]`` says about a codebase (owners,
sources, names, helpers, test paths): the model (`layoutcheck.model`) reads it
to build the project, the rules read it to judge. It lives here, below the
linter, so that the model imports nothing from `layoutcheck.lint`; the linter's
whole table (`layoutcheck.lint.settings.CheckSettings`: these fields plus the
engine's options such as ``select`` and ``exclude``) extends it. Rules and
tests build it directly: ``LintSettings(owners={"thd": ("pkg.mod:pack",)})``.

Why dataclasses and not pydantic models: a pre-commit run checks one file,
and importing pydantic and building its models costs about as much as the
rest of the run besides libcst. So this module and `layoutcheck.lint.settings`
are the single definition of every key (name, type, default, description) and
import no pydantic; validating a TOML table is `layoutcheck.config`, which
builds its pydantic model from these fields. Values are not checked here: code
that builds these directly is trusted, TOML input never is.

Keys are kebab-case in TOML (`kebab`), snake_case in Python. Each field's
description is in ``field.metadata["description"]`` (docs can be generated
from it). `PositiveInt` and `NonNegativeInt` are pydantic's constrained ints,
named only in annotations (this module never evaluates them).

Name patterns are `fnmatch` globs matched case-insensitively against a
variable, attribute, parameter or string-key name (``batch["tokens"]``
is the name ``tokens``). They are hints only: the defaults
are empty, and the rules find layouts by what the code does; a name
listed adds a recognition, never the only way to one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from layoutcheck.records import dataclass
from layoutcheck.geometry import DEFAULT_BUCKET_QUANTUM, Layout

if TYPE_CHECKING:
    from pydantic import NonNegativeInt, PositiveInt

__all__ = [
    "DEFAULT_CP_HELPERS", "DEFAULT_KERNEL_MODULES", "DEFAULT_TEST_PATHS", "LintSettings", "arrays_as_tuples", "kebab",
    "setting",
]

DEFAULT_CP_HELPERS: Mapping[str, Mapping[str, int]] = {}
"""The default `cp-helpers`: none. The linter finds layout helpers in the checked tree by what
their bodies do (a parameter compared with a layout kind, one used as the padded length); this
table only names helpers defined outside the tree (an installed package), with the positions of
their layout arguments."""

DEFAULT_TEST_PATHS = (
    "tests/", "test/", "testing/", "benchmarks/", "benchmark/", "test_*.py", "*_test.py", "conftest.py",
)
"""Where tests and benchmarks live: folders named so at any depth, and pytest's file names."""

DEFAULT_KERNEL_MODULES = ("triton", "tilelang", "cutlass", "cuda", "numba", "cupy", "pycuda")
"""Imports of kernel-writing frameworks: a module that imports one is kernel code, whose free functions
pad for the kernel, not the data layout. (Kernel *libraries* such as `flash_attn` are left out: data-path
code imports their padding helpers.)"""

def kebab(name: str) -> str:
    """The TOML spelling of a field name: ``per_file_ignores`` -> ``per-file-ignores``."""
    return name.replace("_", "-")


def setting(default: Any = None, *, factory: Callable[[], Any] | None = None, description: str) -> Any:
    """A settings field: its default (or a ``factory`` for dicts) and its user-facing description."""
    metadata = {"description": description}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def arrays_as_tuples(value: Any) -> Any:
    """JSON or TOML data as settings values: every array a tuple, recursively (no field holds a list)."""
    if isinstance(value, list):
        return tuple(arrays_as_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: arrays_as_tuples(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class LintSettings:
    """What the padding rules need to know about a codebase."""

    sources: tuple[str, ...] = setting(
        (),
        description=(
            "Optional hint: names that hold the single source of truth for padded lengths (one "
            "entry per sample). The linter finds such fields by use (a field written with each "
            "sample's rounded-up length, or read as the padded length); a name listed here is "
            "recognised even where the tree shows no such use. A parameter named like a source's "
            "singular (`max_seq_len`) is taken to carry one entry."
        ),
    )
    packed_sources: tuple[str, ...] = setting(
        (),
        description=(
            "Optional hint: names that describe a packed (THD) micro-batch. The linter finds them by "
            "use (a cumulative sum of sample lengths stored into the batch); a function that writes "
            "one builds the packed layout and so owns its padding, without being listed in `owners.thd`."
        ),
    )
    owners: dict[Layout, tuple[str, ...]] = setting(
        factory=lambda: {"bshd": (), "thd": ()},
        description=(
            "Functions allowed to decide padded lengths, per layout (`bshd` or `thd`), as dotted names "
            "(`pkg.mod:func`, `pkg.mod.Class.method`), `path/to/file.py:func`, or a bare "
            "function name (any module). A function that writes a source name is always an "
            "owner of it. The linter cannot tell which layout a statement serves, so an owner "
            "of either layout may pad for both."
        ),
    )
    length_names: tuple[str, ...] = setting(
        (),
        description=(
            "Optional hint: patterns for names that hold sequence lengths (the `T` a padded length is "
            "derived from). Lengths are found by use without it: sizes of per-sample tensors, "
            "values fed to a cumulative sum, values rounded up to an alignment unit."
        ),
    )
    token_names: tuple[str, ...] = setting(
        (),
        description=(
            "Optional hint: patterns for names that hold per-sample token tensors (or lists of them); "
            "their sizes are sequence lengths. Found by use without it: lists whose elements are "
            "sized, padded or concatenated into a stream."
        ),
    )
    pad_multiplier_names: tuple[str, ...] = setting(
        (),
        description=(
            "Optional hint: patterns for names that hold the pad multiplier of the alignment unit `A`. "
            "Found by use without it: a name that is a factor of the unit an owner pads sequence "
            "lengths to. A round-up by a unit built from one is a padded sequence length whatever it "
            "pads; an int literal bound to one must be a multiple of `pad-multiple-quantum`."
        ),
    )
    foreign_unit_names: tuple[str, ...] = setting(
        (),
        description=(
            "Optional hint: patterns for multiples that belong to kernels, quantisation, I/O or vision, "
            "not to the token layout: a round-up by one is never reported. Without it such round-ups "
            "are left alone unless they pad what an owner pads (the same lengths or the same unit)."
        ),
    )
    config_roots: tuple[str, ...] = setting(
        (),
        description=(
            "Optional hint: objects whose attributes are configuration (`args.max_seq_len`) rather "
            "than a sample's length, so length-like attribute names (`length-names`) on them are not "
            "sequence lengths."
        ),
    )
    model_bases: tuple[str, ...] = setting(
        ("*Module", "*Layer", "Function"),
        description=(
            "Patterns for base classes of model code (`nn.Module`, `MegatronModule`, an autograd "
            "`Function`): padding inside their methods is a kernel's local geometry, not the data layout, "
            "and they are never owners."
        ),
    )
    owner_inputs: tuple[str, ...] = setting(
        (),
        description=(
            "Optional hint: per-sample fields the owner derives padded lengths from. Found by use "
            "without it (the fields the owner's round-ups read, and the tensors those lengths "
            "measure). Rewriting one (an entry, or a whole length field) leaves the source stale "
            "unless it is written again."
        ),
    )
    cp_helpers: dict[str, dict[str, NonNegativeInt]] = setting(
        factory=lambda: {name: dict(spec) for name, spec in DEFAULT_CP_HELPERS.items()},
        description=(
            "Optional hint: CP slicing/offset helpers and their layout parameters. Helpers defined in "
            "the checked tree are found by what they do (a parameter compared with `\"thd\"`/`\"bshd\"`, "
            "one used as the padded length under BSHD); this names helpers defined elsewhere. "
            "The layout kind "
            "(`qkv_format`) and the padded length `P` (a source's singular such as `max_seq_len`, "
            "or a `max_*`/`padded*` length name such as `max_token_len`). When a helper's `def` is in "
            "the checked tree, its own parameters and positions are read and this entry only names "
            "it as a helper; for a helper defined elsewhere (an installed package), the 0-based "
            "positions given here (for a method, its receiver `self` not counted) say where positional calls pass "
            "them. A call must pass the layout kind unless it sits where the layout is known to be "
            "packed (`if qkv_format == \"thd\":`), and `P` where the layout is BSHD. Entries are merged "
            "over the defaults, helper by helper; `name = {}` switches a default helper off."
        ),
    )
    test_paths: tuple[str, ...] = setting(
        DEFAULT_TEST_PATHS,
        description=(
            "Files that are tests or benchmarks, as gitignore-like globs relative to the configuration's "
            "folder (a pattern without `/` matches a name at any depth; one ending in `/` a folder). "
            "They are not the trainer: they fabricate padded batches on purpose, so they are left out of "
            "the project model (never owners, never callers) and their findings are not reported, unless "
            "`lint-tests` is true. A matching module that trainer code imports is trainer code all the "
            "same (a `testing` helper the package itself imports, say)."
        ),
    )
    lint_tests: bool = setting(
        False,
        description="Lint the files `test-paths` matches like trainer code (they are syntax-checked either way).",
    )
    kernel_modules: tuple[str, ...] = setting(
        DEFAULT_KERNEL_MODULES,
        description=(
            "Top-level modules whose import makes a file kernel code (`triton`, `tilelang`...): padding in "
            "its free functions is the kernel's own geometry (block and bucket sizes), not the token layout, "
            "and they are never owners."
        ),
    )
    bucket_names: tuple[str, ...] = setting(
        (),
        description=(
            "Optional hint: patterns for names that hold sequence-length bucket lists. Found by use "
            "without it: a list searched for the smallest entry that fits a length (`bisect`, "
            "`min(b for b in buckets if b >= n)`, a loop returning the first `b >= n`)."
        ),
    )
    bucket_quantum: PositiveInt = setting(
        DEFAULT_BUCKET_QUANTUM,
        description="Bucket lengths must be multiples of this.",
    )
    pad_multiple_quantum: PositiveInt = setting(
        16,
        description=(
            "Pad multipliers must be multiples of this: fp8 GEMMs need sequence lengths in "
            "multiples of 16 (the default multiplier, 128, satisfies it)."
        ),
    )
