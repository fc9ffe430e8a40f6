"""``[tool.layoutcheck]``: validating a table with pydantic, and the errors it raises.

The keys themselves are defined once, as plain dataclasses, in
`layoutcheck.lint.settings` (what the linter reads; no pydantic there). This
module builds the pydantic model `Config` from those fields, adds the
``runtime`` sub-table, and turns validation failures into one `ConfigError`
with the dotted key, the offending value and the file, in the shape
pydantic-core uses ("N errors in FILE", then per error: where, what, the
value truncated and its type), in TOML's words: a value of the wrong type
reads "Expected an array of strings, got a string". Types are strict: TOML
says what a value is, so a string is never coerced to a boolean or a number.

Importing it costs pydantic (about as much as the rest of a one-file run
besides libcst), so ``layoutcheck check`` imports it only when a table has
to be validated: not for an absent or empty table, nor for one an earlier
run validated (see `layoutcheck.configfile.LoadedConfig.settings`). Finding
and reading the file is `layoutcheck.configfile`, which imports this module
to validate (this module never imports it back).

Relative paths in the table (``exclude``, ``per-file-ignores``, ``cache-dir``)
are relative to the folder of the file they are written in: the *root*.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    create_model,
    field_validator,
)

from layoutcheck import geometry
from layoutcheck.errors import ConfigError, LayoutSpecError
from layoutcheck.lint.configdocs import RUNTIME_KEY, keys, toml_value
from layoutcheck.lint.settings import TABLE, CheckSettings, arrays_as_tuples, kebab
from layoutcheck.runtime.contract.boundary import parse_boundary, parse_source
from layoutcheck.runtime.hooks.settings import TARGET_PATTERN, RuntimeSettings

__all__ = ["Config", "RuntimeConfig", "validate_runtime", "validate_table"]


def _pydantic_fields(cls: type) -> dict[str, Any]:
    """A dataclass's fields as `create_model` arguments: (type, Field(default, description)).

    The dataclass names pydantic's constrained ints only in annotations it
    never evaluates, so they are supplied here to resolve them.
    """
    hints = typing.get_type_hints(
        cls,
        localns={"PositiveInt": PositiveInt, "NonNegativeInt": NonNegativeInt, "PositiveFloat": PositiveFloat},
        include_extras=True,
    )
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        description = f.metadata.get("description")
        if f.default_factory is not dataclasses.MISSING:
            spec = Field(default_factory=f.default_factory, description=description)
        else:
            spec = Field(default=f.default, description=description)
        out[f.name] = (hints[f.name], spec)
    return out


def _boundary_target(target: str) -> str:
    if not TARGET_PATTERN.match(target):
        raise ValueError(f"{target!r} is not a function; write `package.module:function` (or `package.module:Class.method`)")
    return target


def _boundary_table(table: dict[str, Any]) -> dict[str, Any]:
    # The contract's own parser names the sub-key (`returns.0: unknown word 'zigag'`); pydantic names the table.
    try:
        parse_boundary("?:?", table)
    except LayoutSpecError as err:
        raise ValueError(str(err)) from None
    return table


def _coordinate(value: str | int | None) -> str | int | None:
    if value is not None:
        try:
            parse_source(value, what="the value")
        except LayoutSpecError as err:
            raise ValueError(str(err)) from None
    return value


_Coordinate = Annotated[Union[str, int, None], AfterValidator(_coordinate)]

_RuntimeFields = create_model(
    "_RuntimeFields",
    __config__=ConfigDict(alias_generator=kebab, populate_by_name=True, extra="forbid", frozen=True),
    __module__=__name__,
    **{
        **_pydantic_fields(RuntimeSettings),
        "boundaries": (
            dict[Annotated[str, AfterValidator(_boundary_target)], Annotated[dict[str, Any], AfterValidator(_boundary_table)]],
            _pydantic_fields(RuntimeSettings)["boundaries"][1],
        ),
        **{name: (_Coordinate, _pydantic_fields(RuntimeSettings)[name][1])
           for name in ("tp_size", "cp_size", "cp_rank", "cp_group")},
    },
)


class RuntimeConfig(_RuntimeFields):
    """``[tool.layoutcheck.runtime]``, validated: `RuntimeSettings`' fields (the linter reads none of them).

    Beyond the types: hook targets must be ``package.module:function``, and
    buckets must follow the bucket rules of `layoutcheck.geometry`.
    """

    @field_validator("hooks")
    @classmethod
    def _targets(cls, hooks: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        for role, targets in hooks.items():
            for i, target in enumerate(targets):
                if not TARGET_PATTERN.match(target):
                    raise ValueError(
                        f"`{role}[{i}]` = {target!r} is not a hook target; write `package.module:function` "
                        "(or `package.module:Class.method`)"
                    )
        return hooks

    @field_validator("buckets")
    @classmethod
    def _buckets(cls, buckets: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if buckets:
            problems = geometry.bucket_problems(list(buckets), buckets[-1])
            if problems:
                raise ValueError("; ".join(problems))
        return buckets

    def settings(self) -> RuntimeSettings:
        """The validated values as the plain dataclass the runtime reads."""
        return RuntimeSettings(**{f.name: getattr(self, f.name) for f in dataclasses.fields(RuntimeSettings)})


_ConfigFields = create_model(
    "_ConfigFields",
    __config__=ConfigDict(alias_generator=kebab, populate_by_name=True, extra="forbid", frozen=True),
    __module__=__name__,
    **_pydantic_fields(CheckSettings),
    runtime=(RuntimeConfig, Field(
        default_factory=RuntimeConfig,
        description="Settings of the runtime checks (`[tool.layoutcheck.runtime]`).",
    )),
)


class Config(_ConfigFields):
    """The whole ``[tool.layoutcheck]`` table, validated: `CheckSettings`' fields plus ``runtime``.

    The fields are generated from `CheckSettings` (kebab-case aliases, unknown
    keys rejected); `settings` converts back to the dataclass the linter reads.
    """

    def settings(self) -> CheckSettings:
        """The validated values as the plain dataclass the linter reads (``runtime`` left out)."""
        return CheckSettings(**{f.name: getattr(self, f.name) for f in dataclasses.fields(CheckSettings)})


# ---------------------------------------------------------------- errors


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


def _dotted(prefix: str, loc: Iterable[int | str]) -> str:
    """A pydantic location as a TOML key path: ``tool.layoutcheck.per-file-ignores."tests/*"[0]``."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = part if _BARE_KEY.match(part) else '"' + part.replace('"', '\\"') + '"'
        out = f"{out}.{text}" if out else text
    return out


