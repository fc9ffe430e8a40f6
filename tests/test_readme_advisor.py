"""The docs' "Bucket advisor and padding reports" page says what the code does: its excerpts and options
are checked against real runs, and the comparison table of benchmarks/README.md against the benchmark."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
from runreports import pipeline_report

from layoutcheck import cli

ROOT = Path(__file__).resolve().parents[1]
SECTION = (ROOT / "docs" / "reports.md").read_text()
BENCHMARKS = (ROOT / "benchmarks" / "README.md").read_text()


def load_benchmark(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def excerpt_after(marker: str) -> list[str]:
    """The lines of the plain code block whose text contains ``marker``."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", SECTION, flags=re.S | re.M)
    block = next(body for lang, body in blocks if not lang and marker in body)
    return [line.rstrip() for line in block.splitlines()]


def assert_excerpt(excerpt: list[str], out: str) -> None:
    lines = [line.rstrip() for line in out.splitlines()]
    for line in excerpt:
        if line and line != "..." and not line.startswith("$ "):
            assert line in lines, line


def test_comparison_table_is_what_the_benchmark_prints():
    table = BENCHMARKS.split("<!-- bucket-comparison:start -->\n", 1)[1].split("\n<!-- bucket-comparison:end -->", 1)[0]
    assert table == load_benchmark("bucket_corpora").comparison_table()


def test_bucket_table_excerpt_matches_a_run(capsys, tmp_path, monkeypatch):
    excerpt = excerpt_after("$ layoutcheck buckets lengths.txt")
    argv = excerpt[0].removeprefix("$ layoutcheck ").split()
    monkeypatch.chdir(tmp_path)
    np.savetxt("lengths.txt", load_benchmark("bucket_corpora").corpus("lognormal"), fmt="%d")
    assert cli.main(argv) == 0
    assert_excerpt(excerpt, capsys.readouterr().out)


def test_report_excerpt_matches_a_run(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("run.json").write_text(pipeline_report(32, rollout_global=True, micro_batch_size=2).to_json())
    assert cli.main(["report", "run.json"]) == 0
    assert_excerpt(excerpt_after("padding per sample (max_seq_lens)"), capsys.readouterr().out)
    image = ROOT / "docs" / "report.png"
    assert "](report.png)" in SECTION
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and image.stat().st_size < 150_000


def test_every_option_named_exists(capsys):
    for command in ("buckets", "report"):
        assert cli.main([command, "--help"]) == 0
    helps = capsys.readouterr().out
    options = set(re.findall(r"`(--[a-z-]+)", SECTION))
    assert len(options) >= 18
    for option in options:
        assert option in helps, option
