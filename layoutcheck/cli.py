"""The ``layoutcheck`` command: ``check``, ``config``, ``rules``, ``rule``, ``model``, ``demo``, ``buckets``,
``report``.

Exit status, as in ruff: 0 clean, 1 findings (a file that does not parse is
a finding), 2 a usage, configuration or internal error (an unknown rule in
``--select`` included). Findings go to stdout, the summary to stderr.

Start-up is part of the product (pre-commit runs this on every commit), so
this module imports nothing at the top beyond ``os`` and ``sys``: a ``check``
that only repeats the last run replays its output before argparse is even
imported (`layoutcheck.lint.replay`), and each command imports what it needs
when it runs. ``check`` never imports torch or typeguard.
"""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False  # typing costs a replay a few milliseconds; type checkers read this name too
if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping, Sequence
    from typing import NoReturn, TextIO

    from layoutcheck.lint.findings import Finding
    from layoutcheck.lint.fixdetail import FixView
    from layoutcheck.lint.replay import InputLog
    from layoutcheck.lint.rule import LintRule
    from layoutcheck.lint.runner import RunResult

__all__ = ["EXIT_CLEAN", "EXIT_ERROR", "EXIT_FINDINGS", "build_parser", "main"]

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

CONFIG_HELP = "a pyproject.toml or layoutcheck.toml to use instead of searching for one"
"""``--config``'s help, shared by ``check`` and ``config``."""


def _rule_list(text: str) -> list[str]:
    """``--select LC1,global-max-padding``: comma-separated, repeatable."""
    return [part.strip() for part in text.split(",") if part.strip()]


