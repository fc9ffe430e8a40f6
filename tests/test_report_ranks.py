"""``layoutcheck report`` on a job's rank reports: merged totals, a row per rank, the ranks that disagree.

The reports are synthetic (`fixtures/rankreports.py`, built with the
run-report model, sized as the debug mode writes them): ranks 0-3 of a job
of 8 in CP groups of 2, with bugs planted on chosen ranks. Every figure the
merge prints is checked against the reports themselves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rankreports import rank_report

from layoutcheck import cli

WORLD = 8


def report_command(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["report", *argv])
    out, err = capsys.readouterr()
    return code, out, err


# The module's module-scoped fixture runs once: its tests all go to one xdist worker
# (`--dist loadgroup` in pyproject.toml) instead of each worker paying for it.
pytestmark = pytest.mark.xdist_group("test_report_ranks")


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> tuple[Path, list]:
    """Eight ranks: 2 and 3 (one CP group) pad rollout 5 rollout-globally, 5 lays out its first micro-batch
    with another P than its CP peer 4, and 6 runs one micro-batch fewer per rollout."""
    folder = tmp_path_factory.mktemp("job")
    reports = []
    for rank in range(WORLD):
        report = rank_report(rank, WORLD, rollouts=6, samples=64, global_padding={5} if rank in (2, 3) else (),
                             other_p=rank == 5, short_schedule=rank == 6)
        (folder / f"run.rank{rank}.json").write_text(report.to_json())
        reports.append(report)
    return folder, reports


def test_the_job_s_totals_are_the_ranks_totals_summed(capsys, job):
    folder, reports = job
    code, out, err = report_command(capsys, *sorted(str(p) for p in folder.glob("*.json")))
    assert (code, err) == (0, "")
    true = sum(r.totals.true_tokens for r in reports)
    padded = sum(r.totals.padded_tokens for r in reports)
    assert out.startswith(f"layoutcheck report: {WORLD} run reports\n  {WORLD} ranks (world size {WORLD}) on 1 host(s)")
    assert f"  max_seq_lens: {true:,} true tokens padded to {padded:,} ({padded / true:.2f}x)" in out
    kept = sum(len(r.samples) for r in reports)
    assert f"detail below: {kept:,} of {sum(r.totals.samples for r in reports):,} samples" in out


def test_each_rank_has_a_row_and_the_ranks_that_disagree_are_named(capsys, job):
    folder, reports = job
    code, out, _ = report_command(capsys, str(folder))
    assert code == 0
    rows = out.split("ranks (8): whole-run totals of each\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    by_rank = {int(line.split()[0]): line.split() for line in rows}
    assert sorted(by_rank) == list(range(WORLD))
    for report in reports:
        row = by_rank[report.rank.rank]
        t = report.totals
        assert row[1:5] == [f"{report.rank.cp_rank}/2", str(t.rollouts), f"{t.samples:,}", f"{t.micro_batches:,}"]
        assert row[5] == f"{t.padded_tokens / t.true_tokens:.2f}x" and row[7] == str(len(report.violations))
    assert by_rank[2][-1] == by_rank[3][-1] == "violations"
    assert by_rank[5][-1] == "P" and by_rank[6][-1] == "schedule" and by_rank[0][-1] == "-"

    section = out.split("ranks that disagree (3):\n", 1)[1].split("\n\n", 1)[0]
    assert "  schedule: ranks laid out different numbers of micro-batches" in section
    assert "    ranks 0-5, 7: 192 micro-batches in 6 rollout(s)" in section
    assert "    rank 6: 186 micro-batches in 6 rollout(s)" in section
    assert ("  P: ranks holding the same samples laid out rollout 0 micro-batch 0 with different "
            "padded lengths (X1)") in section
    p4 = reports[4].micro_batches[0].padded
    assert f"    rank 4: P={p4:,} for rollout 0 micro-batch 0" in section
    assert f"    rank 5: P={p4 + 128:,} for rollout 0 micro-batch 0" in section
    o3 = len(reports[2].violations)
    assert f"    ranks 0-1, 4-7: none\n    ranks 2-3: O3 x{o3}" in section
    assert f"violations: {2 * o3} (O3/max_seq_lens x{2 * o3})" in out


def test_the_json_carries_the_same_rows_and_disagreements(capsys, job):
    folder, reports = job
    code, out, _ = report_command(capsys, str(folder), "--output-format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["rank"] is None and len(doc["source"]) == WORLD
    assert [r["rank"] for r in doc["ranks"]] == list(range(WORLD))
    assert [r["micro_batches"] for r in doc["ranks"]] == [r.totals.micro_batches for r in reports]
    assert doc["run_totals"]["true_tokens"] == sum(r.totals.true_tokens for r in reports)
    kinds = {d["kind"]: d["variants"] for d in doc["disagreements"]}
    assert set(kinds) == {"schedule", "P", "violations"}
    assert kinds["schedule"][1]["ranks"] == [6] and kinds["P"][1]["ranks"] == [5]
    assert doc["violations"][0]["ranks"] == [2, 3] and doc["problems"] == []


def test_reports_that_are_not_one_job_are_said_so(capsys, job, tmp_path):
    folder, reports = job
    first = [str(folder / f"run.rank{r}.json") for r in (0, 1)]
    again = tmp_path / "again.json"
    again.write_text(reports[1].to_json())
    code, out, _ = report_command(capsys, *first, str(again))
    assert code == 0
    assert f"  warning: rank 1 has 2 reports ({first[1]}, {again}): reports of different runs?" in out
    assert "  warning: world size 8, but no report for rank(s) 2-7" in out


def test_a_folder_without_reports_and_a_missing_path_exit_2(capsys, tmp_path):
    assert report_command(capsys, str(tmp_path)) == (
        2, "", f"layoutcheck: error: {tmp_path}: a folder with no *.json run reports in it\n")
    assert report_command(capsys, str(tmp_path / "nope.json"))[::2] == (
        2, f"layoutcheck: error: {tmp_path / 'nope.json'}: no such file or directory\n")


def test_a_folder_s_other_json_files_are_skipped_and_named_but_a_named_one_is_an_error(capsys, job, tmp_path):
    folder, reports = job
    mixed = tmp_path / "outputs"
    mixed.mkdir()
    for rank in (0, 1):
        (mixed / f"run.rank{rank}.json").write_text((folder / f"run.rank{rank}.json").read_text())
    (mixed / "config.json").write_text('{"lr": 1e-5}')  # what a trainer's output folder also holds
    (mixed / "metrics.json").write_text("[1, 2]")
    code, out, err = report_command(capsys, str(mixed))
    assert code == 0 and out.startswith("layoutcheck report: 2 run reports\n"), out
    assert err == (f"layoutcheck report: skipped 2 *.json file(s) that are not run reports: {mixed / 'config.json'}, "
                   f"{mixed / 'metrics.json'}\n")
    # named on the command line, the same file is a mistake to report
    code, _, err = report_command(capsys, str(mixed / "config.json"))
    assert code == 2 and "config.json is not a layoutcheck run report: no `schema_version`" in err
    # a folder of other JSON only: nothing to report
    for rank in (0, 1):
        (mixed / f"run.rank{rank}.json").unlink()
    code, _, err = report_command(capsys, str(mixed))
    assert code == 2 and f"{mixed}: no layoutcheck run report among its *.json files" in err, err


def test_the_plot_of_a_job_has_one_bar_pair_per_rank_and_marks_the_ranks_that_disagree(capsys, job, tmp_path):
    from layoutcheck.runtime.reporting.runreport import load_run_report
    from layoutcheck.waste.job import JobBuilder
    from layoutcheck.waste.plot import picture_of

    folder, reports = job
    builder = JobBuilder()
    for rank in range(WORLD):
        builder.add(load_run_report(folder / f"run.rank{rank}.json"), f"run.rank{rank}.json")
    w = builder.finish()
    picture = picture_of(w, [str(p) for p in folder.glob("*.json")])
    assert picture.inflation is None  # per sample only for one report: a job draws per rank
    assert list(picture.ranks.ranks) == list(range(WORLD))
    assert [int(r) for r in picture.ranks.ranks[picture.ranks.flagged]] == [2, 3, 5, 6]
    assert int(picture.laid_out.sum()) == w.positions and int(picture.length_counts.sum()) == sum(
        len(r.samples) for r in reports)
    image = tmp_path / "job.png"
    code, _, err = report_command(capsys, str(folder), "--plot", str(image))
    assert code == 0 and err == f"Wrote {image}.\n" and image.stat().st_size > 20_000
