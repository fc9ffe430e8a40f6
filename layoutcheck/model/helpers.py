"""Layout helpers: functions that take the layout kind and one sample's padded length.

A CP slicing or offset helper (`slice_with_cp`, whatever its name) is found
by what its ``def`` does (`layoutcheck.model.spaces.Spaces.padded_slots`): a
parameter compared with ``"thd"``/``"bshd"`` (or defaulting to one) and a
parameter used as the padded length where the layout is BSHD (or passed on
to another helper's). `HelperSignature` says which parameter plays which
part, and at what position, so a call is judged against the real signature.
A helper defined outside the tree is known only from `cp-helpers` (a hint).

`ProjectHelpers` is the project's layer that finds them, over `ProjectValues`.
"""

from __future__ import annotations

from layoutcheck.records import dataclass
from functools import cached_property
from layoutcheck.model.facts import FunctionRef, Param
from layoutcheck.model.values import ProjectValues

__all__ = ["HelperSignature", "ProjectHelpers"]


@dataclass(frozen=True)
class HelperSignature:
    """What a CP helper takes: its layout kind and padded length, by name and position."""

    name: str
    ref: FunctionRef | None
    """Its ``def`` in the tree; None when only the configuration describes it."""
    params: tuple[Param, ...] = ()
    layout: tuple[str, int | None] | None = None
    """The layout-kind parameter and its 0-based position (None: keyword-only)."""
    padded: tuple[str, int | None] | None = None
    """The padded-length parameter `P` and its position."""
    layout_default: str | None = None
    none_checked: tuple[str, ...] = ()
    """Parameters the helper checks are not None (omitting them fails loudly, not silently)."""

    def text(self) -> str | None:
        """``slice_with_cp(tokens, pad_value, qkv_format="thd", max_seq_len=None)``: the ``def``'s
        signature as written (None for a helper known only from the configuration)."""
        if self.ref is None:
            return None
        parts = []
        starred = any(p.kind == "star" for p in self.params)
        for param in self.params:
            if param.kind == "kwonly" and not starred:
                parts.append("*")
                starred = True
            prefix = {"star": "*", "dstar": "**"}.get(param.kind, "")
            parts.append(f"{prefix}{param.name}" + (f"={param.default}" if param.default is not None else ""))
            if param.kind == "posonly" and not any(p.kind == "posonly" for p in self.params[self.params.index(param) + 1:]):
                parts.append("/")
        return f"{self.name}({', '.join(parts)})"


class ProjectHelpers(ProjectValues):
    """The project, with its layout helpers (see the module docs)."""

    @cached_property
    def _helpers(self) -> dict[str, HelperSignature | None]:
        """Configured helpers (`cp-helpers`, a hint) by name: their ``def`` when the tree has exactly one."""
        out: dict[str, HelperSignature | None] = {}
        for name in self.vocab.helpers:
            defs = self.defs_named(name)
            out[name] = self._signature(name, defs[0]) if len(defs) == 1 else None
        return out

    @cached_property
    def layout_helpers(self) -> dict[FunctionRef, HelperSignature]:
        """Functions of the tree that take the layout kind and one sample's padded length: a parameter
        compared with ``"thd"``/``"bshd"`` (or defaulting to one) and a parameter used as the padded
        length (or passed on to one). Found by what they do, whatever they are called."""
        out: dict[FunctionRef, HelperSignature] = {}
        spaces = self.spaces
        for ref, function in self.defs():  # reads no calls: a cached file's stay undecoded
            if ref[1] == 0 or not function.layout_params:
                continue
            if not spaces.padded_slots(ref):
                continue
            out[ref] = self._signature(function.qualname.rsplit(".", 1)[-1], ref)
        for name, signature in self._helpers.items():
            if signature is not None and signature.ref is not None and signature.ref not in out:
                out[signature.ref] = signature
        return out

    def helper(self, name: str, target: FunctionRef | None = None) -> HelperSignature:
        """The signature a call of helper ``name`` is judged by: the ``def`` it resolves to, the
        project's only ``def`` of that name, or else the configured positions."""
        if target is not None:
            found = self.layout_helpers.get(target)
            if found is not None:
                return found
            if self.function(target).qualname.rsplit(".", 1)[-1] == name:
                return self._signature(name, target)
        found = self._helpers.get(name)
        if found is not None:
            return found
        named = [s for s in self.layout_helpers.values() if s.name == name]
        if len(named) == 1:
            return named[0]
        # A configured helper outside the tree: its first configured parameter (by position) is the
        # layout kind, the next the padded length, as in every helper we have read.
        spec = sorted(self.vocab.helpers.get(name, {}).items(), key=lambda item: item[1])
        layout = spec[0] if spec else None
        padded = spec[1] if len(spec) > 1 else None
        return HelperSignature(name, None, (), layout, padded)

    def _signature(self, name: str, ref: FunctionRef) -> HelperSignature:
        function = self.function(ref)
        params = function.params
        positional = [p for p in params if p.kind in ("posonly", "pos")]
        if function.receiver is not None:  # the receiver fills the first, whatever it is called
            positional = positional[1:]
        padded_slots = self.spaces.padded_slots(ref)
        layout = padded = None
        default = None
        for param in params:
            if param.kind in ("star", "dstar"):
                continue
            position = positional.index(param) if param in positional else None
            if layout is None and (param.name in function.layout_params or self.vocab.is_layout_param(param.name)):
                layout, default = (param.name, position), param.default
            elif padded is None and (param.name in padded_slots or self.vocab.is_padded_length_param(param.name)):
                padded = (param.name, position)
        return HelperSignature(name, ref, params, layout, padded, default, function.none_checked)

    def helper_names(self) -> list[str]:
        return sorted(set(self.vocab.helpers) | {s.name for s in self.layout_helpers.values()})

    def is_layout_helper(self, ref: FunctionRef) -> bool:
        """A layout helper (or nested in one), or any function taking one sample's padded length `P`:
        its other branch is the packed (THD) rule, which is the helper's to define."""
        for enclosing in self.enclosing(ref):
            function = self.function(enclosing)
            if enclosing in self.layout_helpers or function.qualname.rsplit(".", 1)[-1] in self.vocab.helpers:
                return True
            if self.spaces.padded_slots(enclosing):
                return True
        return False
