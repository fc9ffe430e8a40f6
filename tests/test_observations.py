"""`LayoutChecker.observations`: per sample, per micro-batch and whole-run figures, bounded in memory.

Expected figures are recomputed here from the rollout and `layoutcheck.geometry`,
never copied from a run.
"""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
import torch  # noqa: F401 - the [test] extra requires it; fail here, not skip, without it
from minitrainer.actor import train_loop, train_step
from minitrainer.args import make_args
from minitrainer.parallel import get_parallel_state, parallel_state
from minitrainer.rollout import make_rollout_ref

from layoutcheck import LayoutChecker, geometry
from layoutcheck.demo import pipeline_bindings
from layoutcheck.runtime.reporting.observations import ObservationLimits, SampleObservation

LENGTHS = [300, 130, 700, 1000, 250, 900, 2000, 129]
RESPONSES = [t - max(1, t // 4) for t in LENGTHS]


@pytest.fixture
def install(monkeypatch):
    def install(**options: object) -> LayoutChecker:
        checker = LayoutChecker("record", parallel_state=get_parallel_state, **options)
        for module, name, wrapper in pipeline_bindings(checker.wrap):
            monkeypatch.setattr(module, name, wrapper)
        return checker

    return install


def test_bshd_observations(install):
    checker = install()
    with parallel_state(cp_size=2, cp_rank=1):
        result = train_step(make_args(micro_batch_size=2), make_rollout_ref(LENGTHS, seed=3))
    obs = checker.observations
    padded = [geometry.padded_length(t, 128) for t in LENGTHS]
    assert [(s.rollout, s.sample, s.total, s.response, s.padded, s.unit) for s in obs.samples] == [
        (0, i, t, r, p, 128) for i, (t, r, p) in enumerate(zip(LENGTHS, RESPONSES, padded))]

    # one entry per micro-batch, although the log-prob and training passes each lay it out
    assert [(m.rollout, m.index, list(m.samples)) for m in obs.micro_batches] == [
        (0, k, mb) for k, mb in enumerate(result.micro_batches)]
    for m in obs.micro_batches:
        p = padded[m.samples[0]]
        assert m.layout == "bshd" and m.padded == p and m.stream is None
        assert m.shape == (len(m.samples), geometry.local_length(p, 2)) and m.totals == tuple(LENGTHS[i] for i in m.samples)
    shapes = Counter(m.shape for m in obs.micro_batches)
    assert {(s.shape, s.count) for s in obs.shapes} == set(shapes.items())
    assert [s.count for s in obs.shapes] == sorted(shapes.values(), reverse=True)

    t = obs.totals
    assert (t.rollouts, t.samples, t.micro_batches) == (1, len(LENGTHS), len(result.micro_batches))
    assert (t.true_tokens, t.padded_tokens, t.batch_true_tokens) == (sum(LENGTHS), sum(padded), sum(LENGTHS))
    assert t.batch_positions == sum(padded)  # B * P per micro-batch, and every micro-batch shares its P
    assert not obs.truncated


def test_thd_observations_give_the_stream(install):
    checker = install()
    with parallel_state(cp_size=2, cp_rank=0):
        train_step(make_args(qkv_format="thd", micro_batch_size=4, allgather_cp=True), make_rollout_ref(LENGTHS, seed=3))
    obs = checker.observations
    assert all(s.padded is None and s.unit is None for s in obs.samples) and obs.totals.padded_tokens is None
    for m in obs.micro_batches:
        stream = geometry.packed_stream_length(m.totals, 2, scheme="allgather", pad_to=128) * 2
        assert (m.layout, m.padded, m.stream, m.shape) == ("thd", None, stream, (1, stream // 2))
    assert obs.totals.batch_positions == sum(m.stream for m in obs.micro_batches)
    assert obs.worst_samples == ()


def test_worst_samples_and_bounded_detail(install):
    checker = install(limits=ObservationLimits(rollouts=1, micro_batches=3, shapes=2, worst=3))
    refs = [make_rollout_ref(LENGTHS, seed=0), make_rollout_ref([64, 5000], seed=1)]
    with parallel_state():
        train_loop(make_args(bugs={"rollout_global_padding"}), refs)
    obs = checker.observations
    assert obs.truncated
    assert {s.rollout for s in obs.samples} == {0} and len(obs.micro_batches) == 3 and len(obs.shapes) == 2
    # the totals are complete
    assert obs.totals.rollouts == 2 and obs.totals.samples == len(LENGTHS) + 2
    assert obs.totals.micro_batches == len(LENGTHS) + 2 and obs.totals.true_tokens == sum(LENGTHS) + 5064
    # the worst P/T over the whole run, worst first: rollout 1 pads 64 tokens to 5120
    worst = [(s.rollout, s.sample, s.padded, s.total) for s in obs.worst_samples]
    global_p = geometry.padded_length(max(LENGTHS), 128)
    assert worst[0] == (1, 0, 5120, 64)
    assert worst[1:] == [(0, 7, global_p, 129), (0, 1, global_p, 130)]
    assert math.isclose(obs.worst_samples[0].inflation, 80.0)
    assert checker.violation_rollouts.count(1) == 1 and checker.violation_rollouts[0] == 0


def test_report_fields_are_the_run_reports_json(install):
    checker = install()
    with parallel_state(cp_size=2, cp_rank=0):
        train_step(make_args(), make_rollout_ref(LENGTHS[:2], seed=3))
    fields = checker.observations.report_fields()
    assert set(fields) == {"samples", "micro_batches", "shapes", "totals", "truncated"}
    text = json.loads(json.dumps(fields))
    assert text["micro_batches"][0] == {"rollout": 0, "index": 0, "samples": [0], "layout": "bshd", "totals": [300],
                                        "padded": 384, "stream": None, "shape": [1, 192]}
    assert text["totals"]["true_tokens"] == 430 and text["shapes"][0]["count"] >= 1
    checker.reset()
    assert checker.observations.totals.rollouts == 0 and checker.observations.samples == ()


def test_sample_inflation():
    assert SampleObservation(0, 0, total=100, response=50, padded=400, unit=128).inflation == 4.0
    assert SampleObservation(0, 0, total=100, response=50, padded=None, unit=None).inflation is None
