"""The bucket advisor: the exact optimum against brute force, scoring against the geometry model,
the samplers, the comparison, warnings, verdict, and ``layoutcheck buckets`` end to end."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layoutcheck import cli, geometry
from layoutcheck.advisor.advise import Settings, advise
from layoutcheck.advisor.baselines import even_buckets, power_of_two_buckets, quantile_buckets
from layoutcheck.advisor.dp import optimal_buckets
from layoutcheck.advisor.sampler import MicroBatches, default_window, simulate
from layoutcheck.advisor.score import MaximaDistribution, padded_to
from layoutcheck.errors import LayoutSpecError

ROOT = Path(__file__).resolve().parents[1]


def command(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["buckets", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def positions_by_geometry(maxima, sizes, buckets) -> int:
    """Positions micro-batch by micro-batch with the geometry model's own `resolve_bucket` (G6)."""
    return sum(int(b) * geometry.resolve_bucket(int(m), buckets) for m, b in zip(maxima, sizes))


def lognormal(n: int, seed: int = 0, cap: int = 8192) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(np.rint(rng.lognormal(np.log(1300), 0.8, n)), 16, cap).astype(np.int64)


# ---------------------------------------------------------------- the exact optimum


small_corpus = st.tuples(
    st.sampled_from([1, 16, 128]),  # quantum
    st.integers(1, 9),  # grid lengths
    st.integers(1, 4),  # batch size
    st.integers(1, 5),  # K
    st.lists(st.integers(0, 10**6), min_size=1, max_size=40),  # lengths, scaled below
)


@settings(max_examples=150, deadline=None)
@given(small_corpus)
def test_dp_equals_brute_force_over_every_bucket_list(case):
    quantum, cells, batch_size, k_max, raw = case
    max_length = quantum * cells
    lengths = np.array([1 + r % max_length for r in raw], dtype=np.int64)
    batches = simulate(lengths, batch_size, "random", seed=len(raw))
    dist = MaximaDistribution.of(batches, max_length)
    grid = geometry.bucket_grid(max_length, quantum)
    found = optimal_buckets(grid, dist.weights(grid), k_max)
    for k, (buckets, cost) in enumerate(found, 1):
        # every list of at most k buckets whose last is max_length, scored micro-batch by micro-batch
        best = min(
            positions_by_geometry(batches.maxima, batches.sizes, (*inner, max_length))
            for r in range(min(k - 1, len(grid) - 1) + 1)
            for inner in itertools.combinations(grid[:-1], r)
        )
        assert cost == best
        assert len(buckets) <= k and buckets[-1] == max_length
        assert geometry.validate_buckets(buckets, max_length, quantum=quantum) == buckets
        assert positions_by_geometry(batches.maxima, batches.sizes, buckets) == cost
    costs = [c for _, c in found]
    assert costs == sorted(costs, reverse=True)  # more buckets never cost more


def test_dp_with_every_grid_length_is_the_floor_and_one_bucket_is_static():
    lengths = lognormal(5000)
    dist = MaximaDistribution.of(simulate(lengths, 1), 8192)
    grid = geometry.bucket_grid(8192)
    found = optimal_buckets(grid, dist.weights(grid), len(grid))
    assert found[0] == ((8192,), 8192 * 5000)
    assert found[-1][1] == dist.floor_positions(128) == int(sum(geometry.round_up(int(t), 128) for t in lengths))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4096), min_size=1, max_size=60), st.integers(1, 5),
       st.sets(st.integers(1, 31), max_size=6))
def test_scoring_matches_resolve_bucket_per_micro_batch(lengths, batch_size, inner):
    batches = simulate(np.array(lengths), batch_size, "random", seed=3)
    buckets = (*sorted(128 * i for i in inner), 4096)
    dist = MaximaDistribution.of(batches, 4096)
    assert dist.positions(buckets) == positions_by_geometry(batches.maxima, batches.sizes, buckets)
    assert padded_to(buckets, batches.maxima).tolist() == [geometry.resolve_bucket(int(m), buckets)
                                                          for m in batches.maxima]
    assert dist.longest_positions == sum(int(m) * int(b) for m, b in zip(batches.maxima, batches.sizes))


