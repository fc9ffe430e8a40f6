"""What a name says about its value: the settings' name patterns, compiled.

* `Tag`: what an expression derives from (a sequence length, a token
  tensor, the source...), as flags.
* `Vocabulary`: the settings' name patterns compiled once per settings
  object (`vocabulary`), answering with `Tag` s for a bare name; it also
  knows the source names in their configured order (`Vocabulary.source`
  is the one messages name), the CP helpers, and which parameter names
  carry a layout kind or a padded length.
* Text prefilters: `text_mentions` and `stems` decide cheaply whether a
  file can hold a name matching a pattern at all.

Name patterns are `fnmatch` globs matched case-insensitively.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from enum import IntFlag
from functools import lru_cache

from layoutcheck.model.settings import DEFAULT_CP_HELPERS, LintSettings


class Tag(IntFlag):
    """What an expression derives from."""

    NONE = 0
    SEQ = 1
    """A sequence length (``T``) or a quantity computed from one."""
    TOK = 2
    """A token tensor or a list of them (their sizes are sequence lengths)."""
    SRC = 4
    """Read from the source (the owner's ``P``): consumers derive geometry from it."""
    SRCLIST = 8
    """The source list itself (every sample's ``P``), not one entry."""
    MAX = 16
    """A maximum over a collection of sequence lengths."""
    PAD = 32
    """A padded length decided by a round-up (already judged where it was computed)."""
    UNIT = 64
    """An alignment unit built from a pad multiplier (the layout's ``A``)."""
    FOREIGN = 128
    """A kernel, quantisation, I/O or vision multiple: not the token layout."""
    BCAST = 256
    """A list giving every sample one value (the origin is the broadcast expression)."""
    CP = 512
    """Derived from the context-parallel size (``2 * cp``, a CP chunk)."""
    PACKED = 1024
    """Cumulative lengths of a packed batch (``cu_seqlens``): a cumulative sum of lengths, a running
    sum, ``[0, n]``; the builder's stream geometry."""
    STREAM = 2048
    """A packed stream (``torch.cat`` of per-sample tensors), or its length."""
    SAMPLE = 4096
    """One sample's tensor (an entry or element of per-sample tensors); its size is a true length."""
    MASKED = 8192
    """Data selected by a mask (``x[i, mask[i]]``): exactly the sample's true tokens, ``T`` long."""
    ENTRY = 16384
    """One entry of a per-sample collection (an element walked, ``xs[i]``): one sample's value."""
    LEFT = 32768
    """Padded on the left: each row's real tokens placed at its end (``F.pad(x, (k, 0))``)."""
    RIGHT = 65536
    """Padded on the right: each row's real tokens placed at its start (``F.pad(x, (0, k))``)."""
    WIDTH = 131072
    """The size of a tensor along a dimension past its first (``x.shape[1]``, ``x.size(1)``): a width
    every row of the tensor shares, so a padded width of a batch, not one sample's own length."""
    MEASURED = 524288
    """A length measured from data: a tensor's size (``x.size(0)``, ``x.numel()``, ``x.shape[0]``), a
    mask's row sums (``mask.sum(-1)``), the size of a sample's tokens (``len(t)`` of a token tensor).
    Cumulative sums of such lengths describe a packed batch; of other counts they do not."""
    CONFIG = 262144
    """An attribute read from an object that holds no data of the batch (``cfg.model.seq_length``,
    ``config.max_len``): a configured value, the same for every batch, not measured from a sample."""


CHECK_PREFIXES = ("check", "assert", "validate", "ensure", "verify")
"""A function named with one of these (``check_uniform(...)``) is a guard, not an owner."""

DEFAULT_SOURCE = "max_seq_lens"
"""The source messages name when `sources` is configured empty."""


def is_check_name(name: str) -> bool:
    """``check_uniform``, ``_assert_same_length``...: a guard's name, not an owner's."""
    return name.lstrip("_").startswith(CHECK_PREFIXES)


def source_name(settings: LintSettings) -> str:
    """The source messages name: the first of `sources` in configured order."""
    return settings.sources[0] if settings.sources else DEFAULT_SOURCE


def _compile(patterns: Sequence[str]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p.lower())})" for p in patterns), re.IGNORECASE)


