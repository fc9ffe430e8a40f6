"""The pytest plugin, in real pytest runs of temporary projects (`pytester`).

Runs that import the reference pipeline (torch) or need a fresh interpreter
(the start-up file, pytest-xdist, what loading the plugin imports) go to a
subprocess, as few as possible: one project holds every bug flag and the
marker and fixture cases. Option, ini, environment and precedence cases run
in-process on a torch-free trainer (`TINY`), whose producer has the
rollout-global padding bug behind an argument.
"""

from __future__ import annotations

import fnmatch
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import layoutcheck.runtime.tracing.session_tracer  # noqa: F401 - before any in-process run (see below)
from layoutcheck.lint.output import OUTPUT_FORMATS
from layoutcheck.pytest_plugin import HELP, merge_figures, summary_lines

# An in-process run drops the modules it imported from sys.modules when it ends, while its package keeps them as
# attributes: the tracer's modules (which the plugin's default brings in) are imported here first, so that later
# tests see one copy of the tag table.

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
CI_PAGE = (ROOT / "docs" / "ci.md").read_text()
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
"""Every inner run: no cache folder, and no hypothesis plugin (importing hypothesis costs a second a run)."""

TINY = '''
from argparse import Namespace


def get_rollout_data(args, rollout_data_ref, witness_info=None):
    totals = list(rollout_data_ref)
    top = -(-max(totals) // 128) * 128
    padded = [top] * len(totals) if args.global_padding else [-(-t // 128) * 128 for t in totals]
    return {"tokens": [[1] * t for t in totals], "total_lengths": totals,
            "response_lengths": [t // 2 for t in totals], "max_seq_lens": padded}, None


def step(bug=False):
    args = Namespace(qkv_format="bshd", allgather_cp=False, data_pad_size_multiplier=128,
                     compress_ratios=[], sequence_parallel=False, global_padding=bug)
    return get_rollout_data(args, [300, 1000])
'''

TINY_TABLE = """
[tool.layoutcheck.runtime.hooks]
producer = ["tinytrainer:get_rollout_data"]
"""

TINY_TESTS = """
import pytest
from tinytrainer import step

def test_clean():
    step()

def test_bug():
    step(bug=True)
"""


@pytest.fixture
def tiny(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with the torch-free trainer, its hook table in pyproject.toml, and two tests."""
    pytester.makepyfile(tinytrainer=TINY, test_tiny=TINY_TESTS)
    pytester.makepyprojecttoml(TINY_TABLE)
    pytester.syspathinsert()
    return pytester


def junit(pytester: pytest.Pytester, *args: str, subprocess: bool = True) -> tuple[pytest.RunResult, dict[str, str]]:
    """Run pytest; return the result and each test's failure text ("" when it passed)."""
    xml = pytester.path / "junit.xml"
    run = pytester.runpytest_subprocess if subprocess else pytester.runpytest_inprocess
    result = run(*args, f"--junitxml={xml}", *QUIET)
    outcomes = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        outcomes[case.get("name")] = "" if failure is None else (failure.get("message", "") + "\n" + (failure.text or ""))
    return result, outcomes


# ---------------------------------------------------------------- loading


def test_loading_the_plugin_imports_neither_torch_nor_libcst_and_no_layoutcheck_leaves_it_out(pytester):
    pytester.makeconftest("""
        import sys
        def pytest_unconfigure(config):
            loaded = [m for m in ("torch", "libcst", "pydantic", "layoutcheck.runtime", "layoutcheck.lint",
                                  "layoutcheck.pytest_plugin") if m in sys.modules]
            sys.stdout.write(f"\\nLOADED={loaded}\\n")
    """)
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")  # hypothesis's plugin too, as users have it
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["LOADED=['layoutcheck.pytest_plugin']"])
    result = pytester.runpytest_subprocess("-s", *QUIET, "-p", "no:layoutcheck")
    result.stdout.fnmatch_lines(["LOADED=[[][]]"])
    result = pytester.runpytest_inprocess(*QUIET, "-p", "no:layoutcheck", "--layoutcheck")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unrecognized arguments: --layoutcheck*"])


