"""A boundary contract: what a function's arguments and return value hold, in layout spaces.

The configuration names a function by dotted path and says, for each
argument and part of its return value that carries per-sample data, what it
holds and in which space (`layoutcheck.spaces`)::

    [runtime.boundaries."mytrainer.collate:pack"]
    samples = "args.episodes"                     # the per-sample list the call is about
    args.episodes = "T"                           # per-sample tensors, T long
    returns.ids = { space = "P packed cp", from = "args.episodes", pad-value = 0 }
    returns.cu_seqlens = "cu P packed"            # cumulative padded lengths of the stream
    unit = ["2 * cp", "tp * 8"]                    # every unit divides P
    scheme = "zigzag"

A *field* is written ``"[holds] <space>"``:

==============  =============================================================
holds           what the value is
==============  =============================================================
(none)          the data: a list of per-sample tensors (each sample's axis in
                the space), a rectangular ``(B, L)`` tensor (rows), a packed
                stream (a ``packed`` space: one tensor, the samples one after
                the other), or one sample's tensor (``samples = 1``)
``len``         per-sample lengths in the space (a list of ints, a 1-D tensor,
                or one int when ``samples = 1``)
``cu``          cumulative lengths of a packed stream (``cu_seqlens``): ``B + 1``
                entries from 0, or ``B + 2`` when the last segment is the
                stream's tail padding
``mask``        per-sample masks whose sum is the length (a ``(B, S)`` tensor
                or a list of 1-D masks)
``schedule``    a micro-batch schedule: a list of lists of sample indices
``rows``        a row-padded batch: a ``(B, S)`` tensor, array or list of
                equal-length lists, row ``i`` holding sample ``i``'s
                positions contiguous on one side and pads on the other
                (``rows T left``: pads first); each row's true length comes
                from the ``mask`` or ``lengths`` option, else from the
                lengths the call binds
==============  =============================================================

The space is `layoutcheck.spaces.parse_space`'s spelling (``T``, ``R``,
``T-1``, ``P``, then ``packed``, ``zigzag`` / ``allgather``, ``+1`` / ``-1``,
...), plus the word ``cp``: CP-local under the boundary's ``scheme``, which
may be an expression read per call. A table spells the same with options:
``space``, ``axis`` (the sequence axis), ``mask`` (a path whose mask selects
the data's ``T`` positions, as ``input_ids[i, attention_mask[i]]``),
``from`` (the field whose samples this one lays out: its values are
compared), ``pad-value``, ``stream-unit`` (the stream's tail is padded to a
multiple of it) and ``when`` (an expression: check the field only when true).

A boundary with ``role`` is one of the built-in contracts (`ROLE_CONTRACTS`,
read by the Miles preset's reader `layoutcheck.runtime.contract.adapters`);
``inputs`` then says where the role finds what it reads, when the function
does not take it under Miles's parameter name.

Parsing raises `LayoutSpecError` naming the key; nothing here imports torch.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from layoutcheck import geometry
from layoutcheck.errors import LayoutSpecError
from layoutcheck.runtime.contract.adapters import MilesAdapter
from layoutcheck.runtime.contract.expressions import Expr, Path, parse_expr, parse_path
from layoutcheck.spaces import Space, parse_space

__all__ = [
    "BOUNDARY_KEYS",
    "FIELD_KEYS",
    "HOLDS",
    "ROLE_CONTRACTS",
    "BoundarySpec",
    "FieldSpec",
    "RoleContract",
    "Source",
    "parse_boundary",
    "parse_field",
    "parse_source",
]

HOLDS: tuple[str, ...] = ("data", "rows", "len", "cu", "mask", "schedule")
"""What a field's value is (see the module docs); ``data`` is written as nothing."""
BOUNDARY_KEYS: tuple[str, ...] = (
    "role", "inputs", "samples", "args", "returns", "unit", "tight", "scheme", "tp-size", "cp-size", "cp-rank",
    "cross-rank",
)
FIELD_KEYS: tuple[str, ...] = ("space", "axis", "mask", "lengths", "from", "pad-value", "stream-unit", "when")
_TARGET = re.compile(r"(?P<target>[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)"
                     r"(?:\(\)(?P<attrs>(\.[A-Za-z_]\w*)*))?\Z")


