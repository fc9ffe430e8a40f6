"""The presets on the trainers' real code: a real bug caught in raise mode through configuration alone, clean without.

verl (in CI): 0.7.0 and 0.9.1 from PyPI (`trainers.verl_harness`), the
ranks of one real CP group (cp = 2, tp = 2), `trainers.verl_preset_job`
driving verl's micro-batching, packing and unpacking as its Megatron actor
does. The configuration is one line, ``preset = "verl"``; the job never
mentions layoutcheck. 0.7.0 cuts a sample's true tokens at offsets computed
from its padded length (docs/design.md#layout-spaces-and-bug-classes, class 3): a sample of 3
tokens (padded to 8, chunks of 2) leaves one token for cp rank 1's first
chunk, which verl broadcasts over the chunk, so a pad position holds a
token, with no error; unpacking hides it. 0.9.1 clamps the chunk.

``layoutcheck init`` on verl's installed modules, and on Miles's tree at the
pinned commit (when ``LAYOUTCHECK_MILES_CHECKOUT`` names it), proposes what
the presets say.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from layoutcheck.configfile import load_config
from layoutcheck.runtime.hooks.settings import RuntimeSettings
from trainers.verl_harness import run_verl

JOB = {"lengths": [3, 21, 11, 29, 5, 17], "width": 32, "max_token_len": 48}
"""Six samples, two micro-batches; the one of 3 tokens is the short sample verl 0.7.0 cuts wrong on cp rank 1."""


def preset_config(tmp_path: Path, name: str) -> Path:
    config = tmp_path / "layoutcheck.toml"
    config.write_text(f'[runtime]\npreset = "{name}"\n')
    return config


@pytest.fixture(scope="module", params=["0.7.0", "0.9.1"])
def verl(request, verl_folder, shared_run, tmp_path_factory):
    """``(version, runs without the debug mode, runs with LAYOUTCHECK=raise and preset = "verl")``."""
    version = request.param
    folder = verl_folder(version)
    out = tmp_path_factory.mktemp(f"verl-preset-{version}")
    config = preset_config(out, "verl")

    def job(env: dict[str, str], name: str) -> list:
        runs = run_verl(folder, "trainers.verl_preset_job", out=out / name, cp=2, tp=2, parameters=JOB, env=env)
        for run in runs:
            assert run.returncode == 0, f"rank {run.rank} of verl {version} ({name}) failed:\n{run.stderr[-4000:]}"
        return runs

    plain = shared_run(f"verl-preset-plain-{version}", lambda: job({"LAYOUTCHECK": "0"}, "plain"))
    checked = shared_run(f"verl-preset-raise-{version}", lambda: job(
        {"LAYOUTCHECK": "raise", "LAYOUTCHECK_CONFIG": str(config)}, "raise"))
    return version, plain, checked


def test_without_the_debug_mode_the_bug_is_silent(verl):
    version, plain, _ = verl
    for run in plain:
        assert run["step"]["type"] is None and run["step"]["roundtrip"], run["step"]
        assert run["session"] is None
    # cp rank 1 starts with the short sample's first chunk, positions 2 and 3: its third token, then a pad
    assert plain[1]["step"]["micro_batches"][0][0] == 0
    first = plain[1]["step"]["streams"][0][:2]
    assert first[0] != 0 and first[1] == (first[0] if version == "0.7.0" else 0)  # 0.7.0: the token broadcast


def test_verl_0_7_0_fails_its_step_on_the_rank_whose_layout_is_wrong_and_0_9_1_is_clean(verl):
    version, plain, checked = verl
    hooks = ["boundary: verl.models.mcore.util:postprocess_packed_seqs",
             "boundary: verl.models.mcore.util:preprocess_packed_seqs",
             "boundary: verl.utils.seqlen_balancing:rearrange_micro_batches"]
    for run in checked:
        assert run["session"]["hooks"] == hooks and run["session"]["notes"] == []
    if version == "0.9.1":
        for run in checked:
            assert run["step"]["type"] is None and run["step"]["roundtrip"], run["step"]
            assert run["session"]["violations"] == 0
            assert run["session"]["checked"]["boundary calls"] == 1 + 2 * 2  # rearrange, then pack and unpack x2
        return
    # 0.7.0: rank 0 packs as without the debug mode (the checks change nothing); rank 1's first pack is wrong
    assert checked[0]["step"]["streams"] == plain[0]["step"]["streams"]
    step = checked[1]["step"]
    assert step["type"] == "LayoutError" and step["invariants"] == ["B6"], step
    head = step["message"].splitlines()[1]
    assert head.startswith("[B6] verl.models.mcore.util:preprocess_packed_seqs (call 1), sample 0, field "
                           "`returns.0` (space P, packed, CP-local (zigzag)): sample 0's part is not its data from "
                           "`args.input_ids`"), head
    assert "should hold a pad" in head
    assert "    seen:     " in step["message"] and "    expected: 0" in step["message"]
    assert "T=3, P=8, cp=2, r=1" in step["message"]
    assert checked[0]["step"]["type"] == "peer failed" and checked[0]["session"]["violations"] == 0


def test_a_rank_that_never_imports_one_of_the_presets_modules_is_not_failed_by_it(verl_folder, tmp_path):
    # Issue 27 point 10: a preset covers every path of a trainer, one process runs some. This rank packs without
    # verl's micro-batching: `seqlen_balancing` is never imported, its hook is "not exercised", raise mode passes.
    config = preset_config(tmp_path, "verl")
    runs = run_verl(verl_folder("0.9.1"), "trainers.verl_preset_job", out=tmp_path / "run", cp=2, tp=2,
                    parameters={**JOB, "balance": False}, env={"LAYOUTCHECK": "raise", "LAYOUTCHECK_CONFIG": str(config)})
    for run in runs:
        assert run.returncode == 0, run.stderr[-4000:]
        assert run["step"]["type"] is None and run["step"]["roundtrip"], run["step"]
        assert run["session"]["hooks"] == ["boundary: verl.models.mcore.util:postprocess_packed_seqs",
                                           "boundary: verl.models.mcore.util:preprocess_packed_seqs"]
        assert ("2 of 3 hooks installed; calls: preprocess_packed_seqs 1, postprocess_packed_seqs 1; 1 not exercised "
                "(the preset's, in modules this process never imported: "
                "`verl.utils.seqlen_balancing:rearrange_micro_batches`)") in run.stderr, run.stderr[-4000:]


def init(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "layoutcheck", "init", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=900)


def equivalent(proposed: RuntimeSettings, expected: RuntimeSettings) -> None:
    """The same hooks (but the loss function, which the model does not find), boundaries, coordinates, state."""
    hooks = {str(h) for h in expected.hook_specs() if h.role != "loss-function"}
    assert {str(h) for h in proposed.hook_specs()} == hooks
    assert json.dumps(proposed.boundary_tables(), sort_keys=True, default=list) == json.dumps(
        expected.boundary_tables(), sort_keys=True, default=list)
    assert proposed.coordinate_sources() == expected.coordinate_sources()
    assert proposed.parallel_state_target == expected.parallel_state_target


def test_init_on_verl_proposes_what_the_verl_preset_says(verl_folder, tmp_path):
    proc = init("verl", "--stdout", cwd=verl_folder("0.9.1"))
    assert proc.returncode == 0, proc.stderr
    assert "# the `verl` preset's contract for this function: its parameters (input_ids, attention_mask" in proc.stdout
    (tmp_path / "layoutcheck.toml").write_text(proc.stdout)
    equivalent(load_config(tmp_path / "layoutcheck.toml").config.runtime.settings(), RuntimeSettings(preset="verl"))


def test_init_on_miles_proposes_what_the_miles_preset_says(miles_checkout, tmp_path):
    tree = miles_checkout("buggy").path
    proc = init(str(tree), "--stdout", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "layoutcheck.toml").write_text(proc.stdout.replace("[tool.layoutcheck.", "["))
    equivalent(load_config(tmp_path / "layoutcheck.toml").config.runtime.settings(), RuntimeSettings(preset="miles"))


# --- Miles and slime: their pinned checkouts (skipped without them) ------------------------------------------

MILES_STEPS = [
    {"name": "bshd", "rollout": {"lengths": [100, 700, 300]}, "args": {"qkv_format": "bshd", "micro_batch_size": 1}},
    {"name": "thd", "rollout": {"lengths": [100, 700, 300]}, "args": {"qkv_format": "thd", "micro_batch_size": 3}},
]
"""Miles's bug (31f1ca961): every BSHD sample padded to the rollout's longest, round_up(700, 128) = 768."""


@pytest.fixture(scope="module", params=["buggy", "fixed"])
def miles(request, miles_checkout, miles_deps, shared_run, tmp_path_factory):
    from trainers.miles_harness import run_miles_step

    checkout = miles_checkout(request.param)
    out = tmp_path_factory.mktemp(f"miles-preset-{request.param}")
    env = {"LAYOUTCHECK": "raise", "LAYOUTCHECK_CONFIG": str(preset_config(out, "miles"))}
    runs = shared_run(f"miles-preset-{checkout.commit[:9]}", lambda: run_miles_step(
        checkout, miles_deps(), out=out / "run", cp=2, steps=MILES_STEPS, env=env))
    return request.param, runs


def test_the_miles_preset_fails_the_rollout_global_padding_and_passes_its_fix(miles):
    which, runs = miles
    for run in runs:
        if which == "fixed":
            assert run.returncode == 0, run.stderr[-3000:]
            assert all("error" not in run[f"{step['name']}/batch:{k}"] for step in MILES_STEPS for k in range(3)
                       if f"{step['name']}/batch:{k}" in run.result)
            assert "no layout violations" in run.stderr and "notes" not in run.stderr.split("layoutcheck [rank")[-1]
            continue
        crash = run["crash"]  # the producer's LayoutError ends the step before any batch is built
        assert crash["type"] == "LayoutError", crash
        assert ("[O3] get_rollout_data, sample 0, field `max_seq_lens`: padded length is 7.7x the true length "
                "(every entry is round_up(max T, A) = 768: rollout-global padding)") in crash["message"]
        assert "expected: 128 (T_i <= P_i < T_i + A)" in crash["message"]


SLIME_STEPS = [
    {"name": "short", "rollout": {"lengths": [37, 20]},
     "args": {"data_pad_size_multiplier": 64, "micro_batch_size": 2}},
]
"""slime's bug (2dffecc08): routing-replay rows sliced as T - 1 and the stream padded to tp * 128, while the tokens
are T long and padded to tp * data_pad_size_multiplier (64): here 128 replay rows for a batch of 64 positions on
each rank. (Rows that only sit at other positions, with the same count, need the rows' values: G5 counts rows.)"""


@pytest.fixture(scope="module", params=["buggy", "fixed"])
def slime(request, slime_checkout, slime_deps, shared_run, tmp_path_factory):
    from trainers.slime_harness import run_slime_step

    checkout = slime_checkout(request.param)
    out = tmp_path_factory.mktemp(f"slime-preset-{request.param}")
    env = {"LAYOUTCHECK": "raise", "LAYOUTCHECK_CONFIG": str(preset_config(out, "slime"))}
    runs = shared_run(f"slime-preset-{checkout.commit[:9]}", lambda: run_slime_step(
        checkout, slime_deps(), out=out / "run", cp=2, steps=SLIME_STEPS, env=env))
    return request.param, runs


def test_the_slime_preset_fails_the_replay_laid_out_unlike_the_tokens_and_passes_its_fix(slime):
    which, runs = slime
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
        batch = run["short/batch:0"]
        if which == "fixed":
            assert "error" not in batch, batch
            assert "no layout violations" in run.stderr, run.stderr[-2000:]
            continue
        assert batch["error"]["type"] == "LayoutError", batch
        message = batch["error"]["message"]
        assert "[G5] fill_routing_replay, micro-batch 0, samples 0, 1, field `rollout_routed_experts`: replay " \
               "tensor rows differ from the token positions of the batch" in message, message


def test_layoutcheck_report_reads_the_verl_preset_s_run_reports(verl_folder, tmp_path):
    # issue 29: `layoutcheck report` refused the preset's reports (exit 2), violations and all. verl 0.7.0 under
    # the preset in record mode: one report per rank, read as one job.
    config = preset_config(tmp_path, "verl")
    reports = tmp_path / "reports"
    runs = run_verl(verl_folder("0.7.0"), "trainers.verl_preset_job", out=tmp_path / "record", cp=2, tp=2,
                    parameters=JOB, env={"LAYOUTCHECK": "record", "LAYOUTCHECK_CONFIG": str(config),
                                         "LAYOUTCHECK_REPORT": str(reports / "run.json")})
    assert all(run.returncode == 0 for run in runs), [run.stderr[-2000:] for run in runs]
    assert sorted(p.name for p in reports.iterdir()) == ["run.rank0.json", "run.rank1.json"]
    proc = subprocess.run([sys.executable, "-m", "layoutcheck", "report", str(reports)], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])  # this tree's layoutcheck
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = proc.stdout
    assert "2 ranks (world size 2)" in out
    assert "hooks (3): boundary verl.models.mcore.util:preprocess_packed_seqs 4 calls" in out, out
    assert "violations: 1 (B6/returns.0 x1)" in out, out
    row = next(line.split() for line in out.splitlines() if line.strip().startswith("B6"))
    assert row[:5] == ["B6", "returns.0", "verl.models.mcore.util:preprocess_packed_seqs", "1", "1"], row
    assert "fix B6 (returns.0): lay each sample's data out with the stream's own offsets: pad it to P first, then " \
           "cut the CP chunks" in out


