"""The reference sections of the docs, generated from the code and committed in the pages.

A page holds a generated section between two markers, each on a line of its
own::

    <!-- generate: NAME -->
    ...the markdown NAME's function returns (`GENERATORS`)...
    <!-- end generate -->

so the pages read the same on GitHub as on the site. The rules' docs and
examples come from the rule classes, the configuration keys from the settings
dataclasses, the environment variables from their constants in the runtime
settings, the invariants from the checks that report them, the command-line
help from the argument parser. After a change to any of them::

    python docs/hooks/reference.py --write     # rewrite every stale section of docs/*.md
    python docs/hooks/reference.py --check     # exit 1, naming each stale section

(``tests/test_docs.py`` fails while a committed section is stale.) Run as a
script it reads the code of this checkout, whatever is installed.

As an MkDocs hook (``hooks:`` in ``mkdocs.yml``; ``docs/hooks/`` is left out
of the site by ``exclude_docs``) it builds every page with its sections
generated afresh and warns (an error under ``strict``) when a committed
section is stale. A marker with no generator, or with no end marker, is an
error.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OPEN = re.compile(r"^<!-- generate: (?P<name>[a-z-]+) -->$", re.M)
END = "<!-- end generate -->"
REGENERATE = "python docs/hooks/reference.py --write"
log = logging.getLogger("mkdocs.hooks.reference")
CODE = re.compile(r"\A(?:O[1-5]|G[1-6]|B[1-6]|S[1-5]|X1)\Z")


# ---------------------------------------------------------------- rules


def _demote(markdown: str) -> str:
    """A rule docstring's ``## What it does`` sections one level down, under the rule's own heading."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        lines.append("#" + line if line.startswith("#") and not fenced else line)
    return "\n".join(lines)


def rules() -> str:
    """Every rule: a table, then each rule's docs (its docstring), message and examples (its VALID/INVALID)."""
    from layoutcheck.lint.registry import all_rules
    from layoutcheck.lint.ruledocs import docs, precision_label, status_label, status_sentence, summary
    from layoutcheck.lint.suppressions import UnusedSuppression

    universe = sorted({*all_rules(), UnusedSuppression}, key=lambda r: r.code)
    lines = ["| Code | Name | Status | Default | Precision | Summary |", "| --- | --- | --- | --- | --- | --- |"]
    for r in universe:
        cell = summary(r).replace("|", "\\|")
        lines.append(f"| {r.code} | [`{r.name}`](#{r.name}) | {status_label(r)} | "
                     f"{'on' if r.on_by_default() else 'off'} | {precision_label(r)} | {cell} |")
    for rule in universe:
        body = docs(rule).split("\n", 1)
        # An HTML anchor, not `{ #name }`: GitHub shows attribute lists as text, and both honour the anchor.
        lines += ["", f'<a id="{rule.name}"></a>', "", f"## `{rule.name}` ({rule.code})", "", body[0], "",
                  _demote(body[1].strip()) if len(body) > 1 else "", "",
                  f"**Default**: {'on' if rule.on_by_default() else 'off'}. {status_sentence(rule)} "
                  f"**Message**: {rule.message}", ""]
        for title, cases in (("Flagged", rule.invalid), ("Not flagged", rule.valid)):
            if cases:
                lines += [f"### Examples: {title.lower()}", ""]
                for case in cases:
                    lines += ["```python", case.code.strip("\n"), "```", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- configuration


def configuration() -> str:
    """Every key of ``[tool.layoutcheck]`` and its ``runtime`` sub-table: type, default, description."""
    from layoutcheck.lint.configdocs import render_reference

    return render_reference("text")


# ---------------------------------------------------------------- environment variables


def _documented_constants(module: object, prefix: str) -> list[tuple[str, str]]:
    """Module-level ``NAME = "value"`` constants whose name starts with ``prefix``, with the docstring under each."""
    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    out = []
    for node, after in zip(tree.body, tree.body[1:]):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.startswith(prefix) and isinstance(node.value, ast.Constant)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)):
            out.append((str(node.value.value), inspect.cleandoc(str(after.value.value))))
    return out