@lru_cache(maxsize=64)
def stems(patterns: tuple[str, ...]) -> tuple[str, ...] | None:
    """The longest literal piece of each pattern (lower-case), for text prefilters.

    None when a pattern has no literal piece (it matches anything, so a text
    test cannot rule a file out).
    """
    out = []
    for pattern in patterns:
        piece = max(re.split(r"[*?\[\]]", pattern.lower()), key=len)
        if not piece:
            return None
        out.append(piece)
    return tuple(out)


@lru_cache(maxsize=8)
def lowered(source: str) -> str:
    """``source.lower()``, shared by the prefilters of every rule (str hashes are cached)."""
    return source.lower()


def text_mentions(source: str, patterns: Sequence[str]) -> bool:
    """May ``source`` hold a name matching one of ``patterns``? (cheap, case-insensitive)."""
    pieces = stems(tuple(patterns))
    return pieces is None or any(p in lowered(source) for p in pieces)


_SEQ, _TOK, _UNIT = int(Tag.SEQ), int(Tag.TOK), int(Tag.UNIT)

_CP_SIZE = re.compile(
    r"_*(cp|cp_size|cp_world_size|cp_ws|context_parallel_(world_)?size|get_context_parallel_world_size"
    r"|ring_attn_size|cp_degree)",
    re.IGNORECASE,
)
_LAYOUT_PARAM = re.compile(r"_*(qkv_format|qkv_layout|attn_layout|layout|seq_layout)", re.IGNORECASE)
LAYOUT_KINDS = {"thd": "thd", "bshd": "bshd", "sbhd": "bshd", "bsh": "bshd"}
"""String literals that name a layout, and the layout each is (`sbhd` is rectangular too)."""


