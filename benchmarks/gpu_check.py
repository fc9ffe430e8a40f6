"""The debug mode on a GPU: hooks and tracer on CUDA, no synchronising call in their code, their host time per step.

Usage::

    python benchmarks/gpu_check.py              # on a CUDA machine: under a minute or two on one GPU
    python benchmarks/gpu_check.py --dry-run    # on CPU: the same code path (what the test suite runs)
    python benchmarks/gpu_check.py --steps 10 --samples 64 --median 1300 --outlier 14010

Each step is the reference pipeline's data path (`fixtures/minitrainer`:
producer, schedule, replay filler, batch builder, loss function; BSHD,
``--cp`` ranks, this process playing rank 0) feeding a small real model's
training step: a causal transformer built with torch only (token
embedding, ``--layers`` pre-norm blocks with ``scaled_dot_product_attention``,
an LM head; no download), whose log-probs of the batch's tokens go through
the pipeline's loss function, then ``backward`` and an AdamW step. All of
it on the device: the pipeline's tensors are made under
``torch.device("cuda")`` (the replay rows stay on the host, as Miles keeps
them until they are registered).

The debug mode is the one a user runs (`fixtures/debug-run.toml`: the seven
hooks, the tracer on, raise mode). Its own code (every hook's wrapper, the
tracer's rules before and after each op and its CP-helper checks, the tags
the hooks attach) runs in a window under
``torch.cuda.set_sync_debug_mode("error")``: any synchronising call there
raises, and the check fails naming it. The trainer's code, the model step
and this script's own timing (``torch.cuda.synchronize`` at the end of each
step) run outside that window on purpose: they are not what is checked.
The windows come from ``tests/syncguard.py`` (`debug_mode_windows`), which
the test suite's no-sync tests use too.

``--dry-run`` runs the same steps on CPU tensors, with the project's CPU
sync detection in place of ``set_sync_debug_mode``: a dispatch-level deny
list (``_local_scalar_dense``, ``nonzero``, ``masked_select``, ...) and the
value-reading methods (``tolist``, ``item``, ``cpu``, ...) fail inside the
window. Its times include the deny list's own cost and say nothing about a
GPU.

It prints, per step, the median step time without the debug mode and with
it (steps alternate, after one warm-up each), and the host time spent in the
hooks' and in the tracer's own code (their windows, the trainer's code they
call left out); the rest of the difference is the tracer's function mode
seeing every torch call of its regions. Exit status: 0 when every step ran
with no synchronising call, no violation and no note; 1 otherwise; 2 when
there is no GPU and ``--dry-run`` was not given.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT / "fixtures", ROOT / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

CONFIG = ROOT / "fixtures" / "debug-run.toml"
VOCAB = 4096


class Block(nn.Module):
    """A pre-norm causal self-attention block with an MLP."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, width // self.heads).unbind(2)
        attended = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=True)
        x = x + self.out(attended.transpose(1, 2).reshape(b, n, width))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    """Token embedding, causal blocks, LM head: a small real model (torch only, random weights)."""

    def __init__(self, vocab: int, width: int, layers: int, heads: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


@contextmanager
def cuda_window(on: bool) -> Iterator[None]:
    """Inside: synchronising CUDA calls raise (``on``) or are allowed (the trainer's code inside a hook)."""
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error" if on else "default")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(previous)


def pipeline_step(model: nn.Module, optimizer: torch.optim.Optimizer, args: Any, ref: Any) -> int:
    """One rollout through the reference pipeline and the model's training step; the micro-batches it ran."""
    from minitrainer import data, loss, replay_data  # looked up at call time: the hooked functions
    from minitrainer.model import TRAIN_KEYS

    registered: list[torch.Tensor] = []
    rollout, store = data.get_rollout_data(args, ref)
    with store:
        iterators, counts = data.get_data_iterator(args, None, rollout)
        replay_data.fill_replay_data(args=args, models=None, data_iterator=iterators, num_microbatches=counts,
                                     rollout_data=rollout, data_key="rollout_routed_experts", replay_list=registered,
                                     register_replay_list_func=lambda replay_list, replay, **_: replay_list.append(replay))
        steps = sum(counts)
        for _ in range(steps):
            batch = data.get_batch(iterators[0], TRAIN_KEYS, args.data_pad_size_multiplier, args.qkv_format)
            tokens = batch["tokens"]
            log_probs = model(tokens).log_softmax(-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
            value, _, _ = loss.loss_function(args, batch, steps, log_probs)
            value.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return steps


def run(device: str, switch: Callable[[bool], AbstractContextManager[object]], options: argparse.Namespace) -> int:
    """The check on ``device``, with ``switch`` making a window enforcing or not; the exit status."""
    from minitrainer.args import make_args
    from minitrainer.global_vars import set_args
    from minitrainer.parallel import parallel_state
    from minitrainer.rollout import long_tailed_lengths, make_rollout_ref
    from syncguard import Windows, debug_mode_windows

    from layoutcheck.runtime import activation

    torch.manual_seed(0)
    args = make_args(micro_batch_size=options.micro_batch_size)
    refs = [make_rollout_ref(long_tailed_lengths(options.samples, median=options.median, outlier=options.outlier,
                                                 seed=s), seed=s, vocab=VOCAB) for s in range(2)]
    model = TinyLM(VOCAB, options.width, options.layers, heads=4).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    windows = Windows(switch)
    failure = ""
    times: dict[str, list[float]] = {"off": [], "on": []}
    in_code: dict[str, list[float]] = {"hooks": [], "tracer": []}
    with debug_mode_windows(windows):
        session = activation.activate(config=CONFIG, environ={"LAYOUTCHECK_TRACE": "1"})
        specs = list(session.settings.hook_specs())
        print(f"debug mode ({CONFIG.relative_to(ROOT)}): {len(specs)} hooks ({', '.join(s.role for s in specs)}), "
              f"tracer {'on' if session.tracing else 'off'}, mode {session.mode}")
        try:
            with parallel_state(cp_size=options.cp, cp_rank=0), torch.device(device):
                set_args(args)
                for i in range(2 * options.steps + 2):
                    state = "on" if i % 2 == 0 else "off"
                    session._hooks.remove()
                    if state == "on":
                        session._hooks.add(specs)
                    before = dict(windows.seconds)
                    start = time.perf_counter()
                    micro_batches = pipeline_step(model, optimizer, args, refs[i % 2])
                    if device == "cuda":
                        torch.cuda.synchronize()  # outside every window: the step's own end
                    elapsed = time.perf_counter() - start
                    if i >= 2:  # one warm-up step each
                        times[state].append(elapsed)
                        if state == "on":
                            for kind in in_code:
                                in_code[kind].append(windows.seconds[kind] - before[kind])
        except Exception as err:  # noqa: BLE001 - what failed is the check's result
            failure = f"{type(err).__name__}: {err}"
        finally:
            violations, notes = list(session.violations), list(session.notes)
            checked = dict(session.checker.checked)
            activation.deactivate()
    if failure:
        print(f"FAIL: the step raised {failure}")
        return 1

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    off, on = median(times["off"]), median(times["on"])
    hooks, tracer = median(in_code["hooks"]), median(in_code["tracer"])
    print(f"{options.steps} steps each way, alternating; {micro_batches} micro-batches a step; "
          f"checked per step: {', '.join(f'{v / (options.steps + 1):.0f} {k}' for k, v in checked.items())}")
    print(f"  {'step, without the debug mode':<40}{off * 1e3:10.1f} ms")
    print(f"  {'step, with hooks + tracer':<40}{on * 1e3:10.1f} ms   ({(on - off) * 1e3:+.1f} ms, {on / off:.2f}x)")
    print(f"  {'  in the hooks own code':<40}{hooks * 1e3:10.1f} ms   ({hooks / on:.1%} of the step)")
    print(f"  {'  in the tracer own code':<40}{tracer * 1e3:10.1f} ms   ({tracer / on:.1%} of the step)")
    print(f"  {'  the rest (the tracer mode per op)':<40}{(on - off - hooks - tracer) * 1e3:10.1f} ms")
    print(f"violations {len(violations)}, notes {len(notes)}; {windows.entered} windows of layoutcheck code ran "
          f"enforced")
    for item in [*violations[:3], *notes[:3]]:
        print(f"  {item.format() if hasattr(item, 'format') else item}")
    if violations or notes or not windows.entered:
        print("FAIL: the correct pipeline must run with no violation and no note")
        return 1
    print("PASS: no synchronising call in the hooks' or the tracer's code")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU tensors and the CPU sync detection")
    parser.add_argument("--steps", type=int, default=None, help="timed steps each way (default 6; 1 dry)")
    parser.add_argument("--samples", type=int, default=None, help="samples a rollout (default 32; 4 dry)")
    parser.add_argument("--median", type=int, default=None, help="median true length (default 1300; 150 dry)")
    parser.add_argument("--outlier", type=int, default=None, help="the one long sample (default 8192; 400 dry)")
    parser.add_argument("--cp", type=int, default=2, help="CP size; this process is rank 0 (default 2)")
    parser.add_argument("--micro-batch-size", type=int, default=1)
    parser.add_argument("--width", type=int, default=None, help="the model's width (default 256; 32 dry)")
    parser.add_argument("--layers", type=int, default=2)
    options = parser.parse_args(argv)
    dry = {"steps": 1, "samples": 4, "median": 150, "outlier": 400, "width": 32}
    wet = {"steps": 6, "samples": 32, "median": 1300, "outlier": 8192, "width": 256}
    for key, value in (dry if options.dry_run else wet).items():
        if getattr(options, key) is None:
            setattr(options, key, value)
    print(f"torch {torch.__version__}")
    if options.dry_run:
        from syncguard import denying

        print("dry run on cpu: the CPU sync detection (a dispatch-level deny list and the value-reading methods) "
              "stands in for torch.cuda.set_sync_debug_mode; times include its cost and say nothing about a GPU")
        torch.set_num_threads(1)  # a shared CPU: one thread is steadier than two fighting for it
        with denying() as guard:
            return run("cpu", guard.enforce, options)
    if not torch.cuda.is_available():
        print("no CUDA device: run on a GPU machine, or with --dry-run")
        return 2
    print(f"cuda: {torch.cuda.get_device_name()}; torch.cuda.set_sync_debug_mode('error') around layoutcheck's code")
    return run("cuda", cuda_window, options)


if __name__ == "__main__":
    sys.exit(main())
