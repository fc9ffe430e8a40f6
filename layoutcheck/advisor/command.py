"""``layoutcheck buckets``: its argument parser and its run function.

`layoutcheck.cli` registers the parser (`add_parser`) and calls `run`. This
module imports only argparse at the top: building the parser must stay
cheap, and numpy (the ``buckets`` extra) is imported when the command runs.
Exit status: 0 done (``--check``: the list is valid), 1 ``--check`` found
problems, 2 bad input or usage. Results go to stdout, warnings and the
summary to stderr; on bad input stderr holds one line naming the file and
the line, and stdout nothing.
"""

from __future__ import annotations

import argparse
import sys

from layoutcheck.advisor.options import (
    EMIT_FORMATS,
    INPUT_FORMATS,
    SAMPLERS,
    error,
    missing_extra,
    parallel_degrees,
    positive_int,
)

__all__ = ["add_parser", "parse_k", "parse_list", "run"]


def parse_list(text: str) -> tuple[object, ...]:
    """``1024,2048,8192``: integers where they parse, the text otherwise (the geometry rules name it)."""
    out: list[object] = []
    for part in text.split(","):
        part = part.strip()
        try:
            out.append(int(part))
        except ValueError:
            out.append(part)
    return tuple(out)


def parse_k(text: str) -> tuple[int, ...]:
    """``--k``: ``4``, ``1..8``, ``2-6`` or ``1,2,4``."""
    out: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            for sep in ("..", "-"):
                if sep in part:
                    lo, hi = (int(x) for x in part.split(sep, 1))
                    if lo > hi:
                        raise argparse.ArgumentTypeError(f"empty range {part!r}")
                    out.extend(range(lo, hi + 1))
                    break
            else:
                out.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of buckets or a range like 1..8, got {text!r}") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"bucket counts must be at least 1, got {text!r}")
    return tuple(sorted(set(out)))


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    """Register ``buckets`` on the top-level sub-parsers."""
    p = commands.add_parser(
        "buckets", help="choose static shape buckets for a length distribution, and say whether they pay",
        description="Fit the static shape buckets that lay out the fewest positions when each micro-batch "
                    "pads to the bucket of its longest sample, compare them with one static length, the "
                    "pad-to-quantum floor, your current buckets and hand-picked lists, validate them on "
                    "another shuffle, and say whether they pay for their compiles. Exit 0 done, 1 --check "
                    "found problems, 2 bad input.",
    )
    p.add_argument("path", nargs="?", metavar="FILE",
                   help="token lengths: one integer per line (`-`: standard input), JSONL (--field), "
                        ".npy, or a layoutcheck run report (.json)")
    inp = p.add_argument_group("input")
    inp.add_argument("--input-format", choices=INPUT_FORMATS, default="auto",
                     help="how to read FILE (default auto: by suffix, .npy, .jsonl/.ndjson, .json = run report, "
                          "anything else one integer per line)")
    inp.add_argument("--field", default="length", metavar="KEY",
                     help="JSONL: the field holding a length or a list of token ids; dots reach into nested "
                          "objects (default: length)")
    geo = p.add_argument_group("geometry")
    geo.add_argument("--max-length", type=positive_int, metavar="N",
                     help="the longest length, always the last bucket (default: the longest sample, rounded up "
                          "to the quantum); a longer sample is an error")
    geo.add_argument("--quantum", type=positive_int, default=128, metavar="N",
                     help="buckets are multiples of this (default 128: flex-attention blocks; 16 for fp8)")
    geo.add_argument("--sp-degree", type=positive_int, default=1, metavar="N",
                     help="sequence-parallel degree: every bucket must split evenly over it, or with --cp-degree "
                          "every CP rank's part must (default 1)")
    geo.add_argument("--cp-degree", type=positive_int, default=1, metavar="N",
                     help="context-parallel degree (zigzag): every bucket must split into 2N chunks (default 1)")
    sim = p.add_argument_group("micro-batches")
    sim.add_argument("--batch-size", type=positive_int, default=1, metavar="B",
                     help="samples per micro-batch (default 1)")
    sim.add_argument("--sampler", choices=SAMPLERS, default="random",
                     help="random pairing, or length-grouped like Hugging Face's group_by_length (default random)")
    sim.add_argument("--group-window", type=positive_int, metavar="N",
                     help="grouped sampler: micro-batches per sorted mega-batch (default: min(n / 4B, 50), as "
                          "Hugging Face)")
    sim.add_argument("--seed", type=int, default=0,
                     help="shuffle to fit on; the next seed's shuffle validates (default 0)")
    choice = p.add_argument_group("buckets")
    choice.add_argument("--k", type=parse_k, default=tuple(range(1, 9)), metavar="K",
                        help="bucket counts to fit: a number or a range, e.g. 4 or 1..8 (default 1..8)")
    choice.add_argument("--current", type=parse_list, metavar="LIST",
                        help="your buckets, to compare: e.g. 1024,2048,4096,8192")
    choice.add_argument("--within", type=float, default=5.0, metavar="PCT",
                        help="recommend the smallest K within PCT%% of the pad-to-quantum floor (default 5)")
    choice.add_argument("--check", type=parse_list, metavar="LIST",
                        help="only validate LIST against the bucket rules (needs --max-length; reads no FILE): "
                             "one line per problem, exit 1 if any")
    cost = p.add_argument_group("compile cost")
    cost.add_argument("--compile-seconds", type=float, default=12.0, metavar="S",
                      help="one-time compile cost per bucket (default 12)")
    cost.add_argument("--step-seconds", type=float, default=1.0, metavar="S",
                      help="seconds a step (one micro-batch) takes padded to max length (default 1)")
    cost.add_argument("--steps", type=positive_int, metavar="N",
                      help="steps the run will take: the verdict then says yes or no")
    cost.add_argument("--recompile-limit", type=positive_int, default=8, metavar="N",
                      help="your torch._dynamo.config.recompile_limit (default 8); K buckets need 2K + 4")
    out = p.add_argument_group("output")
    out.add_argument("--output-format", choices=("text", "json"), default="text",
                     help="the table, or one JSON document (default: text)")
    out.add_argument("--emit", choices=EMIT_FORMATS,
                     help="print only the chosen buckets as a [tool.layoutcheck.runtime] entry, a "
                          "training.static_shape_buckets line, or a JSON list (the recommended K, or the one --k)")
    out.add_argument("--plot", metavar="FILE.png|.svg",
                     help="draw the lengths, micro-batch maxima, buckets and padded area (needs matplotlib)")
    out.add_argument("-q", "--quiet", action="store_true", help="no warnings or summary on stderr")
    return p