@dataclass(frozen=True)
class Source:
    """Where one int of the run comes from: a function (``pkg.mod:func``, ``pkg.mod:func().cp.size``) or an expression."""

    text: str
    target: str | None = None
    """A function called with no arguments, then ``attrs`` read from what it returns."""
    attrs: tuple[str, ...] = ()
    expr: Expr | None = None
    """Otherwise: an expression over the call's parameters (a literal int, say)."""


def parse_source(value: object, *, what: str = "a source") -> Source:
    """A `Source` from the configuration: a dotted function target, or an expression."""
    if isinstance(value, str):
        match = _TARGET.match(value.strip())
        if match:
            attrs = tuple(a for a in (match.group("attrs") or "").split(".") if a)
            return Source(value.strip(), target=match.group("target"), attrs=attrs)
    return Source(str(value), expr=parse_expr(value, what=what))


@dataclass(frozen=True)
class FieldSpec:
    """One argument or part of the return value, and what it holds (see the module docs)."""

    key: str
    """As configured: ``args.input_ids``, ``returns.0``."""
    path: Path
    holds: str
    space: Space | None
    """``None`` for a schedule."""
    text: str
    """The space as written (``"P packed cp"``), for messages."""
    run_scheme: bool = False
    """The word ``cp``: CP-local under the boundary's ``scheme`` (read per call)."""
    axis: int | None = None
    mask: Path | None = None
    lengths: Path | None = None
    """A ``rows`` field: the ``len`` field giving each row's true length."""
    source: Path | None = None
    pad_value: Expr | None = None
    stream_unit: Expr | None = None
    when: Expr | None = None

    @functools.cached_property  # asked several times per field and call; the spec never changes
    def binds(self) -> str | None:
        """The per-sample length this field gives directly (``T``, ``R``, ``T-1``, ``P``), or ``None``.

        A field in a space with no CP part and no shift measures its basis
        itself; a packed data stream does not (its segments are only known
        from cumulative lengths), nor does a CP-local or shifted one.
        """
        space = self.space
        if space is None or space.cp is not None or self.run_scheme or space.shift or self.holds == "rows":
            return None  # a row-padded batch's width is no sample's length
        if self.holds == "data" and space.packed:
            return None
        return space.basis

    def describe_space(self, scheme: str | None = None) -> str:
        """The space as messages name it, with the run's scheme filled in for ``cp``."""
        if self.space is None:
            return "micro-batch schedule"
        described = self._memo.get(("describe", scheme))
        if described is None:
            space = self.resolved(scheme or "zigzag") if self.run_scheme else self.space
            text = space.describe()
            if self.holds == "rows":
                described = f"rows of {text}"
            else:
                described = f"{self.holds} {text}" if self.holds not in ("data",) else text
            self._memo[("describe", scheme)] = described
        return described

    def resolved(self, scheme: str) -> Space:
        """The field's space with ``cp`` resolved to ``scheme``."""
        assert self.space is not None
        if not self.run_scheme:
            return self.space
        found = self._memo.get(scheme)
        if found is None:
            found = self._memo[scheme] = _with_scheme(self.space, scheme)
        return found

    @functools.cached_property
    def _memo(self) -> dict[object, Any]:
        # per field: its space resolved to a scheme, and as messages say it (asked per field on every call)
        return {}


@functools.lru_cache(maxsize=256)  # asked per field and call: the same few spaces and schemes
def _with_scheme(space: Space, scheme: str) -> Space:
    from dataclasses import replace

    from layoutcheck.spaces import CPPart

    return replace(space, cp=CPPart(scheme=geometry.check_scheme(scheme)))  # type: ignore[arg-type]


