"""``layoutcheck demo``: catch rollout-global padding in a trainer-shaped pipeline.

Runs the reference pipeline (``fixtures/minitrainer``, a Miles-shaped data
path on CPU tensors) on a synthetic long-tailed rollout, BSHD with CP 2, both
CP ranks in-process, with `LayoutChecker` wrapped around its producer, batch
builder, replay filler and response-offset helper. First with a layout bug
(rollout-global padding by default, any pipeline bug with ``--bug``), then
correct. For each run: the violations found, and what the padding costs.

Exit 0 when the checks find the bug and stay silent on the correct run; 1
when they do not (a self-check); 2 when the pipeline is missing (the demo
runs from a source checkout) or the arguments are bad.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import layoutcheck
from layoutcheck import geometry
from layoutcheck.errors import Violation
from layoutcheck.runtime.reporting.modes import format_violations

__all__ = ["main"]

CP = 2
SHOWN = 3  # violations printed in full; the rest are counted
DEFAULT_BUG = "rollout_global_padding"
BUG_SETTINGS: dict[str, dict[str, Any]] = {
    # What a bug needs to show up (see minitrainer.bugs); every other bug runs on the defaults.
    "mixed_padded_lengths": {"micro_batch_size": 2},
    "replay_thd_pad_multiplier": {"qkv_format": "thd"},
    "alignment_max_not_lcm": {"compress_ratios": [3]},
    # static shape buckets (the last one holds the 14k outlier); the checker is told about them. The
    # bug shows only where a micro-batch's longest P is itself a bucket: the default 32 samples have some.
    "wrong_bucket": {"buckets": (512, 1024, 1536, 2048, 3072, 4096, 8192, 16384), "micro_batch_size": 2},
}
TRACER_ONLY = ("loss_repad_to_rollout_max", "loss_cat_mixed_padded_lengths")
"""Bugs inside the loss function: the tracer sees them (docs/tracer.md), the boundary checks the demo runs do not."""
ROLLOUT_SETTINGS: dict[str, dict[str, Any]] = {
    # a media placeholder in sample 0 that expands to 256 tokens: more than one alignment unit
    "stale_lengths_after_expansion": {"media": {0: 256}},
}


def fixtures_dir() -> Path:
    """Where the reference pipeline lives in a source checkout (it is not in the wheel)."""
    return Path(layoutcheck.__file__).resolve().parents[1] / "fixtures"


# --- running the pipeline under the checker --------------------------------------


@dataclass
class RunResult:
    """One training step on every CP rank, checked."""

    title: str
    violations: list[Violation]
    summary: str
    totals: list[int]  # T_i (rank 0's view; every rank holds the same samples)
    padded: list[int] | None  # P_i (max_seq_lens; BSHD only)
    positions: int  # token positions laid out by the batch builder, all micro-batches, all CP ranks
    note: str = ""


HOOKS: tuple[tuple[str, str, str], ...] = (
    ("producer", "minitrainer.data", "get_rollout_data"),
    ("batch_builder", "minitrainer.data", "get_batch"),
    ("replay_filler", "minitrainer.replay_data", "fill_replay_data"),
    ("offset_helper", "minitrainer.cp_utils", "get_logits_and_tokens_offset_with_cp"),
)
"""``(role, module, function)`` of each checked function of the reference pipeline."""
PIPELINE_MODULES = ("minitrainer.actor", "minitrainer.cp_utils", "minitrainer.data", "minitrainer.model",
                    "minitrainer.replay_data")


def pipeline_bindings(
    make_wrapper: Callable[[str, Callable[..., Any]], Callable[..., Any]],
) -> list[tuple[ModuleType, str, Callable[..., Any]]]:
    """``(module, name, wrapper)`` for every place minitrainer looks a checked function up.

    Callers import the functions by name (and ``cp_utils`` calls the offset
    helper itself), so each copy is found by identity in every module of the
    pipeline; ``make_wrapper(role, original)`` builds the wrapper once.
    """
    modules = [importlib.import_module(name) for name in PIPELINE_MODULES]
    out = []
    for role, module, name in HOOKS:
        original = getattr(importlib.import_module(module), name)
        wrapper = make_wrapper(role, original)
        out += [(m, name, wrapper) for m in modules if m.__dict__.get(name) is original]
    return out


@contextmanager
def checked_pipeline(checker: Any) -> Iterator[None]:
    """Bind the checker's wrappers wherever minitrainer looks the checked functions up; restore them after."""
    bindings = pipeline_bindings(checker.wrap)
    saved = [(module, name, getattr(module, name)) for module, name, _ in bindings]
    try:
        for module, name, wrapper in bindings:
            setattr(module, name, wrapper)
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