# ---------------------------------------------------------------- samplers


def test_random_sampler_cuts_a_shuffle_into_micro_batches():
    lengths = np.arange(1, 104)
    batches = simulate(lengths, 8, "random", seed=5)
    order = lengths[np.random.default_rng(5).permutation(lengths.size)]
    chunks = [order[i : i + 8] for i in range(0, order.size, 8)]
    assert batches.maxima.tolist() == [int(c.max()) for c in chunks]
    assert batches.sizes.tolist() == [8] * 12 + [7]
    assert batches.totals.tolist() == [int(c.sum()) for c in chunks]


def test_grouped_sampler_is_hugging_face_length_grouping():
    lengths = lognormal(1037, seed=2)
    batch_size, window = 4, 10
    batches = simulate(lengths, batch_size, "grouped", window=window, seed=7)
    # Hugging Face's get_length_grouped_indices: permute, mega-batches of window * B, each sorted
    # longest first, then consecutive micro-batches of B.
    order = np.random.default_rng(7).permutation(lengths.size).tolist()
    mega = window * batch_size
    indices = [i for j in range(0, len(order), mega)
               for i in sorted(order[j : j + mega], key=lambda i: -lengths[i])]
    chunks = [[int(lengths[i]) for i in indices[j : j + batch_size]] for j in range(0, len(indices), batch_size)]
    expected = sorted((max(c), len(c), sum(c)) for c in chunks)
    got = sorted(zip(batches.maxima.tolist(), batches.sizes.tolist(), batches.totals.tolist()))
    assert got == expected
    assert default_window(1037, 4) == 50 and default_window(40, 4) == 2 and default_window(3, 4) == 1


def test_grouping_lowers_the_maxima_and_batch_size_one_ignores_the_sampler():
    lengths = lognormal(20000)
    random = MaximaDistribution.of(simulate(lengths, 8, "random"), 8192)
    grouped = MaximaDistribution.of(simulate(lengths, 8, "grouped"), 8192)
    assert grouped.longest_positions < 0.6 * random.longest_positions
    one = simulate(lengths, 1, "random", seed=1)
    assert one.maxima.tolist() == lengths.tolist() and one.samples == lengths.size


# ---------------------------------------------------------------- baselines and the comparison


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 8), st.integers(1, 64), st.sampled_from([16, 128, 384]))
def test_hand_picked_lists_are_valid_bucket_lists(k, cells, step):
    max_length = step * cells
    lengths = np.arange(1, max_length + 1)
    for buckets in (even_buckets(k, max_length, step), power_of_two_buckets(k, max_length, step),
                    quantile_buckets(k, lengths, max_length, step)):
        assert 1 <= len(buckets) <= k
        assert geometry.bucket_problems(buckets, max_length, quantum=step, require_max_last=True) == []


def test_hand_picked_lists_at_four_buckets():
    assert even_buckets(4, 8192, 128) == (2048, 4096, 6144, 8192)
    assert power_of_two_buckets(4, 8192, 128) == (1024, 2048, 4096, 8192)
    assert power_of_two_buckets(4, 6000, 128) == (1024, 2048, 4096, 6000)
    assert quantile_buckets(4, np.arange(1, 4001), 8192, 128) == (1024, 2048, 3072, 8192)


def test_the_optimum_beats_every_list_and_stays_above_the_floor():
    lengths = lognormal(30000)
    advice = advise(lengths, Settings(max_length=8192, current=(1024, 2048, 4096, 8192)))
    floor, static = advice.floor.positions, advice.static.positions
    assert advice.longest.positions == advice.true_tokens  # batch size 1: pad-to-longest is no padding
    assert advice.longest.positions <= floor
    previous = static
    for row in advice.rows:
        assert floor <= row.optimum.positions <= previous
        previous = row.optimum.positions
        for baseline in row.baselines.values():
            assert row.optimum.positions <= baseline.positions
    assert advice.row(4).optimum.positions <= advice.current.positions
    assert advice.row(1).optimum.buckets == (8192,) and advice.row(1).optimum.positions == static
    assert advice.gap_closed(static) == 0 and advice.gap_closed(floor) == 1


