"""No alarm on right data: the reference pipeline's grid, correct data, every mode, the tracer on and off.

Each configuration runs the reference pipeline (``fixtures/minitrainer``) on
every CP rank of its group in this process, with layoutcheck activated from
the pipeline's configuration (``fixtures/debug-run.toml``) as a debug run
does, in one mode (raise, warn, record) with the tracer switched on or off
by the environment. Correct data must give no violation, no note and no
warning, and raise mode must not stop.

The whole product of the axes is too slow for the suite, so the
configurations are a fixed covering set (`COVERING`: every value of every
axis at least once, which `test_the_covering_set_holds_every_value_of_every_axis`
checks) plus a derandomised Hypothesis sample of the rest.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from bugcases import LENGTHS, MEDIA
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from minitrainer.actor import train_step
from minitrainer.args import make_args
from minitrainer.parallel import parallel_state
from minitrainer.rollout import make_rollout_ref

from layoutcheck import LayoutWarning
from layoutcheck.runtime import activation
from layoutcheck.runtime.tracing.tags import clear_tags

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "fixtures" / "debug-run.toml"
BUCKETS = (512, 1024, 2048, 4096)  # every padded length of the grid fits one (compressed attention's included)

AXES: dict[str, tuple[object, ...]] = {
    "fmt": ("bshd", "thd"),
    "scheme": ("zigzag", "allgather"),
    "cp": (1, 2, 4),
    "micro_batch_size": (1, 2, 4),
    "buckets": (False, True),  # BSHD only: static shape buckets
    "tp": ((1, False), (2, False), (2, True)),  # (tp size, sequence parallel)
    "multiplier": (128, 64),  # data_pad_size_multiplier
    "compress": (None, (3,)),  # compressed attention ratios
    "media": (False, True),  # a multimodal sample whose placeholder expands
    "dynamic": (False, True),  # THD only: micro-batches balanced by tokens
    "mode": ("raise", "warn", "record"),
    "tracer": (False, True),
}
"""The grid's axes: every value must run silently (tests/test_minitrainer.py and tests/bugcases.py hold the grid)."""


@dataclass(frozen=True)
class Config:
    fmt: str
    scheme: str
    cp: int
    micro_batch_size: int
    buckets: bool
    tp: tuple[int, bool]
    multiplier: int
    compress: tuple[int, ...] | None
    media: bool
    dynamic: bool
    mode: str
    tracer: bool

    def valid(self) -> Config:
        """The same configuration where an axis does not apply (buckets under THD, two schemes at cp=1) is set off.

        Buckets are not combined with compressed attention: the pipeline then
        picks the smallest bucket that holds the longest sample's ``P``
        (rounded to whole compressed blocks), G6 the smallest that holds its
        ``T``, and which one the design means is open (reported to the lead).
        """
        return Config(**{**self.__dict__,
                         "buckets": self.buckets and self.fmt == "bshd" and self.compress is None,
                         "dynamic": self.dynamic and self.fmt == "thd",
                         "scheme": "zigzag" if self.cp == 1 else self.scheme})


def _covering() -> list[Config]:
    # Row i takes value (i * stride + offset) of each axis, strides and offsets chosen so that the rows that make
    # an axis apply (BSHD for buckets, THD for dynamic, cp > 1 for allgather) still meet each of its values.
    rows = []
    for i in range(6):
        rows.append(Config(
            fmt=("bshd", "thd")[i % 2], scheme=("zigzag", "allgather")[(i // 2) % 2], cp=(1, 2, 4)[(i + 1) % 3],
            micro_batch_size=(1, 2, 4)[(i + 2) % 3], buckets=i in (0, 4), tp=AXES["tp"][(i // 2) % 3],  # type: ignore
            multiplier=(128, 64)[(i // 3) % 2], compress=(None, (3,))[(i + 1) // 2 % 2], media=i % 3 == 2,
            dynamic=i in (1, 5), mode=("raise", "warn", "record")[i % 3], tracer=i >= 3,
        ).valid())
    return rows


COVERING = _covering()


def run_silently(config: Config, tmp_path: Path) -> None:
    """Run ``config`` on every CP rank; fail on any violation, note or layoutcheck warning."""
    text = CONFIG.read_text().replace('mode = "raise"', f'mode = "{config.mode}"\nsummary = false')
    if config.buckets:
        text = text.replace("[runtime]\n", f"[runtime]\nbuckets = {list(BUCKETS)}\n", 1)
    path = tmp_path / "layoutcheck.toml"
    path.write_text(text)
    activation.deactivate()
    session = activation.activate(config=path, environ={"LAYOUTCHECK_TRACE": "1" if config.tracer else "0"})
    tp, sequence_parallel = config.tp
    args = make_args(
        qkv_format=config.fmt, allgather_cp=config.scheme == "allgather", micro_batch_size=config.micro_batch_size,
        buckets=BUCKETS if config.buckets else None, sequence_parallel=sequence_parallel,
        data_pad_size_multiplier=config.multiplier, compress_ratios=list(config.compress) if config.compress else None,
        use_dynamic_batch_size=config.dynamic, max_tokens_per_gpu=2400 if config.dynamic else None,
        rollout_max_context_len=4096,
    )
    ref = make_rollout_ref(LENGTHS, seed=3, media=MEDIA if config.media else None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", LayoutWarning)  # warn mode must have nothing to say
            for r in range(config.cp):
                with parallel_state(tp_size=tp, cp_size=config.cp, cp_rank=r):
                    train_step(args, ref)
        assert session.violations == [] and session.notes == [], (config, session.summary())
        assert session.checker.checked["micro-batches"] > 0, config
    finally:
        activation.deactivate()
        clear_tags()


def test_the_covering_set_holds_every_value_of_every_axis():
    for axis, values in AXES.items():
        seen = {getattr(c, axis) for c in COVERING}
        assert seen == set(values), (axis, seen)
    assert {(c.mode, c.tracer) for c in COVERING} == {(m, t) for m in AXES["mode"] for t in AXES["tracer"]}


@pytest.mark.parametrize("config", COVERING, ids=lambda c: f"{c.fmt}-{c.scheme}-cp{c.cp}-b{c.micro_batch_size}-"
                         f"{c.mode}-{'traced' if c.tracer else 'hooks'}")
def test_right_data_is_silent_on_the_covering_set(config, tmp_path):
    run_silently(config, tmp_path)


configs = st.builds(Config, **{axis: st.sampled_from(values) for axis, values in AXES.items()}).map(Config.valid)


@settings(max_examples=24, derandomize=True, deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(config=configs)
def test_right_data_is_silent_on_a_sample_of_the_whole_grid(config, tmp_path):
    run_silently(config, tmp_path)