def test_one_help_text_serves_the_option_and_the_ini_key_and_the_docs_name_only_real_ones(pytester):
    result = pytester.runpytest_inprocess("--help", *QUIET)
    text = " ".join(result.stdout.str().split())
    for key in ("enable", "mode", "config", "lint"):
        assert text.count(" ".join(HELP[key].split())) == 2, key  # once for the option, once for the ini key
    section = CI_PAGE.split("## pre-commit", 1)[0]
    options = set(re.findall(r"(--(?:no-)?layoutcheck[a-z-]*)", section))
    keys = set(re.findall(r"`(layoutcheck(?:_[a-z_]+)?)(?: = true)?`", section))
    assert len(options) == 5 and len(keys) == 5, (options, keys)
    for name in options:
        assert f" {name}" in text, name
    for key in keys:
        assert f" {key} (" in text, key
    assert "layoutcheck check --output-format github ." in section and "github" in OUTPUT_FORMATS


# ---------------------------------------------------------------- the reference pipeline

MINITRAINER_TABLE = """
[tool.layoutcheck.runtime]
parallel-state = "minitrainer.parallel:get_parallel_state"
# the boundary checks alone (the plugin's default adds the tracer: tests/test_traced_pipeline.py)
tracer = false
{extra}
[tool.layoutcheck.runtime.hooks]
producer = ["minitrainer.data:get_rollout_data"]
batch-builder = ["minitrainer.data:get_batch"]
replay-filler = ["minitrainer.replay_data:fill_replay_data"]
offset-helper = ["minitrainer.cp_utils:get_logits_and_tokens_offset_with_cp"]
"""

MINITRAINER_CONFTEST = f"""
import sys
sys.path.insert(0, {str(FIXTURES)!r})
from layoutcheck.runtime.activation.session import active_session
ACTIVE_AT_CONFTEST = active_session() is not None
from minitrainer.actor import train_step  # imported by a conftest: hooked all the same
from minitrainer.args import make_args
from minitrainer.parallel import parallel_state
from minitrainer.rollout import make_rollout_ref

REF = make_rollout_ref([300, 130, 700, 1000, 250, 900, 2000, 129], seed=3, media={{0: 193}})


def step(rank=0, cp=2, **args):
    # One rank per test: tests are independent, as the plugin treats them.
    with parallel_state(cp_size=cp, cp_rank=rank):
        return train_step(make_args(**args), REF)
"""

# bug -> (make_args overrides, the CP rank that shows it, the invariant that must name it)
FLAGS = {
    "rollout_global_padding": ({}, 0, "O3"),
    "mixed_padded_lengths": ({"micro_batch_size": 2}, 0, "G1"),
    "logprobs_sliced_with_other_p": ({}, 0, "O4"),
    "replay_thd_pad_multiplier": ({"qkv_format": "thd", "micro_batch_size": 2}, 0, "G5"),
    "stale_lengths_after_expansion": ({}, 0, "G2"),
    "offsets_without_layout": ({}, 1, "G4"),
    "alignment_max_not_lcm": ({"compress_ratios": [3]}, 0, "O2"),
}

PIPELINE_TESTS = f"""
import pytest
from conftest import ACTIVE_AT_CONFTEST, step
from layoutcheck import LayoutWarning

FLAGS = {{name: (args, rank) for name, (args, rank, _) in {FLAGS!r}.items()}}


@pytest.mark.parametrize("bug", FLAGS)
def test_off(bug):
    args, rank = FLAGS[bug]
    step(rank, **args)


@pytest.mark.parametrize("bug", FLAGS)
def test_on(bug):
    args, rank = FLAGS[bug]
    step(rank, bugs={{bug}}, **args)


def test_hooks_were_installed_before_the_conftests():
    assert ACTIVE_AT_CONFTEST


def test_swallowed():
    try:
        step(bugs={{"rollout_global_padding"}})
    except Exception:  # the code under test catches broadly: the plugin fails the test anyway
        pass


@pytest.mark.layoutcheck(False)
def test_marker_off():
    step(bugs={{"rollout_global_padding"}})


@pytest.mark.layoutcheck(mode="record")
def test_marker_record():
    step(bugs={{"rollout_global_padding"}})


@pytest.mark.layoutcheck("warn")
def test_marker_warn():
    with pytest.warns(LayoutWarning, match="O3"):
        step(bugs={{"rollout_global_padding"}})


def test_fixture(layout):
    with layout.expect("O3") as found:
        step(cp=1, bugs={{"rollout_global_padding"}})
    assert {{v.field for v in found}} == {{"max_seq_lens"}} and len(found) == 7
    result = step(cp=1)
    assert layout.violations == [] and layout.mode == "raise" and len(layout.session.hooks) == 4
    batch = result.batches[0]
    layout.assert_batch(batch)
    layout.assert_local_length(batch["tokens"], batch["max_seq_lens"][0])


def test_fixture_expect_fails_when_the_invariant_does_not_occur(layout):
    with layout.expect("G1"):
        step()
"""


