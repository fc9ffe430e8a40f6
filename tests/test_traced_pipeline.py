"""The tracer in the debug mode, on the reference pipeline: each bug flag reported at the op that breaks the layout.

The session is activated from the pipeline's own configuration
(``fixtures/debug-run.toml``) with ``LAYOUTCHECK_TRACE=1``, as a debug run's
environment switches it on, in record mode (the step runs to its end). Each
flag's expected finding is the operation in the pipeline's source that lays
the data out wrongly; the test reads that source line back and checks that
it is the call the violation names.
"""

from __future__ import annotations

import re
from pathlib import Path

import minitrainer
import pytest
from bugcases import CASES, CP, GRID, LENGTHS, MEDIA
from minitrainer.actor import TrainActor, train_step
from minitrainer.args import make_args
from minitrainer.parallel import parallel_state
from minitrainer.rollout import make_rollout_ref

from layoutcheck import geometry
from layoutcheck.runtime import activation
from layoutcheck.runtime.tracing.tags import clear_tags, tagged_count

ROOT = Path(__file__).resolve().parents[1]
pytest_plugins = ["pytester"]
CONFIG = ROOT / "fixtures" / "debug-run.toml"
PIPELINE = Path(minitrainer.__file__).resolve().parent
WHERE = re.compile(r"(?P<op>\S+) at (?P<path>\S+):(?P<line>\d+) in (?P<function>\S+)\Z")

LAYOUT = ("data.py", "replay_data.py")  # the batch builder and the replay filler both lay samples out
TRACED: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # flag -> (invariant, operation, the pipeline modules whose source lines make the call)
    "rollout_global_padding": ("O3", "slice_with_cp", LAYOUT),  # a short sample laid out with the global P
    "mixed_padded_lengths": ("G1", "torch.stack", LAYOUT),
    "logprobs_sliced_with_other_p": ("G4", "slice_log_prob_with_cp", ("data.py",)),  # in the producer
    "replay_thd_pad_multiplier": ("G5", "torch.cat", ("replay_data.py",)),  # the stream tail pad, written as a cat
    "stale_lengths_after_expansion": ("G2", "slice_with_cp", LAYOUT),
    "offsets_without_layout": ("G4", "get_logits_and_tokens_offset_with_cp", ("model.py",)),  # the loss side
    "alignment_max_not_lcm": ("O2", "slice_with_cp", LAYOUT),
    "wrong_bucket": ("G6", "slice_with_cp", ("data.py",)),
    "loss_repad_to_rollout_max": ("G3", "slice_with_cp", ("loss.py",)),
    "loss_cat_mixed_padded_lengths": ("G1", "torch.cat", ("loss.py",)),
}


def session_for(tmp_path: Path, *, buckets: bool = False, mode: str = "record") -> activation.Session:
    """The pipeline's configuration, as a debug run reads it, with the tracer switched on by the environment."""
    text = CONFIG.read_text().replace('mode = "raise"', f'mode = "{mode}"\nsummary = false')
    if buckets:
        text = text.replace("[runtime]\n", f"[runtime]\nbuckets = {list(CASES['wrong_bucket'].args['buckets'])}\n", 1)
    (tmp_path / "layoutcheck.toml").write_text(text)
    return activation.activate(config=tmp_path / "layoutcheck.toml", environ={"LAYOUTCHECK_TRACE": "1"})


@pytest.fixture
def traced(tmp_path):
    made: list[activation.Session] = []

    def make(**options: object) -> activation.Session:
        made.append(session_for(tmp_path, **options))  # type: ignore[arg-type]
        return made[-1]

    try:
        yield make
    finally:
        activation.deactivate()
        clear_tags()


def tracer_findings(violations: list) -> list[tuple[object, dict[str, str]]]:
    """The tracer's violations (their ``where`` names an op and a source line), with the parts of ``where``."""
    out = []
    for v in violations:
        match = WHERE.match(v.where)
        if match:
            out.append((v, match.groupdict()))
    return out


def source_line(path: str, line: str) -> str:
    return (ROOT / path if not Path(path).is_absolute() else Path(path)).read_text().splitlines()[int(line) - 1]


