"""``layoutcheck report RUN.json...``: its argument parser and its run function.

`layoutcheck.cli` registers the parser (`add_parser`) and calls `run`; numpy
(and matplotlib for ``--plot``) are imported when the command runs. Exit
status: 0 done (violations in the report are shown, not an error), 2 a
file that is not a run report or bad options, with one line on stderr and
nothing on stdout. Every report the debug mode writes is read: the roles'
(padding per sample and micro-batch), and the boundary contracts' and
presets' (the calls checked and their violations, no padding records).
"""

from __future__ import annotations

import argparse
import sys

from layoutcheck.advisor.options import error, missing_extra, positive_int

__all__ = ["add_parser", "report_files", "run"]


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    """Register ``report`` on the top-level sub-parsers."""
    p = commands.add_parser(
        "report", help="show where a run's padding went, from its JSON run report(s)",
        description="Summarise layoutcheck run reports: the run's own totals, violations by invariant and "
                    "field, padding inflation per sample, pad share per micro-batch, distinct padded shapes, and "
                    "the positions per-sample padding or the advisor's buckets would save. Several reports (one "
                    "per rank: run.rank*.json, or a folder of them) are merged into the job's: totals, a row "
                    "per rank, and the ranks that disagree. Exit 0 done, 2 bad input.",
    )
    p.add_argument("paths", nargs="+", metavar="RUN.json",
                   help="run reports written by the runtime checks, or folders of them (their *.json files)")
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
                   help="draw lengths, micro-batch maxima, buckets, the padded area, and inflation per sample "
                        "(one report) or per rank (several) (needs matplotlib)")
    p.add_argument("-q", "--quiet", action="store_true", help="nothing on stderr but errors")
    return p


def report_files(paths: list[str]) -> list[tuple[str, bool]]:
    """The files to read, each with whether it was named: each path named, and a folder's ``*.json`` files in name order.

    Raises `LayoutSpecError` for a path that does not exist or a folder without any.
    """
    from pathlib import Path

    from layoutcheck.errors import LayoutSpecError

    files: dict[str, bool] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(str(p) for p in path.glob("*.json") if p.is_file())
            if not found:
                raise LayoutSpecError(f"{raw}: a folder with no *.json run reports in it")
            for file in found:
                files.setdefault(file, False)
        elif path.exists():
            files[raw] = True
        else:
            raise LayoutSpecError(f"{raw}: no such file or directory")
    return list(files.items())


def run(args: argparse.Namespace) -> int:
    """Run ``layoutcheck report`` with parsed ``args``; returns the exit status."""
    missing = missing_extra("report", ["numpy", *(["matplotlib"] if args.plot else [])],
                            "plot" if args.plot else "buckets")
    if missing:
        return error(missing)

    from layoutcheck.errors import LayoutSpecError
    from layoutcheck.runtime.reporting.runreport import NotARunReport, load_run_report
    from layoutcheck.waste.job import JobBuilder
    from layoutcheck.waste.render import to_json, to_text

    try:
        files: list[str] = []
        skipped: list[str] = []
        job = JobBuilder(unit=args.unit, top=args.top)
        for file, named in report_files(args.paths):  # one report at a time: memory stays flat in the number of ranks
            try:
                report = load_run_report(file)
            except NotARunReport:
                if named:
                    raise
                skipped.append(file)  # a folder's other JSON (a config, metrics): not ours to judge
                continue
            job.add(report, file)
            files.append(file)
        if not files:
            raise LayoutSpecError(f"{', '.join(args.paths)}: no layoutcheck run report among its *.json files "
                                  f"({', '.join(skipped)}); run reports are written by the debug mode "
                                  "(LAYOUTCHECK_REPORT)")
        waste = job.finish(quantum=args.quantum, max_length=args.max_length, k=args.k)
    except LayoutSpecError as exc:
        return error(str(exc))
    if skipped and not args.quiet:
        print(f"layoutcheck report: skipped {len(skipped)} *.json file(s) that are not run reports: "
              f"{', '.join(skipped)}", file=sys.stderr)
    if args.plot and not waste.batches:  # a boundary contract's or a preset's report: violations, no padding
        return error(f"--plot: {'the run report has' if len(files) == 1 else 'none of the run reports has'} no "
                     "sample or micro-batch records to draw (boundary contracts and presets record violations, "
                     "not padding); leave out --plot")
    print(to_json(waste, files, top=args.top) if args.output_format == "json"
          else to_text(waste, files, top=args.top))
    if args.plot:
        from layoutcheck.waste.plot import picture_of, plot_padding

        plot_padding(picture_of(waste, files), args.plot)
        if not args.quiet:
            print(f"Wrote {args.plot}.", file=sys.stderr)
    return 0