def test_the_reference_pipeline_passes_with_flags_off_and_fails_exactly_the_tests_whose_flag_is_on(pytester):
    pytester.makepyprojecttoml(MINITRAINER_TABLE.format(extra=""))
    pytester.makeconftest(MINITRAINER_CONFTEST)
    pytester.makepyfile(test_pipeline=PIPELINE_TESTS)
    result, outcomes = junit(pytester, "--layoutcheck")
    failed = {name for name, text in outcomes.items() if text}
    assert failed == {f"test_on[{bug}]" for bug in FLAGS} | {
        "test_swallowed", "test_fixture_expect_fails_when_the_invariant_does_not_occur"}
    for bug, (_, _, invariant) in FLAGS.items():
        assert f"[{invariant}]" in outcomes[f"test_on[{bug}]"], (bug, outcomes[f"test_on[{bug}]"])
    swallowed = outcomes["test_swallowed"]
    assert "layoutcheck found 7 layout violations" in swallowed and "[O3] get_rollout_data, sample" in swallowed
    assert "the code under test went on past them" in swallowed
    assert "layout.expect('G1'): expected G1 did not occur; got no layout violations" in \
        outcomes["test_fixture_expect_fails_when_the_invariant_does_not_occur"]
    result.stdout.fnmatch_lines([
        "*layoutcheck: runtime checks on (--layoutcheck), mode raise (the default), 4 hooks from *pyproject.toml",
        "*- layoutcheck -*",
        "runtime checks: 4 hooks from *pyproject.toml; checked * rollouts, * replay tensors, * micro-batches, * offset calls",
        "* layout violations in 10 tests:",
        "  FAILED   test_pipeline.py::test_on?alignment_max_not_lcm?: O2 x* in get_rollout_data",
    ])
    lines = result.stdout.lines
    assert any(line.startswith("  recorded test_pipeline.py::test_marker_record: O3 x7") for line in lines)
    assert any(line.startswith("  recorded test_pipeline.py::test_marker_warn: O3 x7") for line in lines)
    assert not any("test_marker_off" in line for line in lines)  # off: not listed
    assert any(line.startswith("padding: ") for line in lines)


def test_static_buckets_come_from_the_config_and_the_wrong_bucket_fails_only_its_test(pytester):
    pytester.makepyprojecttoml(MINITRAINER_TABLE.format(extra="buckets = [512, 1024, 2048]"))
    pytester.makeconftest(MINITRAINER_CONFTEST)
    pytester.makepyfile(test_buckets="""
        from conftest import step

        def test_off():
            step(buckets=(512, 1024, 2048), micro_batch_size=2)

        def test_on():
            step(buckets=(512, 1024, 2048), micro_batch_size=2, bugs={"wrong_bucket"})
    """)
    _, outcomes = junit(pytester, "--layoutcheck")
    assert outcomes["test_off"] == ""
    assert "[G6] get_batch, micro-batch" in outcomes["test_on"]
    assert "P is a bucket but not the smallest that fits" in outcomes["test_on"]


# ---------------------------------------------------------------- switching on: options, ini, environment


def header(result: pytest.RunResult) -> str:
    lines = [line for line in result.stdout.lines if line.startswith("layoutcheck: runtime checks")]
    return lines[0] if lines else "off"


def test_off_by_default_and_on_with_the_option_failing_only_the_test_with_a_violation(tiny):
    result, outcomes = junit(tiny, subprocess=False)
    assert header(result) == "off" and outcomes == {"test_clean": "", "test_bug": ""}
    assert "- layoutcheck -" not in result.stdout.str()
    result, outcomes = junit(tiny, "--layoutcheck", subprocess=False)
    assert header(result).startswith("layoutcheck: runtime checks on (--layoutcheck), mode raise (the default)")
    assert outcomes["test_clean"] == "" and "[O3] get_rollout_data, sample 0" in outcomes["test_bug"]