def build_parser(only_check: bool = False) -> argparse.ArgumentParser:
    """The argument parser (help texts are defined once, here).

    ``only_check`` builds the ``check`` command alone, for a command line that starts with it: its
    parsing, help and usage errors are the same, and a pre-commit run does not import the other
    commands' modules (``buckets``, ``report``, ``init``) to describe them.
    """
    import argparse

    from layoutcheck.argtypes import whole_number
    from layoutcheck.version import __version__
    from layoutcheck.lint.output import OUTPUT_FORMATS

    parser = argparse.ArgumentParser(
        prog="layoutcheck",
        description="Keeps padded-sequence layouts honest in LLM training code.",
    )
    parser.add_argument("--version", action="version", version=f"layoutcheck {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    check = commands.add_parser(
        "check", help="lint Python files for padding-layout mistakes",
        description="Lint Python files for padding-layout mistakes. Exit 0 when clean, "
                    "1 with findings, 2 on a usage, configuration or internal error.",
    )
    check.add_argument("paths", nargs="*", metavar="PATH",
                       help="files or folders to check (default: the working folder)")
    selection = check.add_argument_group("rule selection (codes, prefixes such as LC1, names, or ALL)")
    selection.add_argument("--select", type=_rule_list, action="extend", metavar="RULES",
                           help="rules to enable, replacing the configured `select`")
    selection.add_argument("--extend-select", type=_rule_list, action="extend", default=[],
                           metavar="RULES", help="rules to enable on top of the selection")
    selection.add_argument("--ignore", type=_rule_list, action="extend", default=[], metavar="RULES",
                           help="rules to disable")
    selection.add_argument("--report-unused-suppressions", action="store_true",
                           help="report `# layoutcheck: ignore` comments that suppress nothing (LC001)")
    selection.add_argument("--preview", action="store_true", default=None,
                           help="run the preview rules too (below 90%% precision on the corpus: `layoutcheck rules`)")
    selection.add_argument("--no-preview", action="store_false", dest="preview",
                           help="leave the preview rules out, whatever the configuration says")
    out = check.add_argument_group("output")
    out.add_argument("--output-format", choices=OUTPUT_FORMATS, default="text",
                     help="how findings are printed (default: text)")
    out.add_argument("--statistics", action="store_true", help="print counts per rule instead of findings")
    out.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    out.add_argument("-q", "--quiet", action="store_true", help="print findings only: no summary, no warnings")
    fixing = check.add_argument_group("fixes and suppressions")
    fixing.add_argument("--fix", action="store_true", help="apply the safe fixes (and, with --unsafe-fixes, the "
                        "unsafe ones); exit 1 if findings remain")
    fixing.add_argument("--unsafe-fixes", action="store_true",
                        help="with --fix or --diff, also apply fixes that change behaviour (a guard that can "
                             "raise, a rewrite of per-sample lengths)")
    fixing.add_argument("--diff", action="store_true",
                        help="print the fixes as a unified diff instead of writing them (exit 1 if any)")
    fixing.add_argument("--add-noqa", action="store_true",
                        help="write a `# noqa: CODE` comment for every finding, merged into an existing "
                             "`# noqa` of the line, and exit 0")
    run = check.add_argument_group("run")
    run.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    run.add_argument("--force-exclude", action="store_true",
                     help="apply `exclude` to files and folders named on the command line too "
                          "(the pre-commit hook passes it)")
    run.add_argument("--respect-gitignore", action=argparse.BooleanOptionalAction, default=None,
                     help="skip what `.gitignore` and `.ignore` files ignore (default: the "
                          "`respect-gitignore` setting, on unless configured off); files named on the "
                          "command line are checked anyway")
    run.add_argument("--no-cache", action="store_true",
                     help="neither read nor write the result cache, nor replay an identical earlier run")
    run.add_argument("--jobs", "-j", type=whole_number(0, " (automatic)"), default=0, metavar="N",
                     help="worker processes (default 0: automatic, one process for a handful of files)")
    if only_check:
        return parser

    config = commands.add_parser(
        "config", help="show the configuration in effect, or the reference of every key",
        description="Print the configuration a check of PATH uses: the file it comes from, then "
                    "every key with its value. With --reference, every key's type, default and "
                    "description instead (markdown; the docs' configuration reference). Exit 2 on a "
                    "configuration error, as `check`.",
    )
    config.add_argument("path", nargs="?", metavar="PATH",
                        help="the file or folder whose configuration to show (default: the working folder)")
    config.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    config.add_argument("--reference", action="store_true",
                        help="every key with its type, default and description (markdown table)")
    config.add_argument("--output-format", choices=("text", "json"), default="text",
                        help="text (TOML; markdown with --reference) or json (default: text)")
    config.add_argument("--no-cache", action="store_true",
                        help="validate the table afresh instead of reading what a check stored (config never "
                             "writes a cache)")

    rules = commands.add_parser("rules", help="list every rule",
                                description="List every rule: code, name, status (stable or preview), default, "
                                            "measured precision, fix, summary.")
    rules.add_argument("--output-format", choices=("text", "json", "markdown"), default="text")

    rule = commands.add_parser("rule", help="explain a rule (docs, message, examples)",
                               description="Print a rule's docs, message and examples.")
    rule.add_argument("name", nargs="?", metavar="NAME|CODE")
    rule.add_argument("--all", action="store_true", help="every rule (markdown: a table)")
    rule.add_argument("--output-format", choices=("text", "json", "markdown"), default="text")

    commands.add_parser("demo", add_help=False, help="run the end-to-end demo (see `layoutcheck demo --help`)")

    # `buckets` and `report`: their options live in their own modules (numpy is imported when they run).
    from layoutcheck.advisor.command import add_parser as add_buckets_parser
    from layoutcheck.waste.command import add_parser as add_report_parser

    add_buckets_parser(commands)
    from layoutcheck.init.command import add_parser as add_init_parser

    add_init_parser(commands)
    add_report_parser(commands)

    # `layoutcheck model` (issue 11): what the linter believes about the project.
    model = commands.add_parser(
        "model", help="show what the linter believes about the project: sources, owners, CP helpers",
        description="Print the project model the rules query: the sources and who writes them, the "
                    "owners of each layout and why, the functions inferred to own their padding, the CP "
                    "helpers with their layout parameters and where each was found, and the rewrites of "
                    "the owner's inputs that run after the owner. Exit 2 on a configuration error.",
    )
    model.add_argument("paths", nargs="*", metavar="PATH",
                       help="files or folders of the project (default: the working folder)")
    model.add_argument("--output-format", choices=("text", "json"), default="text",
                       help="text or json (default: text)")
    model.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    model.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    return parser


# ---------------------------------------------------------------- helpers


