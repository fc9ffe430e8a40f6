"""``layoutcheck report``: run reports built from the reference pipeline's rollouts (see
``fixtures/runreports.py``), with and without the rollout-global padding bug."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from runreports import pipeline_report

from layoutcheck import cli, geometry
from layoutcheck.errors import LayoutSpecError
from layoutcheck.runtime.reporting.runreport import (
    MicroBatchRecord,
    RankInfo,
    RunReport,
    SampleRecord,
    ViolationRecord,
    load_run_report,
)
from layoutcheck.waste.analysis import analyse

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def report_command(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["report", *argv])
    out, err = capsys.readouterr()
    return code, out, err


# The module's module-scoped fixture runs once: its tests all go to one xdist worker
# (`--dist loadgroup` in pyproject.toml) instead of each worker paying for it.
pytestmark = pytest.mark.xdist_group("test_report")


@pytest.fixture(scope="module")
def buggy() -> RunReport:
    return pipeline_report(32, rollout_global=True, micro_batch_size=2)


@pytest.fixture
def buggy_file(tmp_path, buggy):
    path = tmp_path / "run.json"
    path.write_text(buggy.to_json())
    return path


def test_rollout_global_padding_shows_the_inflation_and_the_outlier(capsys, buggy, buggy_file):
    totals = [s.total for s in buggy.samples]
    longest = max(range(len(totals)), key=totals.__getitem__)
    padded = geometry.round_up(totals[longest], 128)
    worst = min(range(len(totals)), key=totals.__getitem__)  # the shortest sample is inflated most
    true, positions = sum(totals), padded * len(totals)

    code, out, err = report_command(capsys, str(buggy_file))
    assert code == 0 and err == ""
    assert f"violations: {len(totals) - 1} (O3/max_seq_lens x{len(totals) - 1})" in out
    assert (f"{true:,} true tokens padded to {positions:,} ({positions / true:.2f}x)") in out
    assert (f"all {len(totals)} samples are padded to P={padded:,} = round_up(max T, A), set by the longest, "
            f"sample {longest} (T={totals[longest]:,}): rollout-global padding") in out
    worst_row = out.split("worst 5 sample(s) by inflation P/T:", 1)[1].splitlines()[2].split()
    assert worst_row == ["0", str(worst), f"{totals[worst]:,}", f"{padded:,}", "128",
                         f"{padded / totals[worst]:.1f}x"]
    own = sum(geometry.round_up(t, 128) for t in totals)
    assert f"each sample padded to its own aligned length: {own:,}" in out
    assert "distinct padded shapes: 1 local tokens shape(s): [2, 14080] x16" in out


def test_json_figures_match_the_geometry_model(capsys, buggy, buggy_file):
    code, out, _ = report_command(capsys, str(buggy_file), "--output-format", "json", "--k", "3")
    assert code == 0
    doc = json.loads(out)
    totals = [s.total for s in buggy.samples]
    assert doc["samples"]["true_tokens"] == sum(totals)
    assert doc["samples"]["padded_tokens"] == buggy.totals.padded_tokens
    assert doc["samples"]["rollout_global"][0]["T"] == max(totals)
    assert doc["violations"][0]["invariant"] == "O3" and doc["violations"][0]["count"] == 31
    batches = buggy.micro_batches
    assert doc["micro_batches"]["positions"] == buggy.totals.batch_positions
    per_sample = sum(len(b.totals) * geometry.padded_length(max(b.totals), 128) for b in batches)
    assert doc["savings"]["per_sample_padding"]["positions"] == per_sample
    advisor = doc["savings"]["advisor_buckets"]
    buckets = tuple(advisor["buckets"])
    assert len(buckets) == 3 and geometry.validate_buckets(buckets, advisor["max_length"]) == buckets
    assert advisor["positions"] == sum(len(b.totals) * geometry.resolve_bucket(max(b.totals), buckets)
                                       for b in batches)
    assert doc["savings"]["advisor_buckets"]["saved"] > doc["micro_batches"]["positions"] * 0.7


def test_plot_writes_an_image(capsys, buggy_file, tmp_path):
    image = tmp_path / "report.png"
    code, out, err = report_command(capsys, str(buggy_file), "--plot", str(image))
    assert code == 0 and err == f"Wrote {image}.\n"
    data = image.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_a_correct_run_shows_no_violations_and_tight_padding(capsys, tmp_path):
    report = pipeline_report(32, rollout_global=False, micro_batch_size=2, rollouts=2)
    path = tmp_path / "ok.json"
    path.write_text(report.to_json())
    code, out, _ = report_command(capsys, str(path))
    assert code == 0
    assert "violations: none" in out and "rollout-global" not in out
    w = analyse(report)
    assert all(s.padded == s.own_padded for s in w.samples)
    assert w.positions == w.per_sample_positions  # grouped by P: nothing to save by per-sample padding
    assert {s.rollout for s in w.samples} == {0, 1}


def test_violations_are_grouped_by_invariant_and_field_and_thd_batches_count_as_laid_out():
    def violation(invariant: str, name: str, sample: int | list[int]) -> ViolationRecord:
        return ViolationRecord(invariant=invariant, where="get_batch", field=name, problem=f"{invariant} broke",
                               actual="1", expected="2", hint="fix it", sample=sample)

    report = RunReport(
        layoutcheck_version="0.1.0", created="now", mode="warn", rank=RankInfo(pid=1, host="h"),
        violations=[violation("G1", "max_seq_lens", [0, 1]), violation("G4", "rollout_log_probs", 2),
                    violation("G1", "max_seq_lens", [3, 4]), violation("G1", "tokens", 5)],
        samples=[SampleRecord(rollout=0, sample=i, total=100 + i, padded=256, unit=128) for i in range(4)],
        micro_batches=[
            MicroBatchRecord(rollout=0, index=0, samples=[0, 1], layout="bshd", totals=[100, 101], padded=256),
            MicroBatchRecord(rollout=0, index=1, samples=[2, 3], layout="thd", totals=[102, 103], stream=256),
        ],
    )
    w = analyse(report, k=2)
    groups = [(g.invariant, g.field, g.count, g.samples) for g in w.violation_groups]
    assert groups == [("G1", "max_seq_lens", 2, (0, 1, 3, 4)), ("G1", "tokens", 1, (5,)),
                      ("G4", "rollout_log_probs", 1, (2,))]
    bshd, thd = w.batches
    assert (bshd.positions, bshd.per_sample_positions) == (512, 256)
    assert (thd.positions, thd.per_sample_positions) == (256, 256)
    assert w.rollout_global == []  # one P for all, but every P is within A of its T: not the bug
    assert w.advisor_positions == 2 * 128 + 256


@pytest.mark.parametrize(("content", "message"), [
    ("not json", "is not a layoutcheck run report: invalid JSON at line 1"),
    ('{"a": 1}', "is not a layoutcheck run report: no `schema_version`"),
    ('{"schema_version": 99}', "has run-report schema version 99"),
    # issue 27: a file that is not UTF-8 (a binary, a report re-saved as UTF-16) was an internal-error traceback
    (b"\xff\xfe{\x00}\x00", "is not a layoutcheck run report: byte 0 is not UTF-8"),
    ('{"a": "caf\u00e9"}'.encode("latin-1"), "byte 10 is not UTF-8"),
])
def test_bad_reports_exit_2_with_one_line(capsys, tmp_path, content, message):
    path = tmp_path / "run.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    code, out, err = report_command(capsys, str(path))
    assert code == 2 and out == ""
    assert err.startswith(f"layoutcheck: error: {path}") and message in err and err.count("\n") == 1


def test_a_report_the_debug_mode_wrote_shows_the_rollout_global_padding(capsys, tmp_path, monkeypatch):
    # The whole path: the reference pipeline with the bug, the hooks activated from the configuration,
    # the run report the session writes, and `layoutcheck report` (with a plot) reading it.
    from minitrainer.actor import train_loop
    from minitrainer.args import make_args
    from minitrainer.parallel import parallel_state
    from minitrainer.rollout import long_tailed_lengths, make_rollout_ref

    from layoutcheck.runtime import activation

    monkeypatch.delenv("LAYOUTCHECK", raising=False)
    config = tmp_path / "layoutcheck.toml"
    config.write_text((FIXTURES / "debug-run.toml").read_text().replace(
        'mode = "raise"', 'mode = "record"\nreport = "run.json"'))
    session = activation.activate(config=config)
    try:
        lengths = long_tailed_lengths(32, seed=1)
        with parallel_state(cp_size=2, cp_rank=0):
            train_loop(make_args(bugs={"rollout_global_padding"}, micro_batch_size=2),
                       [make_rollout_ref(lengths, seed=1)])
        written = session.write_report()  # the last chunk of the JSON Lines the run appended, as at exit
    finally:
        activation.deactivate()
    assert written == tmp_path / "run.json" and len(written.read_text().splitlines()) == 3
    outlier = lengths.index(max(lengths))
    code, out, err = report_command(capsys, str(written), "--plot", str(tmp_path / "run.png"))
    assert code == 0, err
    true = sum(lengths)
    assert f"{true:,} true tokens padded to {14080 * len(lengths):,}" in out
    assert f"set by the longest, sample {outlier} (T=14,010): rollout-global padding" in out
    assert (tmp_path / "run.png").stat().st_size > 10_000


def _truncated_run() -> RunReport:
    """A run whose detail was cut (as ObservationLimits cuts it): 2 of 4 rollouts of samples kept, and the run's
    totals, which cover all 4, including 2 rollouts the detail never shows. One micro-batch is THD."""
    samples = [SampleRecord(rollout=r, sample=i, total=t, padded=geometry.padded_length(t, 128), unit=128)
               for r in range(2) for i, t in enumerate([300, 700, 1000])]
    batches = [MicroBatchRecord(rollout=0, index=0, samples=[0, 1], layout="bshd", totals=[300, 700], padded=768),
               MicroBatchRecord(rollout=0, index=1, samples=[2], layout="thd", totals=[1000], stream=1024),
               MicroBatchRecord(rollout=1, index=0, samples=[0, 1, 2], layout="bshd", totals=[300, 700, 1000],
                                padded=1024)]
    totals = {"rollouts": 4, "samples": 12, "micro_batches": 6, "true_tokens": 8_000, "padded_tokens": 16_384,
              "batch_true_tokens": 8_000, "batch_positions": 17_920}
    return RunReport(layoutcheck_version="0.1.0", created="now", mode="record", rank=RankInfo(pid=1, host="h"),
                     samples=samples, micro_batches=batches, totals=totals, truncated=True)


def test_the_run_s_own_totals_come_first_and_the_detail_says_what_it_covers(capsys, tmp_path):
    path = tmp_path / "run.json"
    path.write_text(_truncated_run().to_json())
    code, out, _ = report_command(capsys, str(path))
    assert code == 0
    lines = out.splitlines()
    totals = lines.index("run totals (the whole run):")
    assert lines[totals + 1:totals + 4] == [
        "  max_seq_lens: 8,000 true tokens padded to 16,384 (2.05x)",
        "  micro-batches: 8,000 true tokens in 17,920 positions (2.24x)",
        "detail below: 6 of 12 samples, 3 of 6 micro-batches (the detail each run kept: its first rollouts and "
        "micro-batches; the totals cover everything)",
    ]
    # The detail itself: every kept micro-batch, the THD one included.
    assert "padding per micro-batch: 3 micro-batches, 4,000 true tokens in 5,632 positions" in out
    doc = json.loads(report_command(capsys, str(path), "--output-format", "json")[1])
    assert doc["run_totals"]["padded_tokens"] == 16_384 and doc["run_totals"]["rollouts"] == 4
    assert doc["detail"] == {"samples": 6, "micro_batches": 3, "run_samples": 12, "run_micro_batches": 6}


def test_the_plot_draws_what_the_text_counts(capsys, tmp_path):
    # Every micro-batch and sample the text counts is in the picture (the THD micro-batch too), and its title
    # says how much of the run that is.
    from layoutcheck.waste.job import JobBuilder
    from layoutcheck.waste.plot import picture_of, plot_padding

    builder = JobBuilder()
    builder.add(_truncated_run(), "run.json")
    w = builder.finish(k=2)
    picture = picture_of(w, ["run.json"])
    assert int(picture.laid_out.sum()) == w.positions == 768 * 2 + 1024 + 1024 * 3
    assert int(picture.true_tokens.sum()) == w.batch_true == 4_000
    assert int(picture.maxima_counts.sum()) == w.batches == 3
    assert int(picture.length_counts.sum()) == 6 and picture.inflation.totals.size == 6
    assert picture.title == "run.json: 6 of 12 samples, 3 of 6 micro-batches"
    assert int(picture.bucketed.sum()) == w.fit.positions  # the THD micro-batch as laid out in both
    plot_padding(picture, str(tmp_path / "run.png"))
    assert (tmp_path / "run.png").stat().st_size > 10_000


def test_a_report_without_sample_records_plots_the_lengths_its_micro_batches_laid_out(capsys, tmp_path):
    # THD, or a batch builder checked without its producer: no per-sample records, only micro-batches.
    report = RunReport(layoutcheck_version="0.1.0", created="now", mode="record", rank=RankInfo(pid=1, host="h"),
                       micro_batches=[MicroBatchRecord(rollout=0, index=k, samples=[0, 1], layout="thd",
                                                       totals=[300 + k, 700], stream=1024) for k in range(5)])
    path = tmp_path / "thd.json"
    path.write_text(report.to_json())
    image = tmp_path / "thd.png"
    code, out, err = report_command(capsys, str(path), "--plot", str(image))
    assert (code, err) == (0, f"Wrote {image}.\n") and image.stat().st_size > 10_000
    assert "detail below: 10 samples, 5 micro-batches" in out
    assert "padding per micro-batch: 5 micro-batches, 5,010 true tokens in 5,120 positions" in out

# ---------------------------------------------------------------- the appended form (JSON Lines)


def appended_run(tmp_path: Path, rollouts: int, *, samples: int = 16) -> tuple[Path, object, RunReport]:
    """A record-mode session over ``rollouts`` buggy rollouts, appending its report; its path, checker, whole report."""
    import dataclasses

    from minitrainer.actor import TrainActor
    from minitrainer.args import make_args
    from minitrainer.parallel import parallel_state
    from minitrainer.rollout import long_tailed_lengths, make_rollout_ref

    from layoutcheck.configfile import load_config
    from layoutcheck.runtime.activation.session import Session

    loaded = load_config(FIXTURES / "debug-run.toml")
    settings, _ = loaded.runtime_settings()
    path = tmp_path / "run.json"
    settings = dataclasses.replace(settings, mode="record", summary=False, report=str(path))
    session = Session(settings, config_file=loaded.path, root=loaded.root, key_prefix=loaded.key_prefix)
    try:
        with parallel_state(cp_size=2, cp_rank=0):
            actor = TrainActor(make_args(bugs={"rollout_global_padding"}, micro_batch_size=2))
            for r in range(rollouts):
                actor.train(r, make_rollout_ref(long_tailed_lengths(samples, seed=r), seed=r))
        session.write_report()
        whole = session.run_report()
    finally:
        session.close()
    return path, session.checker, whole


def test_each_write_appends_only_what_is_new_so_a_late_write_costs_no_more_than_an_early_one(tmp_path):
    path, checker, whole = appended_run(tmp_path, 8)
    lines = path.read_text().splitlines()
    header, chunks = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    assert header["format"] == "layoutcheck-run-report" and header["schema_version"] == 2
    assert [c["event"] for c in chunks] == ["rollout"] * 8 + ["end"]
    # every violation and kept sample is in exactly one chunk; the totals stand for the run so far
    assert sum(len(c["violations"]) for c in chunks) == len(checker.violations) > 8
    assert [c["totals"]["rollouts"] for c in chunks] == [1, 2, 3, 4, 5, 6, 7, 8, 8]
    assert [len(c["samples"]) for c in chunks[:5]] == [16, 16, 16, 16, 0]  # detail for the first 4 rollouts
    early, late = len(lines[2]), max(len(line) for line in lines[6:])
    assert late < early, (early, late)
    report = load_run_report(path)
    assert report.complete and len(report.violations) == len(checker.violations)
    assert report.totals.model_dump() == vars(checker.observations.totals)
    # the lines hold what the whole report, made in memory at the end, holds
    same = {"violations", "notes", "samples", "micro_batches", "shapes", "totals", "truncated", "hooks", "hook_calls",
            "problems", "violations_dropped", "mode", "config_file"}
    assert report.model_dump(include=same) == whole.model_dump(include=same)
    assert sum(s.count for s in report.shapes) == report.totals.micro_batches == 64  # summed over 8 chunks


def test_a_process_that_died_while_writing_leaves_every_whole_chunk(tmp_path, capsys):
    path, _, _ = appended_run(tmp_path, 3)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])  # cut in the last line
    report = load_run_report(path)
    assert not report.complete and report.totals.rollouts == 3 and report.violations
    code, out, err = report_command(capsys, str(path))
    assert code == 0 and "violations:" in out, err


def test_two_processes_writing_one_report_are_refused_with_what_to_do(tmp_path):
    path, _, _ = appended_run(tmp_path, 2)
    lines = path.read_text().splitlines()
    other = json.loads(lines[1])
    other["pid"] += 1
    path.write_text("\n".join([*lines, json.dumps(other)]) + "\n")
    with pytest.raises(LayoutSpecError, match=r"line 5 was written by another process .* `\{pid\}` or `\{rank\}`"):
        load_run_report(path)


def test_a_schema_1_document_still_reads(tmp_path, buggy):
    old = json.loads(buggy.to_json())
    for field in ("hook_calls", "problems", "violations_dropped", "complete"):
        old.pop(field)
    old["schema_version"] = 1
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old, indent=1))
    report = load_run_report(path)
    assert report.schema_version == 1 and report.complete and len(report.violations) == len(buggy.violations)


# --- every kind of run report the debug mode writes (issue 29) ------------------------------------------------


def debug_run(tmp_path: Path, argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """A real process under the debug mode, switched on by the environment only (as a user runs a trainer)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    environ["PYTHONPATH"] = os.pathsep.join([str(FIXTURES), str(FIXTURES.parent)])  # this tree's layoutcheck
    environ.update(env)
    return subprocess.run([sys.executable, *argv], cwd=tmp_path, env=environ, capture_output=True, text=True,
                          timeout=300)