class Vocabulary:
    """The settings' names, compiled; answers "what kind of name is this?"."""

    def __init__(self, settings: LintSettings) -> None:
        self.settings = settings
        self.sources = frozenset(settings.sources)
        self.source_order = tuple(settings.sources)
        """The sources in configured order: messages pick from this, never from the set."""
        self.source = source_name(settings)
        """The source messages name (`source_name`)."""
        self.source_singulars = frozenset(s[:-1] for s in settings.sources if s.endswith("s"))
        self.packed = frozenset(settings.packed_sources)
        self.packed_order = tuple(settings.packed_sources)
        self.config_roots = frozenset(settings.config_roots)
        self.owner_inputs = frozenset(settings.owner_inputs)
        self.kernel_modules = frozenset(settings.kernel_modules)
        self._length = _compile(settings.length_names)
        self._token = _compile(settings.token_names)
        self._unit = _compile(settings.pad_multiplier_names)
        self._foreign = _compile(settings.foreign_unit_names)
        self._bucket = _compile(settings.bucket_names)
        self._model = _compile(settings.model_bases)
        self._tags: dict[str, int] = {}
        self._sources_in: dict[str, str | None] = {}
        self._buckets: dict[str, bool] = {}
        merged = {**DEFAULT_CP_HELPERS, **settings.cp_helpers}
        self.helpers: dict[str, Mapping[str, int]] = {name: spec for name, spec in merged.items() if spec}
        """CP helpers: `cp-helpers` merged over the defaults (an empty spec switches one off),
        each with its layout parameters and their positions (the fallback for a helper whose
        `def` is not in the tree)."""
        self.owner_names = frozenset(
            entry.rsplit(":", 1)[-1].rsplit(".", 1)[-1] for entries in settings.owners.values() for entry in entries
        )
        """The function part of every configured owner (`get_rollout_data` for `pkg.data:get_rollout_data`)."""
        self.needles = tuple(sorted({
            *settings.sources, *settings.packed_sources, *self.helpers, *self.owner_names, *settings.owner_inputs,
        }))
        """Text whose presence makes a file matter to the project model whatever the rules ask:
        sources, packed sources, CP helpers, owners and the owner's inputs (defs, owners, callers)."""

    def matters(self, source: str) -> bool:
        """May ``source`` hold facts the project model needs? Spaces are found by use, so any file
        with a definition or a call may (a helper's ``def``, an owner, a caller); `needles` (configured
        names) make a file without either matter too."""
        return "def " in source or "(" in source or any(needle in source for needle in self.needles)

    @staticmethod
    def _match(pattern: re.Pattern[str] | None, name: str) -> bool:
        return pattern is not None and pattern.fullmatch(name) is not None

    def is_token(self, name: str) -> bool:
        return bool(self.tags(name) & _TOK)

    def is_pad_multiplier(self, name: str) -> bool:
        return bool(self.tags(name) & _UNIT)

    def is_bucket(self, name: str) -> bool:
        found = self._buckets.get(name)
        if found is None:
            found = self._buckets[name] = self._match(self._bucket, name)
        return found

    def is_model_base(self, name: str) -> bool:
        return self._match(self._model, name)

    @staticmethod
    def is_cp_size(name: str) -> bool:
        """``cp_size``, ``cp_world_size``, ``get_context_parallel_world_size``: the CP size."""
        return _CP_SIZE.fullmatch(name) is not None

    @staticmethod
    def is_layout_param(name: str) -> bool:
        """``qkv_format`` (or ``layout``): a parameter that names the layout kind."""
        return _LAYOUT_PARAM.fullmatch(name) is not None

    def is_padded_length_param(self, name: str) -> bool:
        """Does a parameter ``name`` take one sample's padded length `P`?

        Only for configured helpers (`cp-helpers`), whose `def` the linter cannot
        read: a configured source's singular (`max_seq_len`), or a configured
        length name spelt as a bound (`max_token_len`). A true length
        (`total_length`) is not one.
        """
        if name in self.source_singulars:
            return True
        return bool(self.tags(name) & _SEQ) and name.lower().lstrip("_").startswith("max_")

    def is_padded_list_param(self, name: str) -> bool:
        """``max_seq_lens``: a parameter that takes every sample's `P` (a source)."""
        return name in self.sources

    def mentions_source(self, name: str) -> bool:
        """``build_max_seq_lens`` mentions ``max_seq_lens``: such a function produces it."""
        return self.source_in(name) is not None

    def source_in(self, name: str) -> str | None:
        """The first source (in configured order) that ``name`` mentions, else None."""
        try:
            return self._sources_in[name]  # asked of every call's name: remembered, as `tags` is
        except KeyError:
            found = self._sources_in[name] = next((s for s in self.source_order if s in name), None)
            return found

    def tags(self, name: str) -> int:
        """What a bare name says about its value, before any local assignment (`Tag` flags, as an int:
        the traversal combines them for every expression, and enum arithmetic is slow)."""
        found = self._tags.get(name)
        if found is None:
            found = Tag.NONE
            if name in self.sources:
                found = Tag.SRC | Tag.SRCLIST
            elif name in self.source_singulars:
                found = Tag.SRC
            elif name in self.packed:
                found = Tag.PACKED | Tag.SEQ
            else:
                if self._match(self._token, name):
                    found |= Tag.TOK
                if self._match(self._length, name):
                    found |= Tag.SEQ
                if self._match(self._unit, name):
                    found |= Tag.UNIT
                if self._match(self._foreign, name):
                    found |= Tag.FOREIGN
            found = self._tags[name] = int(found)
        return found


_VOCABULARIES: dict[int, tuple[LintSettings, Vocabulary]] = {}


def vocabulary(settings: LintSettings) -> Vocabulary:
    """The `Vocabulary` of ``settings``, built once per settings object."""
    hit = _VOCABULARIES.get(id(settings))
    if hit is not None and hit[0] is settings:
        return hit[1]
    if len(_VOCABULARIES) > 64:  # settings objects are few; tests make many
        _VOCABULARIES.clear()
    vocab = Vocabulary(settings)
    _VOCABULARIES[id(settings)] = (settings, vocab)
    return vocab