def _truncate(value: object, limit: int = 60) -> str:
    text = toml_value(value) if value is not None else "none"
    return text if len(text) <= limit else text[: limit - 3] + "..."


_TOML_TYPES = ((bool, "boolean"), (int, "integer"), (float, "float"), (str, "string"), (tuple, "array"),
               (list, "array"), (Mapping, "table"))


def _toml_type(value: object) -> str:
    """What TOML calls the type of a value it parsed (arrays arrive here as tuples: see `validate_table`)."""
    return next((name for kind, name in _TOML_TYPES if isinstance(value, kind)), "date or time")


def _a(words: str) -> str:
    return words if words.startswith("one of") else ("an " if words[:1] in "aeiou" else "a ") + words


_TYPE_ERRORS = ("_type", "_parsing")
"""pydantic error types that mean "not of the key's type" (``bool_type``, ``int_parsing``...)."""


def _expected_type(loc: tuple[int | str, ...]) -> str | None:
    """A key's type in TOML's words (``array of strings``), from the settings it is defined in; None if unknown."""
    if not loc or not isinstance(loc[0], str):
        return None
    name = f"{loc[0]}.{loc[1]}" if loc[0] == RUNTIME_KEY and len(loc) > 1 else loc[0]
    return next((key.type for key in keys() if name in (key.name, key.name.replace("-", "_"))), None)


def _valid_keys(model: type[BaseModel]) -> list[str]:
    return sorted(field.alias or name for name, field in model.model_fields.items())