def failure_section(result: pytest.RunResult, test: str) -> list[str]:
    """The lines of one test's failure, from its ``___ test ___`` header to the next section."""
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if line.startswith("_") and f" {test} " in line) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith(("_", "-", "=")))
    return lines[start:end]


def test_a_violation_fails_the_test_with_the_violation_first_and_layoutcheck_s_frames_hidden(tiny):
    result = tiny.runpytest_inprocess("--layoutcheck", *QUIET)
    result.assert_outcomes(passed=1, failed=1)
    section = failure_section(result, "test_bug")
    assert section[:2] == [
        "layoutcheck found 1 layout violation",
        "[O3] get_rollout_data, sample 0, field `max_seq_lens`: padded length is 3.4x the true length (every entry "
        "is round_up(max T, A) = 1024: rollout-global padding)",
    ]
    # Then where: the test's own frames down to the hooked call, and nothing of layoutcheck's (nor pytest's).
    where = section[section.index("where (layoutcheck's own frames hidden; --fulltrace shows them):") + 1:]
    assert where == ["  test_tiny.py:8: in test_bug", "    step(bug=True)",
                     "  tinytrainer.py:15: in step", "    return get_rollout_data(args, [300, 1000])"]
    assert len(section) <= 16 and "layoutcheck/runtime" not in result.stdout.str()
    result.stdout.fnmatch_lines(["FAILED test_tiny.py::test_bug - *layoutcheck found 1 layout violation"])
    # --fulltrace: every frame, layoutcheck's included, and the LayoutError as pytest shows any exception.
    full = tiny.runpytest_inprocess("--layoutcheck", "--fulltrace", *QUIET)
    assert "layoutcheck/runtime/" in full.stdout.str()
    full.stdout.fnmatch_lines(["E * layoutcheck.errors.LayoutError: 1 layout violation"])


def test_a_field_the_configuration_names_that_a_call_cannot_give_fails_that_test_in_raise_mode(pytester):
    # A contract field a call's data cannot give is a configuration problem: the test's calls were not checked as
    # configured, so raise mode fails the test that met it (it used to pass, the problem said nowhere).
    pytester.makepyprojecttoml("""
        [tool.layoutcheck.runtime.boundaries."packer:pack"]
        args.batch = "T"
        args.lengths = "len P"
        returns = { space = "P packed", from = "args.batch", pad-value = 0, axis = 0 }
    """)
    pytester.makepyfile(packer="""
        import torch

        def pack(batch, lengths):  # takes the samples, or a record holding them under "ids"
            samples = batch["ids"] if isinstance(batch, dict) else batch
            return torch.tensor([t for s, p in zip(samples, lengths) for t in [*s, *[0] * (p - len(s))]])
    """, test_pack="""
        import packer

        def test_a_record_where_samples_belong():
            packer.pack({"ids": [[1, 2, 3]]}, [4])

        def test_lists_of_ints():
            packer.pack([[1, 2, 3]], [4])
    """)
    pytester.syspathinsert()
    key = 'tool.layoutcheck.runtime.boundaries."packer:pack".args.batch'
    _, outcomes = junit(pytester, "--layoutcheck")
    assert outcomes["test_lists_of_ints"] == ""
    failure = outcomes["test_a_record_where_samples_belong"]
    assert "layoutcheck could not check during this test as configured: 1 configuration problem:" in failure
    assert f"{key} in {pytester.path / 'pyproject.toml'}: packer:pack: `args.batch` should hold per-sample data" \
        in failure and "but the call passed a dict" in failure and "such as `args.batch.ids`" in failure, failure
    result, outcomes = junit(pytester, "--layoutcheck", "--layoutcheck-mode", "warn")
    assert set(outcomes.values()) == {""}
    assert "LayoutWarning: layoutcheck could not check during this test as configured" in result.stdout.str()
    result, outcomes = junit(pytester, "--layoutcheck", "--layoutcheck-mode", "record")
    assert set(outcomes.values()) == {""}
    result.stdout.fnmatch_lines(["1 configuration problem (fields left out of the checks):", f"  {key} in *"])