def test_the_debug_session_runs_the_tracer_only_when_switched_on(tmp_path):
    session = session_for(tmp_path)
    try:
        assert session.tracing and len(session.hooks) == 7
        assert {s.role for s in session.hooks} >= {"cp-slicer", "response-slicer", "loss-function"}
    finally:
        activation.deactivate()
    session = activation.activate(config=tmp_path / "layoutcheck.toml", environ={})  # the key is unset: a debug run
    try:
        assert not session.tracing and session.tracer is None
        assert sorted(s.role for s in session.hooks) == ["batch-builder", "offset-helper", "producer", "replay-filler"]
        assert session.pending == ()  # the tracer's roles are not hooked, nor waiting
    finally:
        activation.deactivate()


@pytest.mark.parametrize("bug", list(TRACED))
def test_each_bug_flag_is_reported_at_the_op_that_breaks_the_layout(traced, bug):
    case = CASES[bug]
    session = traced(buckets=case.buckets)
    ref = make_rollout_ref(LENGTHS, seed=3, media=MEDIA)
    with parallel_state(cp_size=CP, cp_rank=case.rank):
        train_step(make_args(bugs={bug}, **case.args), ref)
    invariant, op, modules = TRACED[bug]
    found = [(v, w) for v, w in tracer_findings(session.violations) if v.invariant == invariant and w["op"] == op]
    assert found, (bug, session.summary(), [v.where for v in session.violations])
    for v, where in found:
        assert Path(where["path"]).resolve() in {PIPELINE / m for m in modules}, where
        assert op.rsplit(".", 1)[-1] in source_line(where["path"], where["line"]), where  # the line makes this call
        # the sample, or (a producer slicing lists, before the rollout exists) its lengths
        assert (v.sample is not None or (bug == "logprobs_sliced_with_other_p" and {"T", "R"} <= set(v.sizes)))
        assert v.expected is not None and v.hint
    assert session.notes == []


def test_the_reports_name_samples_and_lengths(traced):
    # Rollout-global padding at the op: the sample, its true and padded lengths, the inflation (O3).
    session = traced()
    with parallel_state(cp_size=CP, cp_rank=0):
        train_step(make_args(bugs={"rollout_global_padding"}), make_rollout_ref(LENGTHS, seed=3))
    global_p = geometry.padded_length(max(LENGTHS), 128)
    at_op = {v.sample: v for v, w in tracer_findings(session.violations) if v.invariant == "O3"}
    assert set(at_op) == {i for i, t in enumerate(LENGTHS) if global_p >= geometry.padded_length(t, 128) + 128}
    v = at_op[7]  # T = 129: padded to 2048
    assert (v.actual, v.expected) == (global_p, "256 (T <= P < T + A)")
    assert "15.9x its true length" in v.problem and "rollout-global padding" in v.problem
    assert v.format().startswith("[O3] slice_with_cp at ") and "sample 7" in v.format()
    # the producer's own check reports the owner too (the tracer adds where the positions are spent)
    assert {v.sample for v in session.violations if v.where == "get_rollout_data"} == set(at_op)




def test_flags_off_the_tracer_finds_nothing_on_every_configuration(traced):
    session = traced(mode="raise")
    ref = make_rollout_ref(LENGTHS, seed=3, media=MEDIA)
    for fmt, scheme, cp, b in GRID:
        args = make_args(qkv_format=fmt, allgather_cp=scheme == "allgather", micro_batch_size=b,
                         rollout_max_context_len=4096)
        for r in range(cp):
            with parallel_state(cp_size=cp, cp_rank=r):
                train_step(args, ref)
    for options in ({"tp": 2, "sequence_parallel": True}, {"tp": 2, "qkv_format": "thd", "sequence_parallel": True},
                    {"tp": 2, "qkv_format": "thd", "data_pad_size_multiplier": 64, "micro_batch_size": 2},
                    {"compress_ratios": [3], "allgather_cp": True, "micro_batch_size": 2}):
        options = dict(options)
        tp = options.pop("tp", 1)
        for r in range(CP):
            with parallel_state(tp_size=tp, cp_size=CP, cp_rank=r):
                train_step(make_args(**options), ref)
    assert session.violations == [] and session.notes == [], session.summary()
    assert session.checker.checked["micro-batches"] > 100