def _table_model(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model of the table at ``loc`` (``()`` is the whole table, ``("runtime",)`` its sub-table)."""
    model: type[BaseModel] = Config
    for part in loc:
        field = next((f for name, f in model.model_fields.items() if part in (name, f.alias)), None)
        sub = field.annotation if field is not None else None
        if not (isinstance(sub, type) and issubclass(sub, BaseModel)):
            return None
        model = sub
    return model


def format_validation_error(exc: ValidationError, file: Path | None, prefix: str) -> ConfigError:
    """Turn pydantic's errors into one `ConfigError`: "N errors in FILE", then where / what / value."""
    errors = exc.errors(include_url=False)
    where = str(file) if file is not None else "the configuration"
    head = f"{len(errors)} error{'s' if len(errors) != 1 else ''} in {where}:"
    lines = [head]
    for error in errors:
        loc = tuple(error["loc"])
        value = error.get("input")
        what, hint = error["msg"], None
        if loc and loc[-1] == "[key]":
            # A table key that is not allowed (`owners.bsdh`): pydantic marks the
            # key's own location with "[key]"; the key path already names it.
            loc = loc[:-1]
            what = f"Invalid key: {what[:1].lower()}{what[1:]}"
        key = _dotted(prefix, loc)
        expected = _expected_type(loc) if error["type"].endswith(_TYPE_ERRORS) else None
        if expected is not None:
            # pydantic says "Input should be a valid tuple"; the user wrote TOML and reads its types.
            depth = 2 if loc[0] == RUNTIME_KEY else 1
            what = (f"Expected {_a(expected)}, got {_a(_toml_type(value))}" if len(loc) <= depth else
                    f"`{_dotted('', loc[:depth])}` is {_a(expected)}: this entry is {_a(_toml_type(value))}")
        table = _table_model(loc[:-1]) if error["type"] == "extra_forbidden" else None
        if table is not None:
            valid = _valid_keys(table)
            what = "Unknown key"
            close = difflib.get_close_matches(str(loc[-1]), valid, n=1)
            if close:
                what += f"; did you mean `{close[0]}`?"
            hint = f"valid keys: {', '.join(valid)}"
        lines.append(f"  {key}")
        lines.append(f"    {what} [value: {_truncate(value)}, type: {_toml_type(value)}]")
        if hint:
            lines.append(f"    {hint}")
    first = _dotted(prefix, tuple(p for p in errors[0]["loc"] if p != "[key]")) if errors else prefix
    return ConfigError("\n".join(lines), key=first, source=str(file) if file is not None else None)


def validate_table(table: Any, file: Path | None, prefix: str = TABLE) -> Config:
    """Validate a parsed ``[tool.layoutcheck]`` table; raise `ConfigError` naming key, value and file."""
    if not isinstance(table, Mapping):  # load_config checks this too; API callers may not
        raise ConfigError(
            f"{prefix or 'the configuration'} in {file} must be a table, "
            f"got {_truncate(table)} ({type(table).__name__})",
            key=prefix or None, source=str(file),
        )
    try:
        # Strict: TOML has types, so `lint-tests = "yes"` or `bucket-quantum = "128"` is a mistake, not a value
        # to coerce. Strict mode takes arrays only as tuples (every array key is one), hence `arrays_as_tuples`.
        return Config.model_validate(arrays_as_tuples(dict(table)), strict=True)
    except ValidationError as exc:
        raise format_validation_error(exc, file, prefix) from None


# ---------------------------------------------------------------- the debug mode's reading


def _aliases(model: type[BaseModel]) -> dict[str, str]:
    """Every spelling a model's table accepts (alias and field name), mapped to the alias."""
    out: dict[str, str] = {}
    for name, field in model.model_fields.items():
        out[name] = out[field.alias or name] = field.alias or name
    return out


def _unknown_key(prefix: str, loc: tuple[str, ...], model: type[BaseModel], file: Path | None) -> ConfigError:
    """One unknown key of the table at ``loc[:-1]`` (of model ``model``), kept as a problem: key, file, near names."""
    key, where = _dotted(prefix, loc), str(file) if file is not None else "the configuration"
    valid = _valid_keys(model)
    what = "unknown key"
    close = difflib.get_close_matches(loc[-1], valid, n=1)
    if close:
        what += f"; did you mean `{close[0]}`?"
    elif model is Config and loc[-1] in _aliases(RuntimeConfig):
        # a runtime key written one table too high: `[tool.layoutcheck.hooks]` for `[tool.layoutcheck.runtime.hooks]`
        what += f"; did you mean `{_dotted(prefix, ('runtime', loc[-1]))}` (a key of the runtime table)?"
    return ConfigError(f"{key} in {where}: {what} (valid keys: {', '.join(valid)})", key=key, source=str(file))


def _unknown_role(prefix: str, loc: tuple[str, ...], file: Path | None) -> ConfigError:
    from layoutcheck.runtime.hooks.settings import ROLES

    key, where = _dotted(prefix, loc), str(file) if file is not None else "the configuration"
    close = difflib.get_close_matches(loc[-1].replace("_", "-"), ROLES, n=1)
    hint = f"; did you mean `{close[0]}`?" if close else ""
    return ConfigError(f"{key} in {where}: not a hook role{hint} (roles: {', '.join(ROLES)})", key=key,
                       source=str(file))


def validate_runtime(table: Any, file: Path | None, prefix: str = TABLE) -> tuple[RuntimeSettings, list[ConfigError]]:
    """The runtime settings of a parsed ``[tool.layoutcheck]`` table, as the debug mode reads it, and its problems.

    The debug mode judges the ``runtime`` table (the linter's keys are the
    linter's: ``layoutcheck check`` reports them) and the table's own keys.
    A key the file cannot contain (unknown at the top or in ``runtime``, a
    hook role that is not one) changes nothing the other keys mean: it is
    left out and returned as a problem (a `ConfigError` naming the key and
    the file): a session the environment started stops the process on it
    before the program runs; `activate` raises it unless told to be lenient.
    Any other error (a value of the wrong type, a bad hook target) raises
    one `ConfigError` listing them all, as `validate_table` does.

    In a ``layoutcheck.toml`` (``prefix`` empty), a ``[tool.layoutcheck]``
    table is a problem too; its ``runtime`` table is read when the file has
    no ``[runtime]`` of its own (its meaning is plain, and the checks then
    run as intended while the problem is reported).
    """
    if not isinstance(table, Mapping):
        validate_table(table, file, prefix)  # raises the usual error
    problems: list[ConfigError] = []
    where = str(file) if file is not None else "the configuration"
    runtime_prefix = prefix
    runtime = table.get("runtime")
    known = _aliases(Config)
    for key in table:
        if key in known:
            continue
        nested = table[key].get("layoutcheck") if key == "tool" and isinstance(table[key], Mapping) else None
        if not prefix and isinstance(nested, Mapping):
            spelled = "[tool.layoutcheck.runtime]" if "runtime" in nested else "[tool.layoutcheck]"
            right = "[runtime]" if "runtime" in nested else "its keys at the top level"
            used = runtime is None and isinstance(nested.get("runtime"), Mapping)
            problems.append(ConfigError(
                f"tool.layoutcheck in {where}: a table a layoutcheck.toml cannot contain (its top level is the "
                f"[tool.layoutcheck] table itself): write {right}, not {spelled}"
                + ("; its runtime table was read meanwhile" if used else "; it was ignored"),
                key="tool.layoutcheck", source=str(file),
            ))
            if used:
                runtime, runtime_prefix = nested["runtime"], "tool.layoutcheck"
            continue
        problems.append(_unknown_key(prefix, (str(key),), Config, file))
    if runtime is None:
        return RuntimeSettings(), problems
    if isinstance(runtime, Mapping):
        runtime = dict(runtime)
        try:
            RuntimeConfig.model_validate(runtime)
        except ValidationError as exc:
            for error in exc.errors(include_url=False):
                loc = tuple(str(p) for p in error["loc"])
                if error["type"] == "extra_forbidden" and len(loc) == 1:
                    problems.append(_unknown_key(runtime_prefix, ("runtime", *loc), RuntimeConfig, file))
                    runtime.pop(loc[0], None)
                elif loc[:1] == ("hooks",) and loc[-1] == "[key]" and len(loc) == 3:
                    problems.append(_unknown_role(runtime_prefix, ("runtime", *loc[:-1]), file))
                    hooks = runtime.get("hooks")
                    if isinstance(hooks, Mapping):
                        runtime["hooks"] = {k: v for k, v in hooks.items() if k != loc[1]}
    try:
        return Config.model_validate({"runtime": runtime}).runtime.settings(), problems
    except ValidationError as exc:
        err = format_validation_error(exc, file, runtime_prefix)
        if not problems:
            raise err from None
        also = "".join(f"\n  {p}" for p in problems)
        raise ConfigError(f"{err}\nand {len(problems)} key{'s' if len(problems) != 1 else ''} the file cannot "
                          f"contain:{also}", key=err.key, source=err.source) from None