def test_an_expected_layout_error_is_left_to_pytest(tiny):
    # xfail(raises=LayoutError) and pytest.raises see the LayoutError itself: only a failure's text changes.
    tiny.makepyfile(test_expected="""
        import pytest
        from layoutcheck import LayoutError
        from tinytrainer import step

        @pytest.mark.xfail(raises=LayoutError, strict=True)
        def test_known_bug():
            step(bug=True)
    """)
    result = tiny.runpytest_inprocess("--layoutcheck", "test_expected.py", *QUIET)
    result.assert_outcomes(xfailed=1)


def test_ini_keys_switch_on_set_the_mode_and_name_the_config_file(tiny):
    (tiny.path / "cfg").mkdir()
    (tiny.path / "cfg" / "layoutcheck.toml").write_text(TINY_TABLE.replace("tool.layoutcheck.", ""))
    (tiny.path / "pyproject.toml").unlink()
    tiny.makeini("[pytest]\nlayoutcheck = true\nlayoutcheck_mode = record\nlayoutcheck_config = cfg/layoutcheck.toml\n")
    result, outcomes = junit(tiny, subprocess=False)
    assert header(result) == (f"layoutcheck: runtime checks on (ini key `layoutcheck` in {tiny.path / 'tox.ini'}), "
                              f"mode record (ini key `layoutcheck_mode` in {tiny.path / 'tox.ini'}), "
                              f"1 hook from {tiny.path / 'cfg' / 'layoutcheck.toml'}")
    assert outcomes == {"test_clean": "", "test_bug": ""}  # record mode: listed, not failed
    assert "  recorded test_tiny.py::test_bug: O3 x1 in get_rollout_data" in result.stdout.lines