def _use_color(stream: TextIO) -> bool:
    """ANSI colour only on a terminal, and never when NO_COLOR is set (no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _fail(message: str) -> int:
    print(f"layoutcheck: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _universe() -> list[type[LintRule]]:
    from layoutcheck.lint.registry import all_rules
    from layoutcheck.lint.suppressions import UnusedSuppression

    return sorted({*all_rules(), UnusedSuppression}, key=lambda r: r.code)


# ---------------------------------------------------------------- check


def _fixes(n: int) -> str:
    return f"{n} fix" if n == 1 else f"{n} fixes"


def _summary(result: RunResult, args: argparse.Namespace) -> list[str]:
    lines = []
    files_with = len({f.path for f in result.findings})
    fixed = result.fixed_files
    hidden = result.stats.unsafe_hidden
    if args.add_noqa:
        added = result.stats.noqa_added
        lines.append(f"Added {added} noqa directive{'' if added == 1 else 's'}.")
    elif args.diff:
        more = f" ({_fixes(hidden)} available with --unsafe-fixes)" if hidden else ""
        if fixed:
            count = sum(f.fix.applied for f in fixed if f.fix)
            lines.append(f"Would fix {_plural(count, 'finding')} in {_plural(len(fixed), 'file')}{more}.")
        else:
            lines.append(f"No fixes available{more}.")
    else:
        if args.fix and fixed:
            lines.append(f"Fixed {_plural(result.stats.fixed, 'finding')} in {_plural(len(fixed), 'file')}.")
        if result.findings:
            hints = []
            # Fixes are computed before the summary (`layoutcheck.lint.fixdetail`): these are findings with one.
            fixable = sum(f.fixable for f in result.findings)
            if fixable and not args.fix:
                hints.append(f"{fixable} fixable with --fix")
            hint = f" ({'; '.join(hints)})" if hints else ""
            lines.append(f"Found {_plural(len(result.findings), 'finding')} in "
                         f"{_plural(files_with, 'file')}{hint}.")
            if hidden:
                lines.append(f"{_fixes(hidden)} available with --unsafe-fixes.")
        elif not result.errors and not result.no_python_files:
            lines.append("All checks passed!")
    if result.errors:
        lines.append(f"{_plural(len(result.errors), 'path')} could not be checked (errors above).")
    return lines


def _diff(result: RunResult) -> str:
    import difflib

    chunks = []
    for file in result.fixed_files:
        assert file.fix is not None
        chunks.extend(difflib.unified_diff(
            file.fix.original.splitlines(keepends=True), file.fix.fixed.splitlines(keepends=True),
            fromfile=file.path, tofile=file.path,
        ))
    return "".join(line if line.endswith("\n") else line + "\n" for line in chunks)


def _check(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from layoutcheck.configfile import resolve_config
    from layoutcheck.errors import ConfigError
    from layoutcheck.lint.replay import InputLog, store
    from layoutcheck.lint.runner import run
    from layoutcheck.lint.selection import SelectionOverrides

    overrides = SelectionOverrides(
        select=tuple(args.select) if args.select is not None else None,
        extend_select=tuple(args.extend_select),
        ignore=tuple(args.ignore),
        report_unused_suppressions=args.report_unused_suppressions,
        preview=args.preview,
    )
    from layoutcheck.lint.output import STATISTICS_FORMATS

    if args.statistics and args.output_format not in STATISTICS_FORMATS:  # ruff refuses these too
        return _fail(f"--statistics prints counts as {' or '.join(STATISTICS_FORMATS)}; "
                     f"--output-format {args.output_format} has no statistics form")
    if args.add_noqa and (args.fix or args.diff):
        return _fail("--add-noqa cannot be combined with --fix or --diff")
    paths = args.paths or ["."]
    # A run that writes nothing and reads the cache can be replayed by the next identical one.
    writes = args.fix or args.diff or args.add_noqa
    log: InputLog | None = None if args.no_cache or writes else InputLog()
    try:
        loaded = resolve_config(paths, args.config, log=log)
        result = run(paths, loaded=loaded, overrides=overrides, jobs=args.jobs or None,
                     use_cache=not args.no_cache, fix=args.fix or args.diff, unsafe_fixes=args.unsafe_fixes,
                     write_fixes=not args.diff, add_noqa=args.add_noqa,
                     force_exclude=args.force_exclude, log=log, respect_gitignore=args.respect_gitignore)
    except ConfigError as exc:
        return _fail(str(exc))
    # What the run built (the model, its results: hundreds of thousands of objects on a trainer) lives
    # until the end; out of the collector's sight, the fixes' libcst trees and the output, which make
    # garbage, do not pay for full collections that scan it all again (a third of describing Miles's fixes).
    frozen = gc.isenabled() and not gc.get_freeze_count()
    if frozen:
        gc.freeze()
    try:
        fixes: Mapping[Finding, FixView] = {}
        if not (args.diff or args.add_noqa) and any(f.fix is not None for f in result.findings):
            # Which findings have a fix, and which this run's flags apply: computed before anything is shown.
            from layoutcheck.lint.fixdetail import describe_fixes

            result.findings, fixes, result.stats.unsafe_hidden = describe_fixes(
                result.findings, result.rules, loaded.settings(use_cache=not args.no_cache),
                unsafe=args.unsafe_fixes)

        printed = _check_output(result, args, fixes)
        streams = (sys.stdout, sys.stderr)
        for which, text in printed:
            streams[which].write(text)
        code = _check_status(result, args)
        if log is not None and code != EXIT_ERROR:
            store(argv, log, printed, code, str(loaded.cache_dir))
        return code
    finally:
        if frozen:
            gc.unfreeze()  # a process that runs many checks (the tests, an editor) collects them as usual


def _check_output(result: RunResult, args: argparse.Namespace,
                  fixes: Mapping[Finding, FixView] | None = None) -> list[tuple[int, str]]:
    """What ``check`` prints, in order: ``(0, text)`` for stdout, ``(1, text)`` for stderr; ``fixes``: each
    finding's fix (`layoutcheck.lint.fixdetail.describe_fixes`), which ``json`` shows."""
    from layoutcheck.lint.output import format_findings, format_statistics

    writes: list[tuple[int, str]] = []

    def line(which: int, text: str) -> None:
        writes.append((which, text + "\n"))

    for warning in result.warnings:
        if not args.quiet or (result.no_python_files and not args.exit_zero):  # it explains the exit status
            line(1, f"layoutcheck: warning: {warning}")
    if args.add_noqa:
        # Like ruff: the findings are now suppressed on disk; only what could not be checked is shown.
        if result.errors:
            line(1, format_findings([], result.errors, output_format="concise", rules=(), color=False))
    elif args.diff or args.statistics:
        # stdout holds the diff or the counts; the files that could not be checked go to stderr.
        text = _diff(result) if args.diff else format_statistics(result.findings, args.output_format)
        writes.append((0, text if not text or text.endswith("\n") else text + "\n"))
        if result.errors:
            line(1, format_findings([], result.errors, output_format="concise", rules=(), color=False))
    else:
        text = format_findings(result.findings, result.errors, output_format=args.output_format,
                               rules=result.rules, color=_use_color(sys.stdout), fixes=fixes)
        if text:
            line(0, text)
    if not args.quiet:
        for summary in _summary(result, args):
            line(1, summary)
    return writes