def _space(text: str, key: str) -> tuple[str, Space | None, bool]:
    words = text.replace(",", " ").split()
    holds = "data"
    if words and words[0] in HOLDS:
        holds = words.pop(0)
    if holds == "schedule":
        if words:
            raise LayoutSpecError(f"{key}: a schedule has no space, got {text!r}")
        return holds, None, False
    run_scheme = "cp" in words
    words = [w for w in words if w != "cp"]
    if run_scheme and any(w in geometry.SCHEMES for w in words):
        raise LayoutSpecError(f"{key}: write either `cp` (the boundary's scheme) or a scheme, not both, in {text!r}")
    if not words:
        raise LayoutSpecError(f"{key}: no space in {text!r}; write a basis (T, R, T-1, P) and its parts, "
                              "like \"P packed cp\"")
    try:
        space = parse_space(" ".join(words))
    except LayoutSpecError as err:
        raise LayoutSpecError(f"{key}: {err}") from None
    if holds == "cu" and not space.packed:
        raise LayoutSpecError(f"{key}: cumulative lengths belong to a packed stream: write \"cu {text[3:].strip()} packed\"")
    if holds == "mask" and (space.cp is not None or run_scheme or space.packed):
        raise LayoutSpecError(f"{key}: a mask selects one sample's positions; write \"mask T\" (or R, T-1, P)")
    if holds == "rows" and (space.cp is not None or run_scheme or space.packed or space.shift):
        raise LayoutSpecError(f"{key}: a row-padded batch holds each sample's positions whole in its row; write "
                              f"\"rows {space.basis} left\" or \"rows {space.basis} right\" (no packed, CP part or shift)")
    if holds == "rows" and space.pad_side is None:
        raise LayoutSpecError(f"{key}: say on which side the rows are padded: \"rows {text[4:].strip()} left\" (pads "
                              "first, true tokens flush right) or \"rows ... right\"")
    return holds, space, run_scheme


def parse_field(key: str, value: object, *, root: str) -> FieldSpec:
    """A `FieldSpec` from ``args.<key>`` / ``returns.<key>`` = a string or a table; `LayoutSpecError` naming the key."""
    name = f"{root}.{key}" if key else root
    path = parse_path(name, what=f"`{name}`")
    if isinstance(value, str):
        holds, space, run_scheme = _space(value, name)
        return FieldSpec(name, path, holds, space, value.strip(), run_scheme)
    if not isinstance(value, Mapping):
        raise LayoutSpecError(f"{name}: write a space (\"P packed cp\") or a table with `space`, got {value!r}")
    unknown = sorted(set(value) - set(FIELD_KEYS))
    if unknown:
        raise LayoutSpecError(f"{name}: unknown key `{unknown[0]}`; a field's keys are {', '.join(FIELD_KEYS)}")
    if "space" not in value:
        raise LayoutSpecError(f"{name}: the table needs `space`")
    holds, space, run_scheme = _space(str(value["space"]), name)
    axis = value.get("axis")
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, int) or axis < 0):
        raise LayoutSpecError(f"{name}.axis: a sequence axis is an integer >= 0, got {axis!r}")

    def path_of(option: str) -> Path | None:
        raw = value.get(option)
        return None if raw is None else parse_path(raw, what=f"`{name}.{option}`")

    def expr_of(option: str) -> Expr | None:
        raw = value.get(option)
        return None if raw is None else parse_expr(raw, what=f"`{name}.{option}`")

    spec = FieldSpec(
        name, path, holds, space, str(value["space"]).strip(), run_scheme, axis=axis, mask=path_of("mask"),
        lengths=path_of("lengths"), source=path_of("from"), pad_value=expr_of("pad-value"), stream_unit=expr_of("stream-unit"),
        when=expr_of("when"),
    )
    if spec.source is not None and holds not in ("data", "rows"):
        raise LayoutSpecError(f"{name}.from: only data is compared with its source; this field holds {holds}")
    if spec.lengths is not None and holds != "rows":
        raise LayoutSpecError(f"{name}.lengths: only a row-padded batch (\"rows T left\") takes its rows' lengths "
                              "from a field; write the lengths as their own `len T` field")
    if spec.stream_unit is not None and not (space is not None and space.packed and holds == "data"):
        raise LayoutSpecError(f"{name}.stream-unit: only a packed data stream has a tail to pad")
    return spec


