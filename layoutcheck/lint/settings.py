"""Domain settings the lint rules read: owners, sources, names, helpers.

Shared by every rule; the full ``[tool.layoutcheck]`` model in
`layoutcheck.config` extends this one with the engine's options
(select, ignore, exclude, ...). Keys are kebab-case in TOML.

Name patterns are `fnmatch` globs matched case-insensitively against a
variable, attribute, parameter or string-key name (``batch["tokens"]``
is the name ``tokens``). The defaults describe the Megatron-based RL
trainer of DESIGN.md's appendix; a codebase with other names configures
its own.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt

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
        description=(
            "Names that hold the single source of truth for padded lengths (one entry per "
            "sample). Values read from one are the owner's; code deriving geometry from them "
            "is a consumer. A parameter named like a source's singular (`max_seq_len`) is "
            "taken to carry one entry."
        ),
    )
    packed_sources: tuple[str, ...] = Field(
        default=("cu_seqlens",),
        description=(
            "Names that describe a packed (THD) micro-batch. A function that writes one builds "
            "the packed layout and so owns its padding, without being listed in `owners.thd`."
        ),
    )
    owners: dict[str, tuple[str, ...]] = Field(
        default_factory=lambda: {"bshd": (), "thd": ()},
        description=(
            "Functions allowed to decide padded lengths, per layout, as dotted names "
            "(`pkg.mod:func`, `pkg.mod.Class.method`), `path/to/file.py:func`, or a bare "
            "function name (any module). A function that writes a source name is always an "
            "owner of it. The linter cannot tell which layout a statement serves, so an owner "
            "of either layout may pad for both."
        ),
    )
    length_names: tuple[str, ...] = Field(
        default=("*seq_len*", "*seqlen*", "*total_length*", "*token_len*", "cu_seqlens*"),
        description=(
            "Patterns for names that hold sequence lengths (the `T` a padded length is derived "
            "from). Response and prompt lengths are left out on purpose: padding in response "
            "space (log-probs, advantages) is not the token layout."
        ),
    )
    token_names: tuple[str, ...] = Field(
        default=("tokens", "unconcat_tokens"),
        description=(
            "Patterns for names that hold token tensors (or lists of them); their sizes are "
            "sequence lengths. Kept narrow by default: `input_ids` and `*_tokens` also name "
            "prompts for generation and reward-model inputs, which are not the training layout."
        ),
    )
    pad_multiplier_names: tuple[str, ...] = Field(
        default=("*pad_multiplier*", "*pad_size_multiplier*"),
        description=(
            "Patterns for names that hold the pad multiplier of the alignment unit `A`. A "
            "round-up by a unit built from one is a padded sequence length whatever it pads; "
            "an int literal bound to one must be a multiple of `pad-multiple-quantum`."
        ),
    )
    foreign_unit_names: tuple[str, ...] = Field(
        default=(
            "*block*", "*tile*", "*warp*", "*page*", "*group_size*", "*chunk*",
            "*window*", "*patch*", "*sector*",
        ),
        description=(
            "Patterns for multiples that belong to kernels, quantisation, I/O or vision, not "
            "to the token layout: a round-up by one is never reported."
        ),
    )
    config_roots: tuple[str, ...] = Field(
        default=("args", "config", "cfg", "conf", "hparams", "opt", "opts", "self"),
        description=(
            "Objects whose attributes are configuration (`args.max_seq_len`) rather than a "
            "sample's length, so length-like attribute names on them are not sequence lengths."
        ),
    )
    model_bases: tuple[str, ...] = Field(
        default=("*Module", "*Layer"),
        description=(
            "Patterns for base classes of model code (`nn.Module`, `MegatronModule`): padding "
            "inside their methods is a kernel's local geometry, not the data layout."
        ),
    )
    owner_inputs: tuple[str, ...] = Field(
        default=("total_lengths", "tokens"),
        description=(
            "Per-sample fields the owner derives padded lengths from. Rewriting one (an entry, "
            "or a whole length field) leaves the source stale unless it is written again."
        ),
    )
    cp_helpers: dict[str, dict[str, NonNegativeInt]] = Field(
        default_factory=lambda: {
            "get_logits_and_tokens_offset_with_cp": {"qkv_format": 2, "max_seq_len": 3},
        },
        description=(
            "CP slicing/offset helpers and the layout arguments every call must pass, each with "
            "its 0-based position among a call's arguments (so positional calls are judged "
            "too; for a method, `self` is not counted)."
        ),
    )
    padded_length_args: dict[str, dict[str, NonNegativeInt]] = Field(
        default_factory=lambda: {
            "get_logits_and_tokens_offset_with_cp": {"max_seq_len": 3},
            "slice_with_cp": {"max_seq_len": 3},
            "slice_log_prob_with_cp": {"max_token_len": 4},
            "all_gather_with_cp": {"max_seq_len": 4},
        },
        description=(
            "Functions that take a sample's padded length `P`, with that parameter's name and "
            "0-based position. Passing a true length or a batch maximum there decides `P` "
            "outside the owner."
        ),
    )
    bucket_names: tuple[str, ...] = Field(
        default=(
            "buckets", "*seq*bucket*", "*len*bucket*", "*bucket*len*", "*token*bucket*",
            "*shape*bucket*", "*pad*bucket*",
        ),
        description=(
            "Patterns for names that hold sequence-length bucket lists. Batch-size buckets "
            "(`bs_buckets`) and hash buckets are not matched."
        ),
    )
    bucket_quantum: PositiveInt = Field(
        default=DEFAULT_BUCKET_QUANTUM,
        description="Bucket lengths must be multiples of this.",
    )
    pad_multiple_quantum: PositiveInt = Field(
        default=16,
        description=(
            "Pad multipliers must be multiples of this: fp8 GEMMs need sequence lengths in "
            "multiples of 16 (the default multiplier, 128, satisfies it)."
        ),
    )
