"""What a name says about its value: the settings' name patterns, compiled.

* `Tag`: what an expression derives from (a sequence length, a token
  tensor, the source...), as flags.
* `Vocabulary`: the settings' name patterns compiled once per settings
  object (`vocabulary`), answering with `Tag` s for a bare name; it also
  knows the source names in their configured order (`Vocabulary.source`
  is the one messages name) and which arguments of a CP helper carry
  the padded length.
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
from layoutcheck.lint.settings import DEFAULT_CP_HELPERS, LintSettings


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
    """An alignment unit built from a pad multiplier."""
    FOREIGN = 128
    """A kernel, quantisation, I/O or vision multiple: not the token layout."""
    BCAST = 256
    """A list giving every sample one value (the origin is the broadcast expression)."""


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


class Vocabulary:
    """The settings' names, compiled; answers "what kind of name is this?"."""

    def __init__(self, settings: LintSettings) -> None:
        self.sources = frozenset(settings.sources)
        self.source_order = tuple(settings.sources)
        """The sources in configured order: messages pick from this, never from the set."""
        self.source = source_name(settings)
        """The source messages name (`source_name`)."""
        self.source_singulars = frozenset(s[:-1] for s in settings.sources if s.endswith("s"))
        self.packed = frozenset(settings.packed_sources)
        self.config_roots = frozenset(settings.config_roots)
        self.owner_inputs = frozenset(settings.owner_inputs)
        self._length = _compile(settings.length_names)
        self._token = _compile(settings.token_names)
        self._unit = _compile(settings.pad_multiplier_names)
        self._foreign = _compile(settings.foreign_unit_names)
        self._bucket = _compile(settings.bucket_names)
        self._model = _compile(settings.model_bases)
        self._tags: dict[str, Tag] = {}
        self._buckets: dict[str, bool] = {}
        # Before `tags` can answer for the helpers' parameter names.
        merged = {**DEFAULT_CP_HELPERS, **settings.cp_helpers}
        self.helpers: dict[str, Mapping[str, int]] = {name: spec for name, spec in merged.items() if spec}
        """CP helpers: `cp-helpers` merged over the defaults (an empty spec switches one off),
        each with its layout parameters and their positions."""
        self.padded_params = {
            helper: {p: i for p, i in spec.items() if self.is_padded_length_param(p)}
            for helper, spec in self.helpers.items()
        }
        """Per helper, the parameters that take the padded length `P` (named like one)."""
        self.carriers = self.source_singulars.union(*(p.keys() for p in self.padded_params.values()))
        """Parameter names that carry a padded length into a function (`max_seq_len`)."""
        self.required_args = {
            helper: spec for helper, spec in self.helpers.items()
            if any(p not in self.padded_params[helper] for p in spec)
        }
        """Helpers every call of which must pass all of their spec: those whose spec names the
        layout (`qkv_format`). A spec naming only the padded length (`slice_with_cp =
        { max_seq_len = 3 }`) says where `P` goes; its packed (THD) calls omit it."""

    @staticmethod
    def _match(pattern: re.Pattern[str] | None, name: str) -> bool:
        return pattern is not None and pattern.fullmatch(name) is not None

    def is_token(self, name: str) -> bool:
        return bool(self.tags(name) & Tag.TOK)

    def is_pad_multiplier(self, name: str) -> bool:
        return bool(self.tags(name) & Tag.UNIT)

    def is_bucket(self, name: str) -> bool:
        found = self._buckets.get(name)
        if found is None:
            found = self._buckets[name] = self._match(self._bucket, name)
        return found

    def is_model_base(self, name: str) -> bool:
        return self._match(self._model, name)

    def is_padded_length_param(self, name: str) -> bool:
        """Does a CP helper's parameter ``name`` take the padded length `P`?

        A source's singular (`max_seq_len`), a length name (`max_token_len`)
        or `padded*`; the other parameters of a helper's spec say the layout
        (`qkv_format`).
        """
        return bool(self.tags(name) & (Tag.SRC | Tag.SEQ)) or name.lower().startswith("padded")

    def mentions_source(self, name: str) -> bool:
        """``build_max_seq_lens`` mentions ``max_seq_lens``: such a function produces it."""
        return self.source_in(name) is not None

    def source_in(self, name: str) -> str | None:
        """The first source (in configured order) that ``name`` mentions, else None."""
        return next((s for s in self.source_order if s in name), None)

    def tags(self, name: str) -> Tag:
        """What a bare name says about its value, before any local assignment."""
        found = self._tags.get(name)
        if found is None:
            found = Tag.NONE
            if name in self.sources:
                found = Tag.SRC | Tag.SRCLIST
            elif name in self.source_singulars:
                found = Tag.SRC
            else:
                if self._match(self._token, name):
                    found |= Tag.TOK
                if self._match(self._length, name):
                    found |= Tag.SEQ
                if self._match(self._unit, name):
                    found |= Tag.UNIT
                if self._match(self._foreign, name):
                    found |= Tag.FOREIGN
            self._tags[name] = found
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