def environment() -> str:
    """The environment variables, from their constants in `layoutcheck.runtime.hooks.settings`."""
    from layoutcheck.runtime.hooks import settings

    lines = ["| Variable | Meaning |", "| --- | --- |"]
    lines += [f"| `{name}` | {doc.replace(chr(10), ' ')} |" for name, doc in _documented_constants(settings, "ENV_")]
    return "\n".join(lines)


# ---------------------------------------------------------------- invariants


def _text(node: ast.expr | None) -> str | None:
    """A string literal, or an f-string with its fields shown as ``{expression}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "{" + ast.unparse(part.value) + "}"
                       for part in node.values)
    return None


def _reported(path: Path) -> list[tuple[str, str, str | None]]:
    """``(code, function, problem)`` for each `Violation` a module builds with a literal invariant code.

    Also the tracer's ``violation(code, tag, problem, ...)`` (its problem is the third argument).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    constants = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)}
    out = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for call in ast.walk(function):
            name = getattr(call.func, "id", None) if isinstance(call, ast.Call) else None
            if name not in ("Violation", "violation"):
                continue
            keywords = {k.arg: k.value for k in call.keywords}
            code = call.args[0] if call.args else keywords.get("invariant")
            value = code.value if isinstance(code, ast.Constant) else constants.get(getattr(code, "id", ""))
            if isinstance(value, str) and CODE.match(value):
                at = 3 if name == "Violation" else 2
                problem = call.args[at] if len(call.args) > at else keywords.get("problem")
                out.append((value, function.name, _text(problem)))
    return out


def invariants() -> str:
    """Each invariant code: the problems the checks report under it, where, and the fix they suggest."""
    from layoutcheck.runtime.contract import common, invariants as boundary
    from layoutcheck.runtime.crossrank import agreement
    from layoutcheck.runtime.tracing import space_rules

    found: dict[str, dict[str, list[str]]] = {}
    for path in sorted((ROOT / "layoutcheck" / "runtime").rglob("*.py")):
        for code, function, problem in _reported(path):
            entry = found.setdefault(code, {"where": [], "problems": []})
            where = f"`{path.stem}.{function}`"
            if where not in entry["where"]:
                entry["where"].append(where)
            if problem and problem not in entry["problems"]:
                entry["problems"].append(problem)
    hints = {code: [hint] for code, hint in {**common.HINTS, **boundary.HINTS, **space_rules.HINTS}.items()
             if CODE.match(code)}
    hints[agreement.INVARIANT] = list(agreement.HINTS.values())
    order = sorted(found, key=lambda c: ("OGBSX".index(c[0]), int(c[1:])))
    lines = []
    for code in order:
        entry = found[code]
        lines += [f"### {code}", "", f"Reported by {', '.join(entry['where'])}.", ""]
        if entry["problems"]:
            lines += ["What the check says when it breaks:", ""]
            lines += [f"- {p}" for p in entry["problems"]]
            lines.append("")
        fixes = hints.get(code, [])
        if fixes:
            lines += ["What to do:", ""] + [f"- {fix}" for fix in fixes] + [""]
    return "\n".join(lines)


# ---------------------------------------------------------------- command line


def cli() -> str:
    """``layoutcheck --help`` and every command's ``--help``, from the argument parser."""
    import argparse

    from layoutcheck.cli import build_parser

    saved = {name: os.environ.get(name) for name in ("COLUMNS", "NO_COLOR")}
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: a fixed width, the same on every build
    os.environ["NO_COLOR"] = "1"  # Python 3.14's argparse colours its help on a terminal
    try:
        parser = build_parser()
        lines = ["## `layoutcheck`", "", "```text", parser.format_help().rstrip(), "```", ""]
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        for name, sub in commands.choices.items():
            if name == "demo":  # its parser lives with the reference pipeline, in a source checkout
                lines += ["## `layoutcheck demo`", "", "Runs the reference pipeline with a bug and then correctly "
                          "(a source checkout); `layoutcheck demo --help` lists its options.", ""]
                continue
            lines += [f"## `layoutcheck {name}`", "", "```text", sub.format_help().rstrip(), "```", ""]
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return "\n".join(lines)