def test_flags_off_the_fixed_consumers_of_the_space_rules_are_silent_on_every_configuration(traced):
    # The fixes of fixtures/spacebugs (a shift before the CP split, masks shifted like their targets, pads on the
    # tokens' side, replay rows in the tokens' CP scheme, clamped bounds, rows padded before they are cut) on
    # every BSHD configuration of the grid their code is written for, every rank: the space rules stay silent.
    from spacebugs import PAIRS
    from spacebugs.run import run_pairs

    config = ROOT / "fixtures" / "spacebugs" / "debug.toml"
    session = activation.activate(config=config, environ={"LAYOUTCHECK_TRACE": "1"})
    runs = 0
    for fmt, scheme, cp, b in GRID:
        names = [n for n, pair in PAIRS.items() if pair.scheme == scheme and cp in pair.cp_sizes]
        if fmt != "bshd" or not names:
            continue
        for r in range(cp):
            results = run_pairs(names, "after", cp=cp, rank=r, micro_batch_size=b, allgather_cp=scheme == "allgather")
            runs += sum(len(v) for v in results.values())
    assert session.violations == [] and session.notes == [], session.summary()
    assert runs > 500


def test_flags_off_with_buckets_the_tracer_finds_nothing(traced):
    session = traced(buckets=True, mode="raise")
    buckets = CASES["wrong_bucket"].args["buckets"]
    for cp, b in ((1, 2), (2, 2), (4, 4), (2, 1)):
        for r in range(cp):
            with parallel_state(cp_size=cp, cp_rank=r):
                train_step(make_args(buckets=buckets, micro_batch_size=b), make_rollout_ref(LENGTHS, seed=3))
    assert session.violations == [] and session.notes == [], session.summary()


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def data_path_step(args, ref) -> None:
    """One step of the data path through every traced hook: producer, schedule, replay filler, batches, loss."""
    from minitrainer import data, loss, replay_data  # looked up at call time: the hooked functions
    from minitrainer.actor import record_replay
    from minitrainer.model import TRAIN_KEYS
    from minitrainer.rollout import position_log_prob

    rollout, store = data.get_rollout_data(args, ref)
    with store:
        iterators, counts = data.get_data_iterator(args, None, rollout)
        replay_data.fill_replay_data(args=args, models=None, data_iterator=iterators, num_microbatches=counts,
                                     rollout_data=rollout, data_key="rollout_routed_experts", replay_list=[],
                                     register_replay_list_func=record_replay)
        for _ in range(sum(counts)):
            batch = data.get_batch(iterators[0], TRAIN_KEYS, args.data_pad_size_multiplier, args.qkv_format)
            loss.loss_function(args, batch, sum(counts), position_log_prob(batch["tokens"]))


def test_flags_off_a_thousand_steps_leave_no_tag_and_no_memory_behind(traced):
    session = traced(mode="raise")
    ref, args = make_rollout_ref([40, 24], seed=5), make_args(rollout_max_context_len=4096)
    with parallel_state(cp_size=2, cp_rank=1):
        TrainActor(args)  # sets the trainer's global args, as a run does
        for _ in range(100):  # warm-up: caches, the allocator, the observations' first rollouts
            data_path_step(args, ref)
        tags, rss = tagged_count(), _rss_kib()
        for _ in range(1000):
            data_path_step(args, ref)
    grown = _rss_kib() - rss
    assert session.violations == [] and session.notes == []
    assert session.checker.checked["rollouts"] == 1100 and session.checker.checked["micro-batches"] == 2200
    assert tagged_count() <= tags  # every tag went with its tensor
    assert grown < 2048, f"RSS grew by {grown} KiB over 1,000 steps"


def test_no_graph_break_under_torch_compile_fullgraph(traced):
    # The session's hooks inside a compiled region: the tracer's CP-helper wrapper and the traced loss
    # function only call through while Dynamo traces, with the tracer's mode active around the call.
    import torch

    from minitrainer import cp_utils, loss
    from minitrainer.parallel import get_parallel_state

    session = traced()
    args = make_args()

    def step(tokens: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        local = cp_utils.slice_with_cp(tokens, 0, "bshd", 384, get_parallel_state())
        batch = {"full_loss_masks": (local > 0).unsqueeze(0)}
        value, _, _ = loss.loss_function(args, batch, 1, logits)
        return value + local.sum()

    assert getattr(cp_utils.slice_with_cp, "__wrapped__", None) is not None  # hooked
    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend="eager")
    tokens, logits = torch.arange(1, 301), torch.rand(1, 192)
    with parallel_state(cp_size=2, cp_rank=1), session.tracer:
        assert torch.allclose(compiled(tokens, logits), step(tokens, logits))
    assert session.violations == [] and session.notes == []


