"""``layoutcheck report RUN.json``: its argument parser and its run function.

`layoutcheck.cli` registers the parser (`add_parser`) and calls `run`; numpy
(and matplotlib for ``--plot``) are imported when the command runs. Exit
status: 0 done (violations in the report are shown, not an error), 2 a
file that is not a run report or bad options, with one line on stderr and
nothing on stdout.
"""

from __future__ import annotations

import argparse
import sys

from layoutcheck.advisor.options import error, missing_extra, positive_int

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    """Register ``report`` on the top-level sub-parsers."""
    p = commands.add_parser(
        "report", help="show where a run's padding went, from its JSON run report",
        description="Summarise a layoutcheck run report: violations by invariant and field, padding "
                    "inflation per sample, pad share per micro-batch, distinct padded shapes, and the "
                    "positions per-sample padding or the advisor's buckets would save. Exit 0 done, "
                    "2 bad input.",
    )
    p.add_argument("path", metavar="RUN.json", help="a run report written by the runtime checks")
    p.add_argument("--top", type=positive_int, default=5, metavar="N",
                   help="worst samples and micro-batches listed (default 5)")
    p.add_argument("--unit", type=positive_int, default=128, metavar="A",
                   help="alignment unit A for samples whose record has none (default 128)")
    p.add_argument("--k", type=positive_int, default=4, metavar="K",
                   help="buckets the advisor fits on the run's micro-batches (default 4)")
    p.add_argument("--quantum", type=positive_int, default=128, metavar="N",
                   help="the advisor's bucket quantum (default 128)")
    p.add_argument("--max-length", type=positive_int, metavar="N",
                   help="the advisor's last bucket (default: the longest sample rounded up to the quantum)")
    p.add_argument("--output-format", choices=("text", "json"), default="text",
                   help="the summary, or one JSON document (default: text)")
    p.add_argument("--plot", metavar="FILE.png|.svg",
                   help="draw lengths, micro-batch maxima, buckets, the padded area and inflation per sample "
                        "(needs matplotlib)")
    p.add_argument("-q", "--quiet", action="store_true", help="nothing on stderr but errors")
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``layoutcheck report`` with parsed ``args``; returns the exit status."""
    missing = missing_extra("report", ["numpy", *(["matplotlib"] if args.plot else [])],
                            "plot" if args.plot else "buckets")
    if missing:
        return error(missing)

    from layoutcheck.errors import LayoutSpecError
    from layoutcheck.runtime.reporting.runreport import load_run_report
    from layoutcheck.waste.analysis import analyse
    from layoutcheck.waste.render import to_json, to_text

    try:
        report = load_run_report(args.path)
        waste = analyse(report, unit=args.unit, quantum=args.quantum, max_length=args.max_length, k=args.k)
    except LayoutSpecError as exc:
        return error(str(exc))
    if not waste.batches:
        return error(f"{args.path}: the run report has no sample or micro-batch records to report on")
    print(to_json(waste, args.path, top=args.top) if args.output_format == "json"
          else to_text(waste, args.path, top=args.top))
    if args.plot:
        from layoutcheck.waste.plot import picture_of, plot_padding

        plot_padding(picture_of(waste, args.path), args.plot)
        if not args.quiet:
            print(f"Wrote {args.plot}.", file=sys.stderr)
    return 0