def test_out_of_sample_scores_the_same_buckets_on_another_shuffle():
    lengths = lognormal(4000, seed=4)
    s = Settings(max_length=8192, batch_size=4, ks=(3,), seed=11)
    advice = advise(lengths, s)
    row = advice.row(3)
    held = simulate(lengths, 4, "random", seed=12)
    assert row.optimum.held_out == positions_by_geometry(held.maxima, held.sizes, row.optimum.buckets)
    assert row.optimum.held_out != row.optimum.positions  # another shuffle, other maxima
    refit = optimal_buckets(advice.grid, MaximaDistribution.of(held, 8192).weights(advice.grid), 3)[2][1]
    assert row.refit_held_out == refit <= row.optimum.held_out


def test_recommended_k_and_the_verdict_arithmetic():
    # Half the samples at 128 tokens, half at 8192: two buckets remove all padding.
    lengths = np.array([128, 8192] * 500)
    advice = advise(lengths, Settings(max_length=8192, ks=(1, 2, 3), within=0.0))
    assert advice.recommended == 2 and advice.row(2).optimum.buckets == (128, 8192)
    v = advice.verdict
    per_step = (8192 - 128) / 2 / 8192  # one step at max length takes 1 s; buckets halve the short ones
    assert v.padding_saved == 1.0 and v.time_saved_per_step == pytest.approx(per_step)
    assert v.break_even_steps == -(-12 // per_step) == 25
    assert v.text.startswith("buckets save 100% of padded positions; worth it above about 25 steps")
    short = advise(lengths, Settings(max_length=8192, ks=(2,), steps=10)).verdict
    long = advise(lengths, Settings(max_length=8192, ks=(2,), steps=1000)).verdict
    assert short.worth_it is False and short.text.endswith("not worth it")
    assert long.worth_it is True and long.text.endswith(": worth it")
    flat = advise(np.full(100, 8000), Settings(max_length=8192)).verdict
    assert flat.text.startswith("buckets do not pay here: one static length (8192) is already within 5%")
    only_one = advise(lengths, Settings(max_length=8192, ks=(1,))).verdict
    assert only_one.text.startswith("one bucket is one static length") and only_one.break_even_steps is None


def test_warnings():
    lengths = lognormal(3000, cap=8000)
    warned = advise(lengths, Settings(max_length=8000, batch_size=8, sp_degree=3, recompile_limit=8,
                                      current=(1000, 4096))).warnings
    text = "\n".join(warned)
    assert "max length 8000 is not a multiple of the quantum 128" in text
    assert ("buckets are multiples of lcm(128, 3) = 384, not of the quantum 128 alone, so that each can split "
            "evenly over the SP degree 3") in text
    assert "max length 8000, the last bucket, does not split evenly over the SP degree 3" in text
    assert "current buckets: bucket #0 is 1000, not a multiple of 128" in text
    assert "current buckets: bucket #1 is 4096, which does not split evenly over the SP degree 3" in text
    assert "need a Dynamo recompile limit of 2K + 4" in text
    assert "a length-grouped sampler (--sampler grouped" in text and "buys more than any bucket choice" in text
    # quantiles of a corpus with two lengths repeat: K=8 gives two distinct buckets
    narrow = advise(np.array([300, 900] * 50), Settings(max_length=1024, ks=(8,))).warnings
    assert any("sample-quantile buckets repeat" in w and "K=8 gives 2 distinct buckets" in w for w in narrow)
    quiet = advise(lengths, Settings(max_length=8192, ks=(1, 2), batch_size=2)).warnings
    assert quiet == []


@settings(max_examples=80, deadline=None)
@given(st.sampled_from([1, 16, 128]), st.integers(1, 6), st.integers(1, 8))
def test_every_grid_length_slices_over_cp_and_splits_each_rank_part_over_sp(quantum, sp, cp):
    # The grid is read against the CP model itself, not the formula: every rank's
    # zigzag part of a bucket is whole chunks and splits over the SP ranks.
    grid = geometry.bucket_grid(4 * 128 * 48, quantum, sp_degree=sp, cp_degree=cp)
    step = geometry.bucket_step(quantum, sp, cp)
    assert grid[0] == step and all(p % quantum == 0 for p in grid[:-1])
    for p in grid[:3]:
        part = geometry.local_length(p, cp)
        assert part * cp == p and part % sp == 0
        assert geometry.bucket_problems([p], p, quantum=quantum, sp_degree=sp, cp_degree=cp) == []
    # and the step is the smallest such length: nothing on the quantum grid below it qualifies
    for p in range(quantum, step, quantum):
        assert geometry.local_length(p, cp) * cp != p or geometry.local_length(p, cp) % sp


def test_sp_inside_cp_needs_cp_times_sp_not_the_lcm_of_the_two_units():
    # verl c20d5049a: lcm(2 * cp, sp) = 4 with cp=2, sp=4 leaves each CP rank 2 positions for 4 SP ranks.
    assert geometry.bucket_step(1, sp_degree=4, cp_degree=2) == 8
    assert geometry.bucket_problems([4, 8], 8, quantum=1, sp_degree=4, cp_degree=2) == [
        ("bucket #0 is 4, which does not give each of the 2 CP ranks a part that splits evenly over the SP "
         "degree 4 (a multiple of cp * sp = 8)"),
    ]
    assert geometry.bucket_problems([6], 6, quantum=1, cp_degree=2)[0] == (
        "max_length 6 does not split into the 4 zigzag chunks of CP degree 2")
    lengths = lognormal(3000, cap=8000)
    warned = "\n".join(advise(lengths, Settings(max_length=8192, sp_degree=3, cp_degree=4)).warnings)
    assert ("buckets are multiples of lcm(128, 8, 12) = 384, not of the quantum 128 alone, so that each can "
            "split into the 8 zigzag chunks of CP degree 4 and give each of the 4 CP ranks a part that splits "
            "evenly over the SP degree 3 (a multiple of cp * sp = 12)") in warned
    assert "max length 8192, the last bucket, does not give each of the 4 CP ranks" in warned


def test_bad_settings_and_current_buckets_are_spec_errors():
    with pytest.raises(LayoutSpecError, match="above max_length"):
        advise(np.array([9000]), Settings(max_length=8192))
    with pytest.raises(LayoutSpecError, match="--current 2048,1024: bucket #1 is 1024, not above"):
        advise(np.array([100]), Settings(max_length=8192, current=(2048, 1024)))
    with pytest.raises(LayoutSpecError, match="unknown sampler"):
        Settings(max_length=8192, sampler="sorted")


# ---------------------------------------------------------------- the command


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "lengths.txt"
    path.write_text("\n".join(map(str, lognormal(5000))) + "\n")
    return path


def test_table_on_a_lengths_file(capsys, corpus):
    code, out, err = command(capsys, str(corpus), "--max-length", "8192", "--current", "1024,2048,4096,8192")
    assert code == 0
    for label in ("pad to longest", "pad to quantum (floor)", "one static length", "current", "optimum K=1",
                  "optimum K=8", "recommended: K=", "compile cost: ", "verdict: buckets save "):
        assert label in out, label
    assert "warning: the recommended" in err  # K >= 3 buckets need a recompile limit above 8


def test_json_has_buckets_per_k_and_pad_ratios(capsys, corpus):
    code, out, err = command(capsys, str(corpus), "--max-length", "8192", "--k", "2..5", "--output-format", "json")
    assert code == 0
    doc = json.loads(out)
    assert [o["k"] for o in doc["optimum"]] == [2, 3, 4, 5]
    advice = advise(np.loadtxt(corpus, dtype=np.int64), Settings(max_length=8192, ks=(2, 3, 4, 5)))
    for entry in doc["optimum"]:
        row = advice.row(entry["k"])
        assert tuple(entry["buckets"]) == row.optimum.buckets
        assert entry["pad_ratio"] == pytest.approx(row.optimum.positions / advice.true_tokens, abs=1e-6)
        assert set(entry["baselines"]) == {"quantiles", "powers_of_two", "even"}
        assert entry["graphs"] == len(entry["buckets"])
        assert entry["out_of_sample"]["positions"] == row.optimum.held_out
    for name in ("pad_to_longest", "pad_to_quantum", "static"):
        assert doc["strategies"][name]["pad_ratio"] >= 1.0
    assert doc["strategies"]["current"] is None
    assert doc["recommended"]["k"] in (2, 3, 4, 5) and doc["verdict"]["text"].startswith("buckets save")


@pytest.mark.parametrize(("content", "message"), [
    ("", "lengths.txt: no lengths (the file is empty)"),
    ("120\n\n-5\n", "lengths.txt:3: -5 is not a positive token length"),
    ("120\n1.5\n", "lengths.txt:2: '1.5' is not an integer token length"),
    ("120\nabc\n", "lengths.txt:2: 'abc' is not an integer token length"),
    ("120\n\n9000\n", "lengths.txt:3: length 9000 is above --max-length 8192"),
])
def test_bad_lengths_exit_2_with_the_line_and_nothing_else(capsys, tmp_path, content, message):
    path = tmp_path / "lengths.txt"
    path.write_text(content)
    code, out, err = command(capsys, str(path), "--max-length", "8192")
    assert code == 2 and out == ""
    assert err.startswith(f"layoutcheck: error: {path.parent}/{message}") and err.count("\n") == 1


def test_jsonl_field_holds_a_length_or_token_ids(capsys, tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"meta": {"n": 300}}\n\n{"meta": {"n": [5, 6, 7]}}\n')
    code, out, err = command(capsys, str(path), "--field", "meta.n", "--k", "1", "--output-format", "json")
    assert code == 0 and json.loads(out)["input"] == {"path": str(path), "format": "jsonl", "samples": 2,
                                                      "true_tokens": 303}
    path.write_text('{"meta": {"n": 300}}\n{"other": 1}\n')
    code, out, err = command(capsys, str(path), "--field", "meta.n")
    assert code == 2 and out == ""
    assert err == f"layoutcheck: error: {path}:2: no field `meta.n` (choose the field with --field)\n"


def test_npy_standard_input_and_run_report_inputs(capsys, tmp_path, monkeypatch):
    import io

    lengths = lognormal(500)
    np.save(tmp_path / "l.npy", lengths)
    code, out, _ = command(capsys, str(tmp_path / "l.npy"), "--k", "3", "--emit", "json", "-q")
    assert code == 0
    expected = advise(lengths, Settings(max_length=geometry.round_up(int(lengths.max()), 128), ks=(3,)))
    assert tuple(json.loads(out)) == expected.row(3).optimum.buckets
    np.save(tmp_path / "bad.npy", np.array([3, 0, 4]))
    code, out, err = command(capsys, str(tmp_path / "bad.npy"))
    assert (code, out) == (2, "") and "bad.npy: index 1: 0 is not a positive token length" in err

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"100\n200\n300\n")))
    code, out, _ = command(capsys, "-", "--k", "1", "--output-format", "json")
    assert code == 0 and json.loads(out)["input"]["true_tokens"] == 600

    from runreports import pipeline_report

    report = pipeline_report(8, rollout_global=False)
    (tmp_path / "run.json").write_text(report.to_json())
    code, out, _ = command(capsys, str(tmp_path / "run.json"), "--k", "1", "--output-format", "json")
    assert code == 0 and json.loads(out)["input"]["true_tokens"] == report.totals.true_tokens


