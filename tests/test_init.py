"""``layoutcheck init``: the debug mode's table from the project model, equivalent to the presets on real trees.

On the reference pipeline (Miles's shapes) it proposes what
``fixtures/debug-run.toml`` says, found from the model alone (owners, CP
helpers, the call graph); the loss function, a tracer role, is the one part
the model does not find. It never overwrites a table without ``--force``.
On verl's and Miles's real trees: ``tests/trainers/test_presets.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from layoutcheck.configfile import load_config
from layoutcheck.runtime.hooks.settings import RuntimeSettings

ROOT = Path(__file__).resolve().parent.parent
NOT_INFERRED = {"loss-function"}
"""Roles the model cannot find (a consumer of the batch, run inside the tracer)."""


def init(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "layoutcheck", "init", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def runtime(path: Path) -> RuntimeSettings:
    return load_config(path).config.runtime.settings()


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=list)


def equivalent(proposed: RuntimeSettings, expected: RuntimeSettings) -> None:
    """The same hooks (but the roles the model does not find), boundaries, coordinates and parallel state."""
    hooks = {str(h) for h in expected.hook_specs() if h.role not in NOT_INFERRED}
    assert {str(h) for h in proposed.hook_specs()} == hooks
    assert _json(proposed.boundary_tables()) == _json(expected.boundary_tables())
    assert proposed.coordinate_sources() == expected.coordinate_sources()
    assert proposed.parallel_state_target == expected.parallel_state_target


@pytest.fixture
def minitrainer(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "fixtures" / "minitrainer", project / "minitrainer",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return project


def test_on_the_reference_pipeline_it_proposes_the_debug_run_table(minitrainer):
    proc = init(".", cwd=minitrainer)
    assert proc.returncode == 0, proc.stderr
    written = minitrainer / "layoutcheck.toml"
    text = written.read_text()
    assert "# minitrainer.replay_data:fill_replay_data: reads the per-sample padded lengths" in text
    assert "parallel-state" in text and "every CP helper" in text
    equivalent(runtime(written), runtime(ROOT / "fixtures" / "debug-run.toml"))
    config = load_config(written).config
    assert config.owners["bshd"] == ("minitrainer.data:get_rollout_data",)
    assert config.owners["thd"] == ("minitrainer.data:get_batch",)


def test_an_existing_table_is_kept_unless_forced(minitrainer):
    pyproject = minitrainer / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n\n[tool.layoutcheck.runtime]\nmode = "warn"\n\n[tool.other]\nk = 1\n')
    proc = init(".", cwd=minitrainer)
    assert proc.returncode == 2 and "already has a runtime table" in proc.stderr and "--force" in proc.stderr
    assert 'mode = "warn"' in pyproject.read_text()
    diff = init(".", "--diff", cwd=minitrainer)
    assert diff.returncode == 0 and diff.stdout.startswith("--- pyproject.toml\n+++ pyproject.toml"), diff.stderr
    assert '-mode = "warn"' in diff.stdout and "+[tool.layoutcheck.runtime.hooks]" in diff.stdout
    assert pyproject.read_text().count("[tool.layoutcheck.runtime]") == 1  # --diff writes nothing
    proc = init(".", "--force", cwd=minitrainer)
    assert proc.returncode == 0, proc.stderr
    text = pyproject.read_text()
    assert '[project]\nname = "x"' in text and "[tool.other]\nk = 1" in text and 'mode = "warn"' not in text
    equivalent(runtime(pyproject), runtime(ROOT / "fixtures" / "debug-run.toml"))
    printed = init(".", "--stdout", cwd=minitrainer)
    assert printed.stdout.startswith("# Written by `layoutcheck init`") and "[tool.layoutcheck.runtime.hooks]" in printed.stdout


def test_inline_tables_in_the_main_table_are_left_to_the_user(minitrainer):
    config = minitrainer / "layoutcheck.toml"
    config.write_text('owners = { bshd = ["a:b"] }\n')
    proc = init(".", "--force", cwd=minitrainer)
    assert proc.returncode == 2 and "owners = { bshd" in proc.stderr and "by hand" in proc.stderr


# --- what init writes must install: real small projects, checked by importing them ------------------

_WORKER = '''"""A worker module in a folder without __init__.py (an implicit namespace package)."""


class Worker:
    def forward(self, args, rollout_data):
        unit = args.tp_size * args.data_pad_size_multiplier
        rollout_data["max_seq_lens"] = [-(-t // unit) * unit for t in rollout_data["total_lengths"]]
        return rollout_data


def pad_lengths(rollout_data, unit):
    unit = unit * 2
    rollout_data["max_seq_lens"] = [-(-t // unit) * unit for t in rollout_data["total_lengths"]]
    return rollout_data
'''
"""``Worker.forward`` is a producer that fits the role (it takes ``args``); ``pad_lengths`` is an owner whose
signature has no ``args``: hooked as the producer, ``LAYOUTCHECK=raise`` would fail at import."""


def write_project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def flat(text: str) -> str:
    """The written text with each wrapped comment on one line."""
    return text.replace("\n#   ", " ")


def hooked_roles(project: Path, module: str, names: list[str]) -> subprocess.CompletedProcess[str]:
    """Import ``module`` under ``LAYOUTCHECK=raise`` with the written configuration; print each name's role."""
    code = (f"import importlib; m = importlib.import_module({module!r}); "
            f"print([getattr(eval('m.' + n), '__layoutcheck_role__', None) for n in {names!r}])")
    env = {**os.environ, "LAYOUTCHECK": "raise", "LAYOUTCHECK_CONFIG": str(project / "layoutcheck.toml")}
    return subprocess.run([sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True,
                          timeout=300)


def test_a_path_that_does_not_exist_is_an_error_not_a_lint_of_its_parent(tmp_path):
    missing = tmp_path / "nope"
    proc = init(str(missing), "--stdout", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip() == f"layoutcheck: error: {missing}: no such file or directory"
    assert proc.stdout == ""
    a_file = write_project(tmp_path, {"mod.py": "x = 1\n"}) / "mod.py"
    proc = init(str(a_file), "--stdout", cwd=tmp_path)
    assert proc.returncode == 2 and f"{a_file}: not a folder" in proc.stderr


def test_a_namespace_package_is_hooked_by_the_path_it_imports_as_and_installs(tmp_path):
    project = write_project(tmp_path, {"trainer/workers/megatron_worker.py": _WORKER})  # no __init__.py anywhere
    proc = init(".", cwd=project)
    assert proc.returncode == 0, proc.stderr
    written = load_config(project / "layoutcheck.toml").config
    target = "trainer.workers.megatron_worker:Worker.forward"
    assert [(h.role, h.target) for h in written.runtime.settings().hook_specs()] == [("producer", target)]
    assert written.owners["bshd"] == ("megatron_worker:Worker.forward", "megatron_worker:pad_lengths")  # the linter's
    ran = hooked_roles(project, "trainer.workers.megatron_worker", ["Worker.forward", "pad_lengths"])
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "['producer', None]"
    assert "1 of 1 hook installed" in ran.stderr


def test_a_role_whose_signature_does_not_fit_is_written_commented_out_with_why(tmp_path):
    project = write_project(tmp_path, {"trainer/workers/megatron_worker.py": _WORKER})
    text = flat(init(".", "--stdout", cwd=project).stdout)
    commented = '# producer = ["trainer.workers.megatron_worker:pad_lengths"]'
    assert commented in text
    why = text[text.index("# trainer.workers.megatron_worker:pad_lengths:"):text.index(commented)]
    assert "it has no parameter `args`" in why and "found (rollout_data, unit)" in why
    assert 'role = "producer"' in why and "docs/boundaries.md#roles-and-presets" in why
    assert '\nproducer = ["trainer.workers.megatron_worker:Worker.forward"]\n' in text


def test_a_target_that_does_not_exist_at_import_is_not_written(tmp_path):
    gone = _WORKER.replace("class Worker:", "class Worker:  # replaced at import below") + "\n\nWorker = None\n"
    project = write_project(tmp_path, {"trainer/__init__.py": "", "trainer/worker.py": gone})
    text = flat(init(".", "--stdout", cwd=project).stdout)
    assert '# producer = ["trainer.worker:Worker.forward"]' in text
    assert "`trainer.worker` has no attribute `Worker`" in text
    assert "\nproducer = " not in text


def test_a_project_this_environment_cannot_import_is_judged_from_its_source_and_says_so(tmp_path):
    needs = "import a_dependency_this_environment_lacks\n\n" + _WORKER
    project = write_project(tmp_path, {"trainer/worker.py": needs})
    proc = init(".", cwd=project)
    assert proc.returncode == 0, proc.stderr
    text = flat((project / "layoutcheck.toml").read_text())
    assert "This Python environment could not import some of the functions below" in text
    assert "Run `layoutcheck init` where the trainer runs" in text
    # The one that fits, by the signature its source defines, is written, saying it was not imported...
    fits = text.index('\nproducer = ["trainer.worker:Worker.forward"]\n')
    assert "not imported here, judged from the source" in text[:fits]
    assert "needs `a_dependency_this_environment_lacks`, which this Python environment does not have" in text[:fits]
    # ...and the one whose signature does not fit the role stays out, as when imported.
    assert '# producer = ["trainer.worker:pad_lengths"]' in text and "it has no parameter `args`" in text
    hooks = load_config(project / "layoutcheck.toml").config.runtime.settings().hook_specs()
    assert [(h.role, h.target) for h in hooks] == [("producer", "trainer.worker:Worker.forward")]


def test_the_check_is_bounded_in_time_and_keeps_what_it_judged(tmp_path):
    from layoutcheck.init.proposal import Proposal
    from layoutcheck.init.verify import verify

    write_project(tmp_path, {"fast.py": "def f(args):\n    return args\n",
                             "slow.py": "import time\ntime.sleep(60)\n\ndef g(args):\n    return args\n"})
    proposal = Proposal(hooks={"producer": [("fast:f", "why"), ("slow:g", "why")]})
    verify(proposal, [str(tmp_path)], cwd=str(tmp_path), timeout=5)
    assert proposal.verdicts[("producer", "fast:f")].status == "ok"
    slow = proposal.verdicts[("producer", "slow:g")]
    assert slow.status == "unchecked" and "longer than 5 s" in slow.why


def _slug(heading: str) -> str:
    # mkdocs' (Python-Markdown toc) anchors: lower case, punctuation dropped, spaces as hyphens
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"[\s]+", "-", text).strip("-")


def test_every_doc_reference_init_writes_resolves_to_a_page_and_a_heading(tmp_path):
    from layoutcheck.init.findings import Finding
    from layoutcheck.init.proposal import DOCS, Proposal, Verdict, render

    skeleton = Finding("m:pack", "packer", "builds a stream", "m.py:1", ("xs",), "m:pack")
    proposal = Proposal(hooks={"producer": [("m:a", "w")], "cp-slicer": [("m:b", "w")]}, skeletons=[skeleton])
    proposal.verdicts.update({("producer", "m:a"): Verdict("refused", "it has no parameter `args`"),
                              ("cp-slicer", "m:b"): Verdict("refused", "no qkv_format")})
    text = render(proposal) + init(".", "--stdout", cwd=write_project(
        tmp_path, {"trainer/workers/megatron_worker.py": _WORKER})).stdout
    cited = set(re.findall(r"(docs/[\w/.-]+\.md)(?:#([\w-]+))?", text))
    assert {f"{page}#{anchor}" for page, anchor in cited} >= set(DOCS.values())
    for page, anchor in cited:
        assert (ROOT / page).is_file(), page
        headings = {_slug(h.strip("#").replace("`", "")) for h in (ROOT / page).read_text().splitlines()
                    if h.startswith("#")}
        assert not anchor or anchor in headings, (page, anchor, sorted(headings))
    assert "README" not in text


def test_a_file_no_dotted_path_imports_is_never_written_as_a_hook(tmp_path):
    project = write_project(tmp_path, {"my-scripts/worker.py": _WORKER})  # `my-scripts` is no Python name
    text = flat(init(".", "--stdout", cwd=project).stdout)
    assert "no dotted path imports my-scripts/worker.py from the project's folder" in text
    assert '# producer = ["worker:Worker.forward"]' in text and "\nproducer = " not in text


# --- what a tree with nothing to propose, or only part of a preset, gets ------------------------------------

_BALANCER = '''
def rearrange_micro_batches(batch, max_token_len, dp_group=None):
    """verl's balancer, as an FSDP-only fork of verl (EasyR1) defines it: no Megatron anywhere."""
    n = batch["attention_mask"].shape[0]
    return [batch], [list(range(n))]
'''


def test_a_preset_contract_that_reads_no_coordinate_brings_none(tmp_path):
    # The verl preset's balancer contract reads no tp, cp or CP rank: proposing the preset's Megatron coordinate
    # functions beside it made a tree without Megatron stop (or skip every check) at its first hooked call.
    project = write_project(tmp_path, {"verl/__init__.py": "", "verl/utils/__init__.py": "",
                                       "verl/utils/seqlen_balancing.py": _BALANCER})
    proc = init(".", "--stdout", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert '[runtime.boundaries."verl.utils.seqlen_balancing:rearrange_micro_batches"]' in proc.stdout
    assert "megatron" not in proc.stdout and "tp-size" not in proc.stdout, proc.stdout


def test_a_tree_with_nothing_to_propose_gets_no_empty_table(tmp_path):
    # An empty [runtime] table was written (exit 0, "wrote the proposed tables"), and the run it set up then
    # said "no hooks are configured". Nothing is written, and the message says what to do instead.
    project = write_project(tmp_path, {"pkg/__init__.py": "", "pkg/util.py": "def add(a, b):\n    return a + b\n"})
    (project / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    for args in ([], ["--stdout"], ["--diff"]):
        proc = init(".", *args, cwd=project)
        assert proc.returncode == 1, proc.stderr
        assert proc.stdout == ""
        assert "found nothing to propose" in proc.stderr and "docs/boundaries.md" in proc.stderr, proc.stderr
    assert (project / "pyproject.toml").read_text() == '[project]\nname = "pkg"\n'
    assert not (project / "layoutcheck.toml").exists()


_PACKER_METHOD = '''
import torch
import torch.nn.functional as F


class Packer:
    DECORATOR
    def pack_stream(FIRST, tokens, args):
        unit = args.tp_size * args.data_pad_size_multiplier
        stream = torch.cat(tokens)
        pad = (unit - stream.size(0) % unit) % unit
        bounds = [0]
        for t in tokens:
            bounds.append(bounds[-1] + t.size(0))
        bounds.append(bounds[-1] + pad)
        return F.pad(stream, (0, pad)), bounds

    def to_batch(me, batch, args):
        stream, bounds = me.pack_stream(batch["tokens"], args)
        out = {}
        out["tokens"] = stream
        out["cu_seqlens"] = torch.tensor(bounds, dtype=torch.int32)
        return out
'''


@pytest.mark.parametrize(("decorator", "first", "listed"), [
    ("", "this", ["tokens", "args"]),  # the receiver, whatever it is called, is no argument to describe
    ("@staticmethod", "self", ["self", "tokens", "args"]),  # no receiver: `self` is a parameter like any other
])
def test_a_packer_skeleton_lists_its_parameters_past_the_receiver_by_place(decorator, first, listed):
    from layoutcheck.init.findings import find
    from layoutcheck.init.proposal import propose, render
    from layoutcheck.lint.engine import ProjectFile, analyse_project, module_name_of
    from layoutcheck.lint.registry import all_rules
    from layoutcheck.lint.settings import LintSettings

    name = "trainer/data.py"
    text = _PACKER_METHOD.replace("DECORATOR", decorator).replace("FIRST", first)
    entry = ProjectFile(name, name, module_name_of(name), text, checked=True, rules=tuple(all_rules()),
                        is_package=False)
    _, project = analyse_project([entry], LintSettings(), all_rules=list(all_rules()))
    findings = find(project)
    assert [(f.target, f.kind) for f in findings] == [("trainer.data:Packer.pack_stream", "packer")]
    written = re.findall(r"^# args\.(\w+) = ", render(propose(findings, {})), re.MULTILINE)
    assert written == listed
