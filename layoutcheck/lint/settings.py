"""Domain settings the lint rules read: owners, sources, names, helpers.

Shared by every rule; the full ``[tool.layoutcheck]`` model in
`layoutcheck.config` extends this one with the engine's options
(select, ignore, exclude, ...). Keys are kebab-case in TOML.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from layoutcheck.geometry import DEFAULT_BUCKET_QUANTUM


def kebab(name: str) -> str:
    return name.replace("_", "-")


class LintSettings(BaseModel):
    """What the padding rules need to know about a codebase."""

    model_config = ConfigDict(
        alias_generator=kebab, populate_by_name=True, extra="forbid", frozen=True
    )

    sources: tuple[str, ...] = Field(
        default=("max_seq_lens",),
        description="Names that hold the single source of truth for padded lengths.",
    )
    owners: dict[str, tuple[str, ...]] = Field(
        default_factory=lambda: {"bshd": (), "thd": ()},
        description=(
            "Functions allowed to decide padded lengths, per layout, as dotted names "
            "(`pkg.mod:func`, `pkg.mod.Class.method`) or `path/to/file.py:func`. A function "
            "that writes a source name is always an owner of it."
        ),
    )
    length_names: tuple[str, ...] = Field(
        default=(
            "*seq_len*", "*seqlen*", "*total_length*", "*response_length*",
            "*prompt_length*", "*num_tokens*", "*token_len*", "cu_seqlens*",
        ),
        description="fnmatch patterns (case-insensitive) for names that hold sequence lengths.",
    )
    token_names: tuple[str, ...] = Field(
        default=("tokens", "*_tokens", "input_ids", "*_ids", "unconcat_tokens"),
        description="fnmatch patterns for names that hold token tensors.",
    )
    cp_helpers: dict[str, tuple[str, ...]] = Field(
        default_factory=lambda: {
            "get_logits_and_tokens_offset_with_cp": ("qkv_format", "max_seq_len"),
        },
        description="CP slicing/offset helpers and the layout arguments every call must pass.",
    )
    bucket_quantum: int = Field(
        default=DEFAULT_BUCKET_QUANTUM, gt=0,
        description="Bucket lengths and pad multiples must be multiples of this.",
    )