# --- the switch: LAYOUTCHECK_TRACE, then the `tracer` key, then the default (on under pytest) ---------

UNIMPORTED = """
[runtime]
{key}
[runtime.hooks]
producer = ["lc_never_imported.data:get_rollout_data"]
cp-slicer = ["lc_never_imported.cp_utils:slice_with_cp"]
"""


@pytest.mark.parametrize(("key", "env", "default", "on"), [
    ("", None, False, False),  # a debug run: off
    ("", None, True, True),  # the pytest plugin: on
    ("tracer = false", None, True, False),  # the key beats the default
    ("tracer = true", None, False, True),
    ("tracer = true", "0", True, False),  # the variable beats the key
    ("tracer = false", "1", False, True),
])
def test_the_tracer_switch_precedence(tmp_path, key, env, default, on):
    (tmp_path / "layoutcheck.toml").write_text(UNIMPORTED.format(key=key))
    environ = {} if env is None else {"LAYOUTCHECK_TRACE": env}
    session = activation.activate(config=tmp_path / "layoutcheck.toml", environ=environ, trace_default=default)
    try:
        assert session.tracing is on
        assert [s.role for s in session.pending] == (["producer", "cp-slicer"] if on else ["producer"])
    finally:
        activation.deactivate()


def test_the_plugin_switches_the_tracer_on_in_a_session_the_environment_started(tmp_path):
    # LAYOUTCHECK at interpreter start made a debug-run session (tracer off); the plugin reuses it and asks for
    # the tracer while no hook is in yet; once one is, the session stays as it is.
    (tmp_path / "layoutcheck.toml").write_text(UNIMPORTED.format(key=""))
    session = activation.activate(config=tmp_path / "layoutcheck.toml", environ={})
    try:
        assert not session.tracing
        assert activation.activate(trace_default=True) is session and session.tracing
        assert [s.role for s in session.pending] == ["producer", "cp-slicer"]
    finally:
        activation.deactivate()
    session = activation.activate(config=CONFIG, environ={})  # minitrainer is imported: its hooks are in
    try:
        assert session.hooks and not session.tracing
        activation.activate(trace_default=True)
        assert not session.tracing
    finally:
        activation.deactivate()


PLUGIN_CONFTEST = f"""
import sys
sys.path[:0] = [{str(ROOT / "fixtures")!r}, {str(ROOT / "tests")!r}]
from bugcases import LENGTHS
from minitrainer.actor import train_step
from minitrainer.args import make_args
from minitrainer.parallel import parallel_state
from minitrainer.rollout import make_rollout_ref


def step(**args):
    with parallel_state(cp_size=2, cp_rank=0):
        return train_step(make_args(qkv_format="thd", micro_batch_size=2, **args), make_rollout_ref(LENGTHS, seed=3))
"""

PLUGIN_TESTS = """
import torch
import torch.nn.functional as F
from conftest import step
from layoutcheck import Tag, tag


def test_clean():
    step()


def test_loss_cat():
    step(bugs={"loss_cat_mixed_padded_lengths"})


def test_trace_block(layout):
    x = tag(torch.zeros(300), Tag(field="tokens", padded=384, sample=3, total=300))
    with layout.expect("G3") as found, layout.trace() as tracer:
        F.pad(x, (0, 700))  # re-padded to another length than its P
    assert tracer is layout.session.tracer and found[0].where.startswith("F.pad at test_pipeline.py:")
"""


def test_under_the_pytest_plugin_the_tracer_is_on_by_default(pytester):
    pytester.makepyprojecttoml(CONFIG.read_text().replace("[runtime", "[tool.layoutcheck.runtime"))
    pytester.makeconftest(PLUGIN_CONFTEST)
    pytester.makepyfile(test_pipeline=PLUGIN_TESTS)
    result = pytester.runpytest_subprocess("--layoutcheck", "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*layoutcheck: runtime checks on (--layoutcheck), mode raise (the default), 7 hooks from *pyproject.toml",
        "*[[]G1[]] torch.cat at */minitrainer/loss.py:* in _loss_inputs, samples *",
        "  FAILED   test_pipeline.py::test_loss_cat: G1 x* in torch.cat at */minitrainer/loss.py:*",
    ])