def test_a_boundary_contract_run_report_shows_its_calls_violations_and_the_fix_for_its_spaces(capsys, tmp_path):
    # `layoutcheck report` refused these ("no sample or micro-batch records to report on", exit 2), violations
    # and all. The rowpad job: one function that strips left padding with one shift for the whole batch.
    proc = debug_run(tmp_path, ["-m", "rowpad.job", "out.json"], LAYOUTCHECK="record",
                     LAYOUTCHECK_CONFIG=str(FIXTURES / "rowpad.toml"), LAYOUTCHECK_REPORT="run.json")
    assert proc.returncode == 0, proc.stderr
    code, out, err = report_command(capsys, str(tmp_path / "run.json"))
    assert code == 0 and err == "", err
    assert ("hooks (2): boundary rowpad.strip:strip_left_padding 4 calls; boundary rowpad.strip:unpad_rows 4 calls"
            in out)
    assert "no padded samples or micro-batches recorded (boundary contracts and presets record" in out
    assert "padding per sample" not in out and "padding per micro-batch" not in out
    assert "violations: 3 (B1/returns.1 x1, B6/returns x1, B6/returns.0 x1)" in out
    rows = out.split("violations: 3", 1)[1].splitlines()
    assert any(r.split()[:4] == ["B1", "returns.1", "rowpad.strip:strip_left_padding", "1"] for r in rows), out
    # each fix names what to do for the spaces that met: a row-padded output, a T-space cut of left-padded rows
    assert ("fix B1 (returns.1): pad each row on the right: its T_i true positions flush left and the mask marking "
            "exactly them") in out
    assert "fix B6 (returns.0): move each row by its own pad count so that its tokens sit flush left" in out
    assert "fix B6 (returns): take each row's last T_i positions (the source is padded left)" in out
    code, out, _ = report_command(capsys, str(tmp_path / "run.json"), "--output-format", "json")
    doc = json.loads(out)
    assert code == 0 and [h["calls"] for h in doc["hooks"]] == [4, 4]
    pytest.importorskip("matplotlib")
    code, out, err = report_command(capsys, str(tmp_path / "run.json"), "--plot", str(tmp_path / "run.png"))
    assert code == 2 and out == "" and "--plot: the run report has no sample or micro-batch records to draw" in err
    assert err.count("\n") == 1 and not (tmp_path / "run.png").exists()
    assert {v["invariant"] for v in doc["violations"]} == {"B1", "B6"}