GENERATORS: dict[str, Callable[[], str]] = {
    "rules": rules,
    "configuration": configuration,
    "environment": environment,
    "invariants": invariants,
    "cli": cli,
}


class MarkerError(ValueError):
    """A page's markers are malformed: an unknown name, or an opening marker with no end."""


def regenerate(markdown: str, where: str = "<page>") -> tuple[str, list[str]]:
    """``markdown`` with every generated section made afresh, and the names of the sections that changed.

    A section runs from its ``<!-- generate: NAME -->`` line to the next ``<!-- end generate -->`` line;
    what lies between is replaced, with one blank line inside each marker.
    """
    out, stale, at = [], [], 0
    for match in OPEN.finditer(markdown):
        if match.start() < at:
            raise MarkerError(f"{where}: `<!-- generate: {match['name']} -->` opens inside another section")
        name = match["name"]
        line = markdown.count("\n", 0, match.start()) + 1
        if name not in GENERATORS:
            raise MarkerError(f"{where}:{line}: no generator for `<!-- generate: {name} -->`; "
                              f"known: {', '.join(GENERATORS)}")
        end = re.compile(rf"^{re.escape(END)}$", re.M).search(markdown, match.end())
        following = OPEN.search(markdown, match.end())
        if end is None or (following is not None and following.start() < end.start()):
            raise MarkerError(f"{where}:{line}: `<!-- generate: {name} -->` has no `{END}` line after it "
                              f"(add one, then run `{REGENERATE}`)")
        section = f"{match.group(0)}\n\n{GENERATORS[name]().strip()}\n\n{END}"
        if markdown[match.start():end.end()] != section:
            stale.append(name)
        out += [markdown[at:match.start()], section]
        at = end.end()
    out.append(markdown[at:])
    return "".join(out), stale


def pages(root: Path = ROOT) -> list[Path]:
    """The pages that may hold generated sections: every markdown file of ``docs/``."""
    return sorted((root / "docs").glob("*.md"))


def stale_sections(root: Path = ROOT) -> dict[Path, list[str]]:
    """Each page whose committed sections differ from what the generators return now, with those sections."""
    found = {}
    for path in pages(root):
        _, stale = regenerate(path.read_text(encoding="utf-8"), str(path.relative_to(root)))
        if stale:
            found[path] = stale
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """``--write`` rewrites the stale sections; ``--check`` (the default) lists them and exits 1 if any."""
    parser = argparse.ArgumentParser(prog="python docs/hooks/reference.py",
                                     description="Regenerate the reference sections of docs/*.md from the code.")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help="rewrite every stale section in place")
    what.add_argument("--check", action="store_true", help="exit 1 when a section is stale (the default)")
    options = parser.parse_args(argv)
    stale = 0
    for path in pages():
        text = path.read_text(encoding="utf-8")
        fresh, names = regenerate(text, str(path.relative_to(ROOT)))
        if not names:
            continue
        stale += len(names)
        if options.write:
            path.write_text(fresh, encoding="utf-8")
            print(f"{path.relative_to(ROOT)}: regenerated {', '.join(names)}")
        else:
            print(f"{path.relative_to(ROOT)}: stale: {', '.join(names)}")
    if stale and not options.write:
        print(f"{stale} generated section(s) stale: run `{REGENERATE}`")
        return 1
    if not stale:
        print("every generated section is up to date")
    return 0


def on_page_markdown(markdown: str, page: object, config: object, files: object) -> str:
    """The page with its generated sections made afresh; a stale committed section is a warning."""
    where = str(getattr(getattr(page, "file", None), "src_uri", page))
    fresh, stale = regenerate(markdown, where)
    if stale:
        log.warning("%s: generated section(s) %s differ from the code: run `%s` and commit the result",
                    where, ", ".join(stale), REGENERATE)
    return fresh


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # this checkout's code (and its `rules/`), not whatever is installed
    sys.exit(main())
