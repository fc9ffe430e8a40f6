"""``layoutcheck init [PATH]``: write the proposed tables into the project's configuration, or print them.

The file is ``--config FILE``, else the ``layoutcheck.toml`` or
``pyproject.toml`` of PATH (a ``pyproject.toml`` gets ``tool.layoutcheck.``
tables), else a new ``layoutcheck.toml`` there. A file that already has a
runtime table or owners is left as it is (exit 2) unless ``--force``, which
replaces those tables (tables written inline in ``[tool.layoutcheck]`` are
refused: edit them by hand). ``--stdout`` prints the tables, ``--diff`` the
change to the file; neither writes. The written file is validated as any
configuration is.

PATH must be a folder that exists: the linter takes the folder around a
named path as its project, so a missing one would be linted as the folder
above it (``/`` for ``/nope``). Hooks name modules as the program imports
them (`layoutcheck.init.importable`), and every entry is checked before it
is written (`layoutcheck.init.verify`). A project with nothing to propose
gets nothing written (exit 1): an empty table would set up a run that
checks nothing.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from pathlib import Path

from layoutcheck.errors import ConfigError

__all__ = ["add_parser", "main"]

EXIT_OK, EXIT_NOTHING, EXIT_ERROR = 0, 1, 2


def add_parser(commands: argparse._SubParsersAction) -> None:
    init = commands.add_parser(
        "init", help="propose the debug mode's table and the linter's owners from the project model",
        description="Read the project (the linter's model: owners, CP helpers, the call graph), propose "
                    "[runtime] hooks, boundary contracts and coordinates and the linter's owners, each with a "
                    "comment saying why, and write them into the configuration for review. Each entry is first "
                    "checked as the debug mode would install it, by importing the project in a subprocess (at "
                    "most 120 s): one that would not install is written commented out, saying why. An existing "
                    "runtime table is kept unless --force. Exit 1 when nothing is found to propose (nothing is "
                    "written); exit 2 on a missing PATH, a configuration error or a table in the way.",
    )
    init.add_argument("path", nargs="?", default=".", help="the project's folder (default: the working folder)")
    init.add_argument("--config", metavar="FILE", help="the configuration file to write (a pyproject.toml or "
                      "layoutcheck.toml; default: the one in PATH, else a new layoutcheck.toml)")
    init.add_argument("--force", action="store_true", help="replace an existing runtime table and owners")
    show = init.add_mutually_exclusive_group()
    show.add_argument("--stdout", action="store_true", help="print the proposed tables; write nothing")
    show.add_argument("--diff", action="store_true", help="print the change to the file; write nothing")
    init.add_argument("--no-cache", action="store_true", help="neither read nor write the linter's cache")


def _target_file(root: Path, config: str | None) -> Path:
    if config:
        return Path(config)
    for name in ("layoutcheck.toml", "pyproject.toml"):
        if (root / name).is_file():
            return root / name
    return root / "layoutcheck.toml"


def _prefix(file: Path) -> str:
    return "tool.layoutcheck." if file.name == "pyproject.toml" else ""


_HEADER = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(#.*)?$")


def _blocks_to_replace(text: str, prefix: str) -> tuple[list[str], list[str]]:
    """The file's lines without the runtime and owners tables, and the inline keys that block a rewrite."""
    ours = (f"{prefix}runtime", f"{prefix}owners")
    main = prefix[:-1] if prefix else ""
    kept, blocking, skipping, table = [], [], False, ""
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            table = header.group(1).replace('"', "")
            skipping = any(table == t or table.startswith(t + ".") for t in ours)
        elif table == main and re.match(r"\s*(runtime|owners)\s*[.=]", line):
            blocking.append(line.strip())
        if not skipping:
            kept.append(line)
    return kept, blocking


def main(args: argparse.Namespace) -> int:
    """Run ``layoutcheck init`` with parsed ``args``; returns the exit code."""
    from layoutcheck.configfile import resolve_config
    from layoutcheck.init.findings import find
    from layoutcheck.init.importable import module_of, sys_path_roots
    from layoutcheck.init.proposal import DOCS, propose, render
    from layoutcheck.init.verify import verify
    from layoutcheck.lint.runner import run

    root = Path(args.path)
    if not root.is_dir():
        # Never linted: the runner would take the folder around a missing path (`/` for `/nope`) as its
        # project and read the whole file system. A project is a folder.
        what = "no such file or directory" if not os.path.lexists(root) else "not a folder (give the project's folder)"
        print(f"layoutcheck: error: {root}: {what}", file=sys.stderr)
        return EXIT_ERROR
    file = _target_file(root, args.config)
    try:
        loaded = resolve_config([str(root)], args.config if args.config and Path(args.config).is_file() else None)
        result = run([str(root)], loaded=loaded, use_cache=not args.no_cache, keep_project=True)
    except ConfigError as exc:
        print(f"layoutcheck: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    project = result.project
    # Hooks name modules as the program imports them, from the project's folder (or its src/): folders
    # without __init__.py on the way are namespace packages, which the linter's module names leave out.
    roots = sys_path_roots(root)
    names = [module_of(f.display, roots) for f in project.files]
    defined = {
        f"{names[ref[0]]}:{function.qualname}": tuple(p.name for p in function.params)
        for ref, function in project.functions() if ref[1] and names[ref[0]]
    }
    proposal = propose(find(project, names.__getitem__), defined)
    if proposal.empty():
        # An empty runtime table would set up a run that checks nothing ("no hooks are configured").
        print(f"layoutcheck: init found nothing to propose in {root}: no function writes per-sample padded "
              "lengths, packs samples with cumulative lengths or is a CP helper, and none is one a preset "
              "describes. Nothing written. Describe your functions as boundary contracts (layoutcheck's "
              f"{DOCS['contracts']}), or name them in [runtime.hooks].", file=sys.stderr)
        return EXIT_NOTHING
    verify(proposal, roots, cwd=roots[-1])  # each entry installs as written, or is written commented out
    text = render(proposal, _prefix(file))
    if args.stdout:
        sys.stdout.write(text)
        return EXIT_OK
    before = file.read_text(encoding="utf-8") if file.is_file() else ""
    kept, blocking = _blocks_to_replace(before, _prefix(file))
    has_tables = len(kept) != len(before.splitlines()) or blocking
    if blocking:
        print(f"layoutcheck: error: {file} sets {', '.join(blocking)} inside its main table; move or remove it "
              "by hand, then run `layoutcheck init` again", file=sys.stderr)
        return EXIT_ERROR
    if has_tables and not (args.force or args.diff):
        print(f"layoutcheck: error: {file} already has a runtime table or owners; review `layoutcheck init --diff`, "
              "then run with --force to replace them", file=sys.stderr)
        return EXIT_ERROR
    body = "\n".join(kept).rstrip()
    after = (body + "\n\n" if body else "") + text
    if args.diff:
        sys.stdout.writelines(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                                   str(file), str(file)))
        return EXIT_OK
    file.write_text(after, encoding="utf-8")
    from layoutcheck.configfile import load_config

    try:
        load_config(file).config  # what was written must be a valid configuration
    except ConfigError as exc:
        print(f"layoutcheck: error: the proposed table is not valid (please report it): {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(f"layoutcheck: wrote the proposed tables to {file}; review them, then run with LAYOUTCHECK=raise",
          file=sys.stderr)
    return EXIT_OK