def test_emit_forms(capsys, corpus):
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")

    code, toml_text, err = command(capsys, str(corpus), "--max-length", "8192", "--k", "4", "--emit", "toml")
    assert code == 0
    table = tomllib.loads(toml_text)["tool"]["layoutcheck"]
    buckets = table["runtime"]["buckets"]
    assert len(buckets) == 4 and buckets[-1] == 8192 and "verdict: " in err
    # the entry is what the runtime's configuration accepts
    from layoutcheck.config import validate_table

    assert validate_table(table, None).runtime.settings().buckets == tuple(buckets)
    _, yaml_text, _ = command(capsys, str(corpus), "--max-length", "8192", "--k", "4", "--emit", "yaml", "-q")
    assert yaml_text == f"training.static_shape_buckets: [{', '.join(map(str, buckets))}]\n"
    _, json_text, _ = command(capsys, str(corpus), "--max-length", "8192", "--k", "4", "--emit", "json", "-q")
    assert json.loads(json_text) == buckets


def test_check_validates_a_list_with_one_line_per_problem(capsys):
    code, out, err = command(capsys, "--check", "1024,3000,2048,4096,x", "--max-length", "8192")
    assert code == 1
    assert out.splitlines() == [
        "bucket #1 is 3000, not a multiple of 128",
        "bucket #2 is 2048, not above the previous bucket 3000",
        "bucket #4 is 'x', not an integer",
    ]
    assert err.startswith("3 problems in buckets 1024,3000,2048,4096,x")
    code, out, err = command(capsys, "--check", "1024,4096", "--max-length", "8192", "--sp-degree", "3")
    assert code == 1 and out.splitlines() == [
        "max_length 8192 does not split evenly over the SP degree 3",
        "bucket #0 is 1024, which does not split evenly over the SP degree 3",
        "bucket #1 is 4096, which does not split evenly over the SP degree 3",
        "the last bucket is 4096, not max_length 8192: end the list with 8192 (max_length is always the last bucket)",
    ]
    code, out, err = command(capsys, "--check", "384,8192", "--max-length", "8192", "--sp-degree", "3",
                             "--cp-degree", "4", "--output-format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["cp_degree"] == 4 and doc["problems"] == [
        ("max_length 8192 does not give each of the 4 CP ranks a part that splits evenly over the SP degree 3 "
         "(a multiple of cp * sp = 12)"),
        ("bucket #1 is 8192, which does not give each of the 4 CP ranks a part that splits evenly over the SP "
         "degree 3 (a multiple of cp * sp = 12)"),
    ]
    assert "(max length 8192, quantum 128, SP degree 3, CP degree 4)" in err
    code, out, err = command(capsys, "--check", "1024,2048,8192", "--max-length", "8192", "--output-format", "json")
    assert code == 0 and json.loads(out)["valid"] is True and err.startswith("Buckets 1024,2048,8192 are valid")
    assert command(capsys, "--check", "1024")[0] == 2  # no --max-length