@pytest.mark.parametrize(
    ("env", "ini", "args", "expected"),
    [
        ({"LAYOUTCHECK": "warn"}, "", (), "on (LAYOUTCHECK='warn' (environment)), mode warn (LAYOUTCHECK (environment))"),
        ({"LAYOUTCHECK": "1"}, "layoutcheck_mode = record", (),
         "on (LAYOUTCHECK='1' (environment)), mode record (ini key `layoutcheck_mode` in *)"),
        ({"LAYOUTCHECK": "record"}, "layoutcheck_mode = warn", ("--layoutcheck-mode=raise",),
         "on (--layoutcheck-mode), mode raise (--layoutcheck-mode)"),
        ({"LAYOUTCHECK": "0"}, "layoutcheck = true", (), "off"),
        ({}, "layoutcheck = true", ("--no-layoutcheck",), "off"),
    ],
)
def test_precedence_is_command_line_then_environment_then_ini(tiny, monkeypatch, env, ini, args, expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    tiny.makeini(f"[pytest]\n{ini}\n")
    result = tiny.runpytest_inprocess(*args, *QUIET)
    line = header(result)
    if expected == "off":
        assert line == "off"
    else:
        assert fnmatch.fnmatch(line, f"layoutcheck: runtime checks {expected}, 1 hook from *"), line


@pytest.mark.parametrize(
    ("env", "ini", "args", "message"),
    [
        ({}, "layoutcheck_mode = rase", ("--layoutcheck",),
         "layoutcheck: ini key `layoutcheck_mode` in *tox.ini: unknown mode 'rase': expected one of raise, warn, record"),
        ({}, "", ("--layoutcheck-mode=loud",),
         "layoutcheck: --layoutcheck-mode: unknown mode 'loud': expected one of raise, warn, record"),
        ({"LAYOUTCHECK": "rase"}, "", (),
         "layoutcheck: LAYOUTCHECK='rase' (environment variable): did you mean `raise`? expected one of raise, warn, record*"),
        ({}, "layoutcheck = maybe", (), "layoutcheck: ini key `layoutcheck` in *tox.ini: invalid truth value 'maybe'"),
        ({}, "", ("--layoutcheck-config=nope.toml",),
         "layoutcheck: --layoutcheck-config: configuration file */nope.toml does not exist"),
    ],
)
def test_a_bad_value_is_a_usage_error_that_says_where_it_came_from(tiny, monkeypatch, env, ini, args, message):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    tiny.makeini(f"[pytest]\n{ini}\n")
    result = tiny.runpytest_inprocess(*args, *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


def test_a_project_without_hooks_gets_the_configuration_error_and_a_bad_marker_fails_its_test(pytester):
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest_inprocess("--layoutcheck", *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: layoutcheck: layoutcheck is switched on, but no hooks are configured*"])


def test_the_marker_switches_a_run_that_is_off_on_for_one_test_and_checks_its_arguments(tiny):
    tiny.makepyfile(test_marked="""
        import pytest
        from tinytrainer import step

        @pytest.mark.layoutcheck
        def test_marked_bug():
            step(bug=True)

        def test_unmarked_bug():
            step(bug=True)

        @pytest.mark.layoutcheck(mode="loud")
        def test_bad_marker():
            pass

        def test_fixture_switches_it_on_too(layout):
            with layout.expect("O3") as found:
                step(bug=True)
            assert [v.sample for v in found] == [0] and layout.mode == "raise"
    """)
    _, outcomes = junit(tiny, "test_marked.py", subprocess=False)
    assert "[O3]" in outcomes["test_marked_bug"] and outcomes["test_unmarked_bug"] == ""
    assert outcomes["test_fixture_switches_it_on_too"] == ""
    assert "@pytest.mark.layoutcheck(mode='loud') on test_marked.py::test_bad_marker: unknown mode 'loud'" \
        in outcomes["test_bad_marker"]


def test_the_environment_variable_reuses_the_session_activated_at_interpreter_start(tiny, monkeypatch):
    monkeypatch.setenv("LAYOUTCHECK", "warn")
    tiny.makeconftest("""
        from layoutcheck.runtime.activation.session import active_session
        AT_CONFTEST = active_session()

        def pytest_sessionfinish(session):
            assert active_session() is AT_CONFTEST  # the plugin kept the start-up session (or ended it first)
    """)
    result, outcomes = junit(tiny, "-W", "error::layoutcheck.LayoutWarning")
    assert header(result).startswith("layoutcheck: runtime checks on (LAYOUTCHECK='warn' (environment)), mode warn")
    assert outcomes["test_clean"] == "" and "LayoutWarning" in outcomes["test_bug"]
    # --no-layoutcheck ends the session the start-up file began, before any conftest: nothing is checked
    result, outcomes = junit(tiny, "-W", "error::layoutcheck.LayoutWarning", "--no-layoutcheck")
    assert header(result) == "off" and outcomes == {"test_clean": "", "test_bug": ""}


# ---------------------------------------------------------------- pytest-xdist


def test_with_xdist_each_worker_checks_and_the_controller_merges_the_summary(tiny):
    tiny.makepyfile(test_more="""
        from tinytrainer import step

        def test_bug_again():
            step(bug=True)

        def test_clean_again():
            step()
    """)
    result, outcomes = junit(tiny, "-n", "2", "--layoutcheck")
    assert sorted(name for name, text in outcomes.items() if text) == ["test_bug", "test_bug_again"]
    result.stdout.fnmatch_lines(["*- layoutcheck -*",
                                 "runtime checks (2 xdist workers): 1 hook from *pyproject.toml; checked 4 rollouts",
                                 "2 layout violations in 2 tests:"])
    lines = result.stdout.lines
    assert "  FAILED   test_more.py::test_bug_again: O3 x1 in get_rollout_data" in lines
    assert "  FAILED   test_tiny.py::test_bug: O3 x1 in get_rollout_data" in lines


def test_worker_figures_merge_by_summing_totals_and_shapes():
    def part(true, padded, shapes):
        return {"mode": "raise", "config_file": "p.toml", "hooks": ["producer: m:f"], "notes": 1,
                "totals": {"rollouts": 1, "true_tokens": true, "padded_tokens": padded, "batch_true_tokens": true,
                           "batch_positions": padded, "micro_batches": len(shapes)},
                "shapes": [[s, 1] for s in shapes]}

    merged = merge_figures([part(1000, 1536, [[1, 768]]), part(500, 1024, [[1, 768], [2, 512]])])
    assert merged["totals"]["true_tokens"] == 1500 and merged["totals"]["padded_tokens"] == 2560
    assert merged["shapes"] == [[[1, 768], 2], [[2, 512], 1]] and merged["notes"] == 2
    lines = summary_lines(merged, {}, set())
    assert lines[-2:] == [
        "padding: max_seq_lens 1,500 true tokens padded to 2,560 (1.71x); micro-batches 1,500 tokens in "
        "2,560 positions (1.71x); 2 distinct token shapes",
        "2 check(s) could not run (see the run report's notes)",
    ]


# ---------------------------------------------------------------- lint items


def test_lint_findings_become_one_failing_item_per_file_with_findings(pytester):
    pytester.makepyfile(
        producer="""
            def get_rollout_data(tokens):
                max_seq_lens = [max(t.numel() for t in tokens)] * len(tokens)
                return max_seq_lens
        """,
        clean="def add(a, b):\n    return a + b\n",
        test_ok="def test_ok():\n    pass\n",
    )
    pytester.makefile(".toml", layoutcheck="preview = true\n")  # global-max-padding is a preview rule
    result, outcomes = junit(pytester, "--layoutcheck-lint", "-q", subprocess=False)
    assert sorted(outcomes) == ["layoutcheck-lint", "test_ok"]  # only producer.py has findings
    assert "producer.py:2:" in outcomes["layoutcheck-lint"] and "global-max-padding" in outcomes["layoutcheck-lint"]
    result.stdout.fnmatch_lines(["lint: 1 file with findings (* finding*)"])
    result = pytester.runpytest_inprocess("--layoutcheck-lint", "--co", "-q", "-k", "lint", *QUIET)
    result.stdout.fnmatch_lines(["producer.py::layoutcheck-lint", "*1/2 tests collected (1 deselected)*"])


def test_under_xdist_the_lint_summary_counts_what_the_workers_ran(pytester):
    # The controller collects nothing under pytest-xdist: its summary must come from the items' reports.
    producer = """
        def get_rollout_data(tokens):
            max_seq_lens = [max(len(t) for t in tokens)] * len(tokens)
            return max_seq_lens
    """
    pytester.makepyfile(producer=producer, other_producer=producer, test_ok="def test_ok():\n    pass\n")
    pytester.makepyprojecttoml("[tool.layoutcheck]\npreview = true\n")  # global-max-padding is a preview rule
    result = pytester.runpytest_subprocess("--layoutcheck-lint", "-n", "2", *QUIET)
    result.assert_outcomes(passed=1, failed=2)
    findings = len([line for line in result.stdout.lines if "[global-max-padding]" in line and line[:1] != "F"])
    assert findings == 2  # one line per finding in the failures (not counting the short summary's)
    result.stdout.fnmatch_lines(["lint: 2 files with findings (2 findings)"])
    # A run-level error (here a bad table) is its own failing item, and the summary says so.
    pytester.makepyprojecttoml("[tool.layoutcheck]\nlint-test = true\n")
    result, outcomes = junit(pytester, "--layoutcheck-lint", "-n", "2")
    assert [name for name, text in outcomes.items() if text] == ["error-0"] and "lint-test" in outcomes["error-0"]
    result.stdout.fnmatch_lines(["lint: 0 files with findings (0 findings); 1 error (see the failures)"])


def test_a_wrong_value_fails_the_test_whose_call_made_it_though_value_checks_default_to_the_worker(pytester):
    # A debug run compares B6 of CPU tensors on a worker thread and reports it later (`value-checks`); under the
    # plugin each test's findings belong to that test: a wrong value made by a test's last call fails that test,
    # and `layout.expect("B6")` sees it, with the configuration's default.
    pytester.makepyprojecttoml("""
        [tool.layoutcheck.runtime.boundaries."packer:pack"]
        args.seqs = "T"
        args.lengths = "len P"
        returns = { space = "P packed", from = "args.seqs", pad-value = 0 }
    """)
    pytester.makepyfile(packer="""
        import torch

        def pack(seqs, lengths, bug=False):
            parts = [torch.cat([s, s.new_zeros(n - s.shape[0])]) for s, n in zip(seqs, lengths)]
            if bug:
                parts[-1][0] += 100
            return torch.cat(parts)
    """, test_pack="""
        import torch
        import packer

        SEQS = [torch.arange(1, 6), torch.arange(1, 10)]

        def test_wrong_value_last():
            packer.pack(SEQS, [8, 12], bug=True)

        def test_clean_after():
            packer.pack(SEQS, [8, 12])

        def test_expected(layout):
            with layout.expect("B6"):
                packer.pack(SEQS, [8, 12], bug=True)
    """)
    pytester.syspathinsert()
    _, outcomes = junit(pytester, "--layoutcheck", "-p", "no:randomly")
    assert "[B6] packer:pack (call 1)" in outcomes["test_wrong_value_last"], outcomes
    assert outcomes["test_clean_after"] == "" and outcomes["test_expected"] == "", outcomes