@dataclass(frozen=True)
class BoundarySpec:
    """One configured boundary: a function and what its call holds (see the module docs)."""

    target: str
    fields: tuple[FieldSpec, ...] = ()
    role: str | None = None
    inputs: Mapping[str, Path | object] = field(default_factory=dict)
    """For a role: input name -> a path into the call, or a literal value."""
    samples: Path | int | None = None
    units: tuple[Expr, ...] = ()
    tight: Expr | None = None
    scheme: Expr | None = None
    tp_size: Source | None = None
    cp_size: Source | None = None
    cp_rank: Source | None = None
    cross_rank: bool = True
    source_file: str | None = None
    """The file the boundary was configured in (messages name it)."""

    @property
    def key(self) -> str:
        """The configuration key, as messages name it."""
        return f'runtime.boundaries."{self.target}"'

    def reads_coordinates(self) -> bool:
        """Whether its checks read ``tp``, ``cp`` or the CP rank (its cross-rank exchange aside): a role (the
        roles read the parallel state), an expression over them, or a space that is one CP rank's part."""
        exprs = [*self.units, self.tight, self.scheme] + [
            e for f in self.fields for e in (f.pad_value, f.stream_unit, f.when)]
        return self.role is not None or any(e is not None and e.needs_coordinates for e in exprs) or any(
            f.run_scheme or (f.space is not None and f.space.cp is not None) for f in self.fields)

    def parameters(self) -> dict[str, str]:
        """Every parameter the configuration reads, with the key that reads it (checked at install)."""
        out: dict[str, str] = {}

        def add(path: Path | None, key: str) -> None:
            if path is not None and path.parameter is not None:
                out.setdefault(path.parameter, key)

        def names(expr: Expr | None, key: str) -> None:
            for name in sorted(expr.parameters) if expr is not None else ():
                out.setdefault(name, key)

        for f in self.fields:
            add(f.path, f.key)
            add(f.mask, f"{f.key}.mask")
            add(f.lengths, f"{f.key}.lengths")
            add(f.source, f"{f.key}.from")
            for option, expr in (("pad-value", f.pad_value), ("stream-unit", f.stream_unit), ("when", f.when)):
                names(expr, f"{f.key}.{option}")
        if isinstance(self.samples, Path):
            add(self.samples, "samples")
        for i, unit in enumerate(self.units):
            names(unit, f"unit[{i}]")
        names(self.tight, "tight")
        names(self.scheme, "scheme")
        for key, source in (("tp-size", self.tp_size), ("cp-size", self.cp_size), ("cp-rank", self.cp_rank)):
            names(source.expr if source is not None else None, key)
        for name, where in self.inputs.items():
            if isinstance(where, Path):
                add(where, f"inputs.{name}")
        return out


def _flatten(table: Mapping[str, Any], root: str) -> list[tuple[str, Any]]:
    # `returns.1.cu_seqlens = ...` written as nested TOML tables, or quoted as one key: both name one path.
    out: list[tuple[str, Any]] = []
    for key, value in table.items():
        if isinstance(value, Mapping) and "space" not in value:
            out += [(f"{key}.{sub}", v) for sub, v in _flatten(value, root)]
        else:
            out.append((str(key), value))
    return out