def _check(args: argparse.Namespace) -> int:
    import json

    from layoutcheck import geometry
    from layoutcheck.errors import LayoutSpecError

    if args.path is not None:
        return error("--check validates a bucket list and reads no FILE (to score your list on lengths, "
                      "use --current)")
    if args.max_length is None:
        return error("--check needs --max-length (the last bucket)")
    values = list(args.check)
    try:
        problems = geometry.bucket_problems(values, args.max_length, quantum=args.quantum,
                                            sp_degree=args.sp_degree, cp_degree=args.cp_degree,
                                            require_max_last=True)
    except LayoutSpecError as exc:
        return error(str(exc))
    shown = ",".join(map(str, values))
    if args.output_format == "json":
        print(json.dumps({"buckets": values, "max_length": args.max_length, "quantum": args.quantum,
                          "sp_degree": args.sp_degree, "cp_degree": args.cp_degree, "valid": not problems,
                          "problems": problems}, indent=2))
    else:
        for problem in problems:
            print(problem)
    if not args.quiet:
        rules = f"max length {args.max_length}, quantum {args.quantum}" + parallel_degrees(args.sp_degree,
                                                                                           args.cp_degree)
        if problems:
            print(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} in buckets {shown} ({rules}).",
                  file=sys.stderr)
        else:
            print(f"Buckets {shown} are valid ({rules}).", file=sys.stderr)
    return 1 if problems else 0