def test_a_run_report_with_a_field_no_contract_could_read_says_so(capsys, tmp_path):
    config = tmp_path / "layoutcheck.toml"
    config.write_text((FIXTURES / "arraykinds.toml").read_text().replace(
        'args."data.non_tensor_batch.routed" = "T"\n', 'args."data.non_tensor_batch.routed" = "T"\nargs.data = "T"\n'))
    proc = debug_run(tmp_path, ["-m", "arraykinds.job", "out.json"], LAYOUTCHECK="record",
                     LAYOUTCHECK_CONFIG=str(config), LAYOUTCHECK_REPORT="run.json")
    assert proc.returncode == 0, proc.stderr
    code, out, err = report_command(capsys, str(tmp_path / "run.json"))
    assert code == 0, err
    assert ("configuration problems (1): the runs did not check everything their configuration says\n"
            f'    runtime.boundaries."arraykinds.collate:collate".args.data in {config}: arraykinds.collate:collate: '
            "`args.data` should hold per-sample data") in out


@pytest.mark.parametrize("kind", ["roles", "tracer"])
def test_the_roles_and_the_tracer_run_reports_read_with_their_padding(capsys, tmp_path, kind):
    env = {"LAYOUTCHECK": "record", "LAYOUTCHECK_CONFIG": str(FIXTURES / "debug-run.toml"),
           "LAYOUTCHECK_REPORT": "run.json", **({"LAYOUTCHECK_TRACE": "1"} if kind == "tracer" else {})}
    proc = debug_run(tmp_path, [str(FIXTURES / "train.py"), "--bug", "rollout_global_padding", "--rollouts", "1"],
                     **env)
    assert proc.returncode == 0, proc.stderr
    code, out, err = report_command(capsys, str(tmp_path / "run.json"))
    assert code == 0 and err == "", err
    hooks = 7 if kind == "tracer" else 4
    assert f"hooks ({hooks}): producer minitrainer.data:get_rollout_data 1 call; batch-builder" in out
    assert "rollout 0: all 32 samples are padded to P=14,080 = round_up(max T, A)" in out
    assert "O3/max_seq_lens x31" in out
    if kind == "tracer":  # the tracer's own findings, placed by file and line, are grouped by where they happened
        assert "O3/rollout_routed_experts x31" in out and "slice_with_cp at " in out