def _check_status(result: RunResult, args: argparse.Namespace) -> int:
    from layoutcheck.lint.findings import INVALID_INPUT

    if any(e.kind != INVALID_INPUT for e in result.errors):
        return EXIT_ERROR  # a missing path or a crashed rule: the run is not trustworthy
    if args.add_noqa:
        return EXIT_CLEAN  # as ruff's --add-noqa
    if args.diff:
        return EXIT_FINDINGS if result.fixed_files else EXIT_CLEAN
    if (result.findings or result.errors or result.no_python_files) and not args.exit_zero:
        return EXIT_FINDINGS  # checking nothing is no pass either (ruff warns and exits 0)
    return EXIT_CLEAN


# ---------------------------------------------------------------- config


def _config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from layoutcheck.lint.configdocs import render_reference

    if args.reference:
        if args.path is not None or args.config is not None:
            parser.error("config: --reference describes every key; it takes no PATH or --config")
        print(render_reference(args.output_format))
        return EXIT_CLEAN

    from layoutcheck.configfile import resolve_config
    from layoutcheck.errors import ConfigError
    from layoutcheck.lint.configdocs import render_resolved

    path = args.path or "."
    if not os.path.lexists(path):
        return _fail(f"{path}: no such file or directory")
    try:
        loaded = resolve_config([path], args.config)
        # Read from the cache a check wrote (a table it validated), never written: asking about a
        # project must not write into it.
        settings = loaded.settings(use_cache=not args.no_cache, store=False)
        if settings.select is not None or settings.extend_select or settings.ignore or settings.per_file_ignores:
            # Rule selectors are checked against the rules, as `check` does (imports them).
            from layoutcheck.lint.runner import select_rules

            select_rules(loaded, settings)
        # the debug mode's table, validated like the rest (pydantic only when there is one)
        runtime = loaded.config.runtime.settings() if loaded.table.get("runtime") else None
    except ConfigError as exc:
        return _fail(str(exc))
    print(render_resolved(
        settings, runtime,
        source=str(loaded.path) if loaded.path is not None else None,
        table_name=loaded.key_prefix, root=str(loaded.root), path=path,
        output_format=args.output_format,
    ))
    return EXIT_CLEAN


# ---------------------------------------------------------------- rules / rule