def run(args: argparse.Namespace) -> int:
    """Run ``layoutcheck buckets`` with parsed ``args``; returns the exit status."""
    if args.check is not None:
        return _check(args)
    if args.path is None:
        return error("buckets: give a lengths FILE (or `-` for standard input), or --check LIST")
    missing = missing_extra("buckets", ["numpy", *(["matplotlib"] if args.plot else [])],
                            "plot" if args.plot else "buckets")
    if missing:
        return error(missing)

    from layoutcheck import geometry
    from layoutcheck.advisor.advise import Settings, advise
    from layoutcheck.advisor.inputs import read_lengths
    from layoutcheck.advisor.render import emit, emitted_k, to_json, to_text
    from layoutcheck.errors import LayoutSpecError

    try:
        lengths = read_lengths(args.path, input_format=args.input_format, field=args.field,
                               max_length=args.max_length)
        max_length = args.max_length or geometry.round_up(int(lengths.values.max()), args.quantum)
        settings = Settings(
            max_length=max_length, quantum=args.quantum, batch_size=args.batch_size, sampler=args.sampler,
            window=args.group_window, ks=args.k, current=args.current, sp_degree=args.sp_degree,
            cp_degree=args.cp_degree,
            recompile_limit=args.recompile_limit, seed=args.seed, within=args.within,
            compile_seconds=args.compile_seconds, step_seconds=args.step_seconds, steps=args.steps,
        )
        advice = advise(lengths.values, settings)
    except LayoutSpecError as exc:
        return error(str(exc))

    if args.emit:
        print(emit(advice.row(emitted_k(advice)).optimum.buckets or (max_length,), args.emit))
    elif args.output_format == "json":
        print(to_json(advice, args.path, lengths.format))
    else:
        print(to_text(advice, args.path))
    if args.plot:
        _plot(args.plot, lengths.values, advice)
    if not args.quiet:
        if args.max_length is None:
            print(f"layoutcheck: note: max length {max_length}: the longest sample rounded up to the quantum "
                  "(set --max-length)", file=sys.stderr)
        for warning in advice.warnings:
            print(f"layoutcheck: warning: {warning}", file=sys.stderr)
        if args.emit and advice.verdict is not None:
            print(f"verdict: {advice.verdict.text}", file=sys.stderr)
        if args.plot:
            print(f"Wrote {args.plot}.", file=sys.stderr)
    return 0


def _plot(path: str, lengths: object, advice: object) -> None:
    import numpy as np

    from layoutcheck.advisor.advise import Advice
    from layoutcheck.advisor.render import emitted_k
    from layoutcheck.advisor.sampler import simulate
    from layoutcheck.advisor.score import padded_to
    from layoutcheck.waste.plot import PaddingPicture, plot_padding

    assert isinstance(advice, Advice)
    s = advice.settings
    values = np.asarray(lengths)
    k = emitted_k(advice)
    buckets = advice.row(k).optimum.buckets or (s.max_length,)
    batches = simulate(values, s.batch_size, s.sampler, window=s.window, seed=s.seed)
    plot_padding(PaddingPicture(
        title=f"{values.size:,} samples, micro-batches of {s.batch_size} ({s.sampler} sampler), "
              f"max length {s.max_length}",
        lengths=values, maxima=batches.maxima, true_tokens=batches.totals,
        laid_out=batches.sizes * padded_to(buckets, batches.maxima),
        laid_out_label=f"with the optimum K={k} buckets",
        buckets=buckets, bucket_label=f"optimum K={k}", quantum=s.quantum,
    ), path)