def parse_boundary(target: str, table: Mapping[str, Any], *, source_file: str | None = None) -> BoundarySpec:
    """A `BoundarySpec` from its configuration table; `LayoutSpecError` naming the key that is wrong."""
    unknown = sorted(set(table) - set(BOUNDARY_KEYS))
    if unknown:
        raise LayoutSpecError(f"unknown key `{unknown[0]}`; a boundary's keys are {', '.join(BOUNDARY_KEYS)}")
    role = table.get("role")
    if role is not None and role not in ROLE_CONTRACTS:
        raise LayoutSpecError(f"role: {role!r} is not a role; expected one of {', '.join(ROLE_CONTRACTS)}")
    fields: list[FieldSpec] = []
    args = table.get("args", {})
    if not isinstance(args, Mapping):
        raise LayoutSpecError(f"args: a table of parameter = space, got {args!r}")
    fields += [parse_field(k, v, root="args") for k, v in _flatten(args, "args")]
    returns = table.get("returns")
    if isinstance(returns, str) or (isinstance(returns, Mapping) and "space" in returns):
        fields.append(parse_field("", returns, root="returns"))
    elif isinstance(returns, Mapping):
        fields += [parse_field(k, v, root="returns") for k, v in _flatten(returns, "returns")]
    elif returns is not None:
        raise LayoutSpecError(f"returns: a space, or a table of <index or key> = space, got {returns!r}")
    inputs_raw = table.get("inputs", {})
    if not isinstance(inputs_raw, Mapping):
        raise LayoutSpecError(f"inputs: a table of <role input> = `args.<parameter>` or a value, got {inputs_raw!r}")
    if inputs_raw and role is None:
        raise LayoutSpecError("inputs: only a boundary with a `role` has inputs")
    if inputs_raw and ROLE_CONTRACTS[role].tracer:
        raise LayoutSpecError(f"inputs: the {role} role is the tracer's and reads Miles's names only; describe the "
                              "function with `args` and `returns` instead")
    inputs: dict[str, Path | object] = {}
    for name, where in inputs_raw.items():
        if role is not None and name not in ROLE_CONTRACTS[role].inputs:
            known = ", ".join(ROLE_CONTRACTS[role].inputs)
            raise LayoutSpecError(f"inputs.{name}: the {role} role reads no `{name}`; its inputs are {known}")
        is_path = isinstance(where, str) and (where.startswith("args.") or where == "returns" or where.startswith("returns."))
        inputs[str(name)] = parse_path(where, what=f"`inputs.{name}`") if is_path else where
    samples_raw = table.get("samples")
    samples: Path | int | None
    if samples_raw is None:
        samples = None
    elif samples_raw == 1 and not isinstance(samples_raw, bool):
        samples = 1
    else:
        samples = parse_path(samples_raw, what="`samples` (1, or the path of the per-sample field)")
    unit_raw = table.get("unit", [])
    units = tuple(parse_expr(u, what=f"`unit[{i}]`") for i, u in enumerate(
        unit_raw if isinstance(unit_raw, (list, tuple)) else [unit_raw]))
    tight = table.get("tight")
    scheme = table.get("scheme")
    parsed_scheme = None if scheme is None else parse_expr(scheme, what="`scheme`")
    if parsed_scheme is not None and parsed_scheme.literal:
        geometry.check_scheme(parsed_scheme.value)
    cross_rank = table.get("cross-rank", True)
    if not isinstance(cross_rank, bool):
        raise LayoutSpecError(f"cross-rank: true or false, got {cross_rank!r}")
    spec = BoundarySpec(
        target=target, fields=tuple(fields), role=role, inputs=inputs, samples=samples, units=units,
        tight=None if tight is None else parse_expr(tight, what="`tight`"), scheme=parsed_scheme,
        tp_size=_source(table, "tp-size"), cp_size=_source(table, "cp-size"), cp_rank=_source(table, "cp-rank"),
        cross_rank=cross_rank, source_file=source_file,
    )
    _check_references(spec)
    return spec


def _source(table: Mapping[str, Any], key: str) -> Source | None:
    return None if table.get(key) is None else parse_source(table[key], what=f"`{key}`")