def _rules(args: argparse.Namespace) -> int:
    from layoutcheck.lint.ruledocs import render_rules

    print(render_rules(_universe(), args.output_format))
    return EXIT_CLEAN


def _rule(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from layoutcheck.lint.ruledocs import render_rule, render_rules
    from layoutcheck.lint.selection import describe_rules

    universe = _universe()
    if args.all == (args.name is not None):
        parser.error("rule: give a rule NAME or CODE, or --all")
    if args.all:
        print(render_rules(universe, args.output_format))
        return EXIT_CLEAN
    wanted = args.name.strip().lower()
    for rule in universe:
        if wanted in (rule.name, rule.code.lower()):
            print(render_rule(rule, args.output_format).rstrip("\n"))
            return EXIT_CLEAN
    return _fail(f"unknown rule {args.name!r}; valid: {describe_rules(universe)}")


def _model(args: argparse.Namespace) -> int:
    """``layoutcheck model``: the project model as text or JSON (issue 11)."""
    from layoutcheck.configfile import resolve_config
    from layoutcheck.errors import ConfigError
    from layoutcheck.lint.modelview import render_model
    from layoutcheck.lint.runner import run

    paths = args.paths or ["."]
    try:
        loaded = resolve_config(paths, args.config)
        result = run(paths, loaded=loaded, use_cache=not args.no_cache, keep_project=True)
    except ConfigError as exc:
        return _fail(str(exc))
    missing = [e for e in result.errors if e.kind == "missing-path"]
    if missing:
        return _fail(f"{missing[0].path}: no such file or directory")
    print(render_model(result.project, args.output_format))
    return EXIT_CLEAN


def _demo(argv: list[str]) -> int:
    try:
        from layoutcheck.demo import main as demo_main
    except ModuleNotFoundError as exc:
        if exc.name != "layoutcheck.demo":
            raise
        return _fail("the demo is not available in this installation")
    return int(demo_main(argv) or 0)


# ---------------------------------------------------------------- entry point


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (the console script exits with it).

    With ``argv`` None (the console script, ``python -m layoutcheck``: the
    process's own command line), ``check`` does not return: it ends the
    process with its exit status, skipping the interpreter's teardown
    (`_exit_now`), which every pre-commit run would otherwise wait for.
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    code = _main(args_list)
    if argv is None and args_list[:1] == ["check"]:
        _exit_now(code)
    return code


def _exit_now(code: int) -> NoReturn:
    """End the process at once: flush stdout and stderr, then `os._exit`.

    The interpreter's shutdown would free libcst's tree and modules object by
    object, some 20 ms (a tenth of a one-file run) spent on nothing: a check
    has written and closed its files (cache entries, fixes) and joined its
    workers by now. Under coverage measurement, which saves its data at exit,
    the process exits normally.
    """
    if "coverage" in sys.modules:
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that left, a closed stream: nothing to save
            pass
    os._exit(code)


def _main(args_list: list[str]) -> int:
    try:
        if args_list[:1] == ["check"]:
            # A repeat of the last identical run, with every input unchanged: print its output again.
            from layoutcheck.lint.replay import replay

            replayed = replay(args_list)
            if replayed is not None:
                return replayed
        if args_list and args_list[0] == "demo":
            # Everything after `demo` belongs to the demo's own parser.
            return _demo(args_list[1:])
        parser = build_parser(only_check=args_list[:1] == ["check"])
        args = parser.parse_args(args_list)
        if args.command == "check":
            return _check(args, args_list)
        if args.command == "config":
            return _config(args, parser)
        if args.command == "rules":
            return _rules(args)
        if args.command == "rule":
            return _rule(args, parser)
        if args.command == "buckets":
            from layoutcheck.advisor.command import run as run_buckets

            return run_buckets(args)
        if args.command == "report":
            from layoutcheck.waste.command import run as run_report

            return run_report(args)
        if args.command == "model":
            return _model(args)
        if args.command == "init":
            from layoutcheck.init.command import main as run_init

            return run_init(args)
        return _fail(f"unknown command {args.command!r}")  # pragma: no cover - argparse rejects it
    except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
        return exc.code if isinstance(exc.code, int) else (EXIT_CLEAN if exc.code is None else EXIT_ERROR)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `layoutcheck check | head`: the reader left; exit quietly like other CLIs.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FINDINGS
    except Exception as exc:
        import traceback

        traceback.print_exc()
        return _fail(f"internal error: {type(exc).__name__}: {exc} (please report it with the trace above)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
