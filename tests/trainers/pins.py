"""The pinned trainers and the PyPI packages their data paths really import, as data.

Each `PinnedSet` is what one trainer's data-path modules import beyond the test
venv (torch, numpy, pydantic, jinja2, ray, requests, filelock, fsspec are the
venv's): found by importing the modules with ``--no-deps`` installs until
nothing was missing, then pinned. Versions follow the trainer's own pins where
it has them (verl 0.9.1's ``cpu`` extra: transformers 5.9.0; Miles's
requirements.txt: transformers 5.12.1), else the releases of the trainer's
time (verl 0.7.0 still imports ``AutoModelForVision2Seq``, gone in transformers
5, so it gets 4.57.6).
"""

from __future__ import annotations

from trainers.install import PinnedSet

__all__ = ["MILES", "MILES_DEPS", "SLIME", "SLIME_DEPS", "VERL", "VERL_BUGGY", "VERL_FIXED"]

_TENSORDICT = ("tensordict==0.10.0", "pyvers==0.1.0", "cloudpickle==3.1.3", "orjson==3.13.0")
_OMEGACONF = ("omegaconf==2.3.0", "antlr4-python3-runtime==4.9.3")
_HF_TOKENIZERS = ("tokenizers==0.22.2", "safetensors==0.8.0", "regex==2026.11.19", "tqdm==4.70.1")
_HTTPX = ("httpx==0.28.1", "httpcore==1.0.9", "h11==0.16.0")

VERL_BUGGY = "0.7.0"
"""verl release whose ``preprocess_packed_seqs`` still slices T-long data at P-space offsets (docs/design.md#layout-spaces-and-bug-classes, class 3)."""
VERL_FIXED = "0.9.1"
"""verl release with the fix (the first chunk's end clamped to the sample, empty slices skipped)."""

VERL: dict[str, PinnedSet] = {
    VERL_BUGGY: PinnedSet("verl-0.7.0", (
        "verl==0.7.0", "megatron-core==0.15.3", *_TENSORDICT, *_OMEGACONF,
        "transformers==4.57.6", "huggingface-hub==0.36.2", *_HF_TOKENIZERS,
    )),
    VERL_FIXED: PinnedSet("verl-0.9.1", (
        "verl==0.9.1", "megatron-core==0.16.1", *_TENSORDICT, *_OMEGACONF, "codetiming==1.4.0",
        "transformers==5.9.0", "huggingface-hub==1.33.0", *_HF_TOKENIZERS, *_HTTPX,
    )),
}
"""verl version -> verl with what ``verl.models.mcore.util`` and ``verl.utils.seqlen_balancing`` import."""

MILES = {"buggy": "31f1ca961a94cb860cec3b2dea34ec332bfa8f76", "fixed": "e78cfb3fb62de66311177611eceaf4600a12f23a"}
"""radixark/miles: rollout-global BSHD padding (docs/design.md#the-domain-padded-lengths-are-layout) at ``buggy``; per-sample padding at ``fixed``."""

MILES_DEPS = PinnedSet("miles-deps", (
    "transformers==5.12.1", "huggingface-hub==1.33.0", *_HF_TOKENIZERS, *_HTTPX, "anyio==4.16.0", "sniffio==1.3.1",
))
"""What Miles's ``training_utils`` data path imports at both pinned commits (chat templates: transformers)."""

SLIME = {"buggy": "2dffecc08d26033e906147bcc8fe1350bac14654", "fixed": "a93386e5130c7bfbbcff3f5d4f255bd0f99b5570"}
"""THUDM/slime: routing replay padded to ``tp*128`` with ``T-1`` rows a sample at ``buggy`` (a93386e51's parent);
padded by one row to ``T`` and to ``tp*data_pad_size_multiplier`` at ``fixed``."""

SLIME_DEPS = PinnedSet("slime-deps", (
    "megatron-core==0.15.3", "transformers==4.57.6", "huggingface-hub==0.36.2", *_HF_TOKENIZERS, *_HTTPX,
    "pandas==2.3.3", "pytz==2025.2",
))
"""What slime's Megatron actor module and data path import at both pinned commits."""