VERL_BATCH = '''
import sys
import numpy as np
import torch
from verl import DataProto


def pad_routed(data, unit):
    """Each sample's routed experts (numpy, in non_tensor_batch) padded to round_up(T_i, unit) rows."""
    out = []
    for i, n in enumerate(data.batch["attention_mask"].sum(-1).tolist()):
        r = data.non_tensor_batch["routed"][i]
        p = -(-n // unit) * unit if "--fixed" in sys.argv else n + 1  # the bug: one row of padding, not to P
        out.append(np.concatenate([r, np.zeros((p - r.shape[0], r.shape[1]), r.dtype)]))
    holder = np.empty(len(out), dtype=object)
    holder[:] = out
    return DataProto.from_dict(non_tensors={"routed": holder})


def main():
    lengths = [5, 11, 3]
    mask = torch.zeros(3, 12, dtype=torch.bool)
    for i, n in enumerate(lengths):
        mask[i, 12 - n:] = True
    routed = np.empty(3, dtype=object)
    routed[:] = [np.arange(n * 2).reshape(n, 2) for n in lengths]
    data = DataProto.from_dict(tensors={"input_ids": torch.arange(36).reshape(3, 12), "attention_mask": mask},
                               non_tensors={"routed": routed})
    pad_routed(data, 8)
    print("done")
'''