def test_plot_writes_an_image(capsys, corpus, tmp_path):
    code, _, err = command(capsys, str(corpus), "--max-length", "8192", "--batch-size", "4", "--k", "4",
                           "--plot", str(tmp_path / "b.svg"), "-q")
    assert code == 0 and err == ""
    assert (tmp_path / "b.svg").read_text().lstrip().startswith("<?xml")


def test_missing_extras_name_the_extra(capsys, corpus, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    code, out, err = command(capsys, str(corpus), "--plot", "x.png")
    assert (code, out) == (2, "")
    assert err == "layoutcheck: error: layoutcheck buckets needs matplotlib: pip install 'layoutcheck[plot]'\n"
    monkeypatch.setitem(sys.modules, "numpy", None)
    code, out, err = command(capsys, str(corpus))
    assert err == "layoutcheck: error: layoutcheck buckets needs numpy: pip install 'layoutcheck[buckets]'\n"


def test_help_stays_cheap_and_the_advisor_never_imports_torch():
    probe = (
        "import sys\n"
        "from layoutcheck import cli\n"
        "cli.build_parser()\n"
        "cheap = [m for m in ('numpy', 'matplotlib', 'torch') if m in sys.modules]\n"
        "import layoutcheck.advisor.advise, layoutcheck.advisor.inputs, layoutcheck.advisor.render\n"
        "import layoutcheck.waste.analysis, layoutcheck.waste.plot, layoutcheck.waste.render\n"
        "print(cheap, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[] False"


def test_micro_batches_record_is_consistent():
    b = MicroBatches(np.array([5, 9]), np.array([2, 1]), np.array([8, 9]))
    assert len(b) == 2 and b.samples == 3 and b.longest_positions == 19