def _check_references(spec: BoundarySpec) -> None:
    # `from`, `mask` and `samples` name fields of the same contract: a typo there must not go quiet.
    keys = {f.key for f in spec.fields}
    holds = {f.key: f.holds for f in spec.fields}
    for f in spec.fields:
        for option, path in (("from", f.source), ("mask", f.mask), ("lengths", f.lengths)):
            if path is not None and path.text not in keys:
                raise LayoutSpecError(f"{f.key}.{option}: `{path.text}` is not one of this boundary's fields "
                                      f"({', '.join(sorted(keys))})")
        if f.holds == "rows" and f.mask is not None and holds[f.mask.text] != "mask":
            raise LayoutSpecError(f"{f.key}.mask: `{f.mask.text}` holds {holds[f.mask.text]}; the rows' mask is a "
                                  f"`mask` field (`{f.mask.text} = \"mask {f.space.basis if f.space else 'T'}\"`)")
        if f.lengths is not None and holds[f.lengths.text] != "len":
            raise LayoutSpecError(f"{f.key}.lengths: `{f.lengths.text}` holds {holds[f.lengths.text]}; the rows' "
                                  f"lengths are a `len` field (`{f.lengths.text} = \"len T\"`)")
    if isinstance(spec.samples, Path) and spec.samples.text not in keys:
        raise LayoutSpecError(f"samples: `{spec.samples.text}` is not one of this boundary's fields")
    if spec.role is None and not spec.fields:
        raise LayoutSpecError("the boundary says nothing: give `args` / `returns` fields, or a `role`")


# --- the roles, as contracts ---------------------------------------------------------------


@dataclass(frozen=True)
class RoleContract:
    """A built-in contract: what a role's function holds, in the vocabulary of spaces, and what it reads."""

    label: str
    invariants: tuple[str, ...]
    inputs: Mapping[str, str]
    """What the role reads, by Miles's parameter name -> what it must carry (an ``inputs`` key). The tracer
    roles take none: they read Miles's names (`layoutcheck.runtime.checker.wrappers.TRACER_PARAMETERS`)."""
    holds: Sequence[tuple[str, str]]
    """What the role's fields hold, in spaces: (field, space), for docs and ``layoutcheck init``."""
    tracer: bool = False
    """Hooked only while the tracer is on."""


def _reads(role: str) -> dict[str, str]:
    # What a checker role reads, by Miles's parameter names: the Miles preset's reader says it once.
    spec = MilesAdapter.roles[role.replace("-", "_")]
    return {**spec.required, **{name: "read when given" for name in spec.optional}}


ROLE_CONTRACTS: Mapping[str, RoleContract] = {
    "producer": RoleContract(
        "the producer", ("O1", "O2", "O3", "O4", "O5"), _reads("producer"),
        (("returns.0.tokens", "T"), ("returns.0.total_lengths", "len T"), ("returns.0.response_lengths", "len R"),
         ("returns.0.max_seq_lens", "len P"), ("returns.0.loss_masks", "R"), ("returns.0.rollout_log_probs", "R zigzag"),
         ("returns.0.rollout_routed_experts", "T-1")),
    ),
    "batch-builder": RoleContract(
        "the batch builder", ("G1", "G2", "G3", "G4", "G6", "X1"), _reads("batch-builder"),
        (("returns.tokens", "P cp (bshd rows) or P packed cp (thd)"), ("returns.rollout_log_probs", "R zigzag")),
    ),
    "replay-filler": RoleContract(
        "the replay filler", ("G1", "G2", "G5", "X1"), _reads("replay-filler"),
        (("registered replay_data", "P packed cp, rows / TP under SP"),),
    ),
    "offset-helper": RoleContract(
        "the response-offset helper", ("G4",), _reads("offset-helper"),
        (("args.total_length", "len T"), ("args.response_length", "len R"), ("args.max_seq_len", "len P"),
         ("returns.2", "logit ranges of T-1 zigzag")),
    ),
    "cp-slicer": RoleContract(
        "the CP slicer (slice_with_cp)", ("G2", "G3", "G6"), {},
        (("args.tokens", "T"), ("args.max_seq_len", "len P"), ("returns", "P zigzag")),
        tracer=True,
    ),
    "response-slicer": RoleContract(
        "the response slicer (slice_log_prob_with_cp)", ("G4",), {},
        (("args.log_prob", "R"), ("returns", "R zigzag")),
        tracer=True,
    ),
    "loss-function": RoleContract("a consumer of the batch, run inside the tracer", (), {}, (), tracer=True),
}
"""The roles (``hooks`` in the configuration, or ``role`` in a boundary), as contracts.

Their checks are the invariants named (docs/design.md#the-invariants), read by the
Miles preset's reader (`layoutcheck.runtime.contract.adapters`). A function
that takes what a role reads under other names says where with ``inputs``.
"""