def run(title: str, ref: Any, settings: dict[str, Any]) -> RunResult:
    """One checked training step per CP rank (record mode: the step runs to the end)."""
    from minitrainer.actor import train_step
    from minitrainer.args import make_args
    from minitrainer.parallel import get_parallel_state, parallel_state

    checker = layoutcheck.LayoutChecker("record", parallel_state=get_parallel_state, buckets=settings.get("buckets"))
    args = make_args(**settings)
    results = []
    with checked_pipeline(checker):
        for rank in range(CP):
            with parallel_state(cp_size=CP, cp_rank=rank):
                results.append(train_step(args, ref))
    rollout = results[0].rollout_data
    return RunResult(
        title=title,
        violations=checker.violations,
        summary=checker.summary(),
        totals=list(rollout["total_lengths"]),
        padded=list(rollout["max_seq_lens"]) if "max_seq_lens" in rollout else None,
        positions=sum(batch["tokens"].numel() for result in results for batch in result.batches),
    )


# --- rendering ----------------------------------------------------------------


class Style:
    """ANSI styling, or none (``--no-color``, ``NO_COLOR``, or not a terminal)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.enabled else text

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def red(self, text: str) -> str:
        return self._wrap("31;1", text)

    def green(self, text: str) -> str:
        return self._wrap("32;1", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)


def ratio(padded: int, true: int) -> str:
    return f"{padded / true:.1f}x" if true else "n/a"


def padding_table(result: RunResult) -> list[str]:
    """True vs padded tokens: in total, for the worst sample, and through the MoE MLP."""
    total = sum(result.totals)
    rows = [("", "true tokens", "padded", "inflation")]
    if result.padded is not None:
        p = result.padded
        worst = max(range(len(p)), key=lambda i: p[i] / result.totals[i])
        longest = max(range(len(p)), key=lambda i: result.totals[i])
        rows.append(("all samples (max_seq_lens)", f"{total:,}", f"{sum(p):,}", ratio(sum(p), total)))
        for label, i in (("worst sample", worst), ("longest sample", longest)):
            t = result.totals[i]
            rows.append((f"{label} (#{i})", f"{t:,}", f"{p[i]:,}", ratio(p[i], t)))
    mlp = ratio(result.positions, total)
    if result.positions < total:  # fewer positions than tokens: the batch builder dropped some
        mlp += " (tokens dropped!)"
    rows.append(("through the MoE MLP (all ranks)", f"{total:,}", f"{result.positions:,}", mlp))
    widths = [max(len(row[c]) for row in rows) for c in range(4)]
    lines = []
    for n, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [row[c].rjust(widths[c]) for c in range(1, 4)]
        lines.append("    " + "   ".join(cells))
        if n == 0:
            lines.append("    " + "   ".join("-" * w for w in widths))
    return lines


def render(result: RunResult, style: Style, *, expect_violations: bool) -> list[str]:
    out = [style.bold(result.title)]
    if result.violations:
        mark = style.red("FOUND") if expect_violations else style.red("UNEXPECTED")
        out.append(f"  {mark}  {result.summary}")
        named = {s for v in result.violations for s in (v.sample if isinstance(v.sample, tuple) else [v.sample])}
        named.discard(None)
        note = f"{len(named)} of {len(result.totals)} samples named; each CP rank checks its own data"
        out.append(style.dim("        " + note))
        out.append("")
        text = format_violations(result.violations, limit=SHOWN)
        out.extend("    " + line for line in text.splitlines()[1:])  # the count is in the summary line
    else:
        mark = style.green("OK") if not expect_violations else style.red("MISSED")
        out.append(f"  {mark}  {result.summary}")
    out.append("")
    out.extend(padding_table(result))
    out.extend(style.dim("    " + line) for line in result.note.splitlines())
    out.append("")
    return out


def describe(totals: Sequence[int]) -> str:
    longest = max(range(len(totals)), key=lambda i: totals[i])
    return (
        f"{len(totals)} samples, median T = {statistics.median(totals):,.0f} tokens, "
        f"shortest {min(totals):,}, longest {totals[longest]:,} (sample #{longest})"
    )


# --- the command ---------------------------------------------------------------


def parser(bug_names: Sequence[str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="layoutcheck demo",
        description="Run the reference trainer pipeline with a layout bug and then correctly, "
        "and show what layoutcheck's runtime checks find.",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic rollout (default: 0)")
    p.add_argument("--samples", type=int, default=32, metavar="N", help="samples in the rollout (default: 32)")
    p.add_argument("--bug", default=DEFAULT_BUG, choices=bug_names, metavar="NAME",
                   help=f"the pipeline bug to switch on (default: {DEFAULT_BUG}); one of: {', '.join(bug_names)}")
    p.add_argument("--no-color", action="store_true", help="plain output, no ANSI colours")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the demo; return the exit code (0 found, 1 self-check failed, 2 cannot run)."""
    fixtures = fixtures_dir()
    if not (fixtures / "minitrainer").is_dir():
        print(
            f"layoutcheck demo: the reference pipeline is not here ({fixtures / 'minitrainer'}).\n"
            "The demo runs from a source checkout: clone the layoutcheck repository and run "
            "`pip install -e .` there, then `layoutcheck demo`.",
            file=sys.stderr,
        )
        return 2
    try:
        import torch  # noqa: F401
    except ImportError:
        print("layoutcheck demo: needs torch (pip install 'layoutcheck[torch]').", file=sys.stderr)
        return 2
    if str(fixtures) not in sys.path:
        sys.path.insert(0, str(fixtures))
    from minitrainer.bugs import BUG_NAMES
    from minitrainer.rollout import long_tailed_lengths, make_rollout_ref

    options = parser([b for b in BUG_NAMES if b not in TRACER_ONLY]).parse_args(argv)
    if options.samples < 2:
        print("layoutcheck demo: --samples must be at least 2", file=sys.stderr)
        return 2
    style = Style(not options.no_color and "NO_COLOR" not in os.environ and sys.stdout.isatty())
    settings = BUG_SETTINGS.get(options.bug, {})
    layout = settings.get("qkv_format", "bshd").upper()

    lengths = long_tailed_lengths(options.samples, seed=options.seed)
    ref = make_rollout_ref(lengths, seed=options.seed, **ROLLOUT_SETTINGS.get(options.bug, {}))
    buggy = run(f"1. with the bug `{options.bug}`", ref, {**settings, "bugs": {options.bug}})
    correct = run("2. correct (every bug flag off)", ref, settings)

    predicted_ok = True
    if options.bug == "rollout_global_padding":
        # What the bug costs, from the geometry model; the buggy run must pad exactly that much.
        unit = geometry.alignment_unit(1, geometry.DEFAULT_PAD_MULTIPLIER, cp_size=CP).value
        predicted = sum(geometry.rollout_global_padded_lengths(buggy.totals, unit))
        own = sum(geometry.per_sample_padded_lengths(buggy.totals, unit))
        predicted_ok = buggy.padded is not None and sum(buggy.padded) == predicted
        # The real incident's rollout max was 132,096, so its 14,010-token sample was the victim
        # (9.4x). Here the outlier *is* the max: it is padded least, the shortest sample most.
        buggy.note = (
            f"The geometry model predicts {predicted:,} padded tokens for rollout-global padding, "
            f"{ratio(predicted, own)} the {own:,} of per-sample padding"
            f"{'' if predicted_ok else ' (the run DOES NOT match it)'}.\n"
            "In the real incident the rollout max was 132,096, so a 14,010-token sample was padded 9.4x;\n"
            "here the outlier is the max, so the shortest sample pays most."
        )
    lines = [
        style.bold("layoutcheck demo") + f": the reference pipeline, {layout}, cp={CP} (both ranks in-process), "
        f"alignment A=128",
        "  " + describe(lengths),
        "",
        *render(buggy, style, expect_violations=True),
        *render(correct, style, expect_violations=False),
    ]
    detected, silent = bool(buggy.violations), not correct.violations
    if detected and silent and predicted_ok:
        verdict = style.green("layoutcheck caught the bug") + "; the correct run is clean."
        hint = buggy.violations[0].hint
        lines += [verdict, f"What to do: {hint[0].upper()}{hint[1:]}."]
    else:
        if not detected:
            problem = "missed the bug"
        elif not silent:
            problem = "reported violations on the correct run"
        else:
            problem = "disagrees with the geometry model on what the bug costs"
        lines.append(style.red(f"Self-check failed: layoutcheck {problem}."))
    try:
        print("\n".join(lines), flush=True)
    except BrokenPipeError:  # `layoutcheck demo | head`: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0 if detected and silent and predicted_ok else 1


if __name__ == "__main__":
    sys.exit(main())