VERL_BATCH_CONTRACT = '''
[runtime.boundaries."verlbatch:pad_routed"]
samples = "args.data.attention_mask"
args."data.input_ids" = { space = "T", mask = "args.data.attention_mask" }   # data.batch["input_ids"]
args."data.attention_mask" = "mask T"
args."data.non_tensor_batch.routed" = "T"
returns.routed = { space = "P", from = "args.data.non_tensor_batch.routed", pad-value = 0 }
unit = ["unit"]
'''


def test_a_contract_reads_verl_s_own_data_proto(verl_folder, tmp_path):
    # issue 29: verl's DataProto (a TensorDict in `.batch`, numpy object arrays in `.non_tensor_batch`) read by
    # the array-kind adapter without importing tensordict: a planted bug is caught, its fix is clean
    (tmp_path / "verlbatch.py").write_text(VERL_BATCH)
    (tmp_path / "run.py").write_text("import verlbatch\nverlbatch.main()\n")  # the hooked module is imported
    config = tmp_path / "layoutcheck.toml"
    config.write_text(VERL_BATCH_CONTRACT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    root = Path(__file__).resolve().parents[2]  # this tree's layoutcheck
    env.update(PYTHONPATH=os.pathsep.join([str(tmp_path), str(verl_folder("0.9.1")), str(root)]),
               LAYOUTCHECK="raise", LAYOUTCHECK_CONFIG=str(config))
    fixed = subprocess.run([sys.executable, "run.py", "--fixed"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
    assert fixed.returncode == 0 and "done" in fixed.stdout, fixed.stderr
    assert "no layout violations (checked 1 boundary call)" in fixed.stderr, fixed.stderr
    buggy = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
    assert buggy.returncode != 0 and "LayoutError" in buggy.stderr
    assert ("[B3] verlbatch:pad_routed (call 1), sample 0, field `returns.routed` (space P): unit `unit` = 8 does "
            "not divide the padded length") in buggy.stderr, buggy.stderr
    assert "could not check" not in buggy.stderr + fixed.stderr
