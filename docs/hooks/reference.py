"""MkDocs hook: the reference sections of the docs, generated from the code at build time.

A page asks for a section with a marker on a line of its own,
``<!-- generate: NAME -->``, and the hook replaces it with the markdown that
NAME's function returns (`GENERATORS`). Nothing generated is committed, so
nothing generated can go stale: the rules' docs and examples come from the
rule classes, the configuration keys from the settings dataclasses, the
environment variables from their constants in the runtime settings, the
invariants from the checks that report them, the command-line help from the
argument parser. A marker with no generator fails the build.

Registered by ``hooks:`` in ``mkdocs.yml``; ``docs/hooks/`` is left out of
the site (``exclude_docs``).
"""

from __future__ import annotations

import ast
import inspect
import os
import re
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- generate: ([a-z-]+) -->$", re.M)
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
    from layoutcheck.lint.ruledocs import docs, summary
    from layoutcheck.lint.suppressions import UnusedSuppression

    universe = sorted({*all_rules(), UnusedSuppression}, key=lambda r: r.code)
    lines = ["| Code | Name | Default | Summary |", "| --- | --- | --- | --- |"]
    for r in universe:
        cell = summary(r).replace("|", "\\|")
        lines.append(f"| {r.code} | [`{r.name}`](#{r.name}) | {'on' if r.default_enabled else 'off'} | {cell} |")
    for rule in universe:
        body = docs(rule).split("\n", 1)
        lines += ["", f"## `{rule.name}` ({rule.code}) {{ #{rule.name} }}", "", body[0], "",
                  _demote(body[1].strip()) if len(body) > 1 else "", "",
                  f"**Default**: {'on' if rule.default_enabled else 'off'}. **Message**: {rule.message}", ""]
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
        lines += [f"### {code} {{ #{code.lower()} }}", "", f"Reported by {', '.join(entry['where'])}.", ""]
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

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: a fixed width, the same on every build
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
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(lines)


GENERATORS: dict[str, Callable[[], str]] = {
    "rules": rules,
    "configuration": configuration,
    "environment": environment,
    "invariants": invariants,
    "cli": cli,
}


def on_page_markdown(markdown: str, page: object, config: object, files: object) -> str:
    """Replace each ``<!-- generate: NAME -->`` marker with NAME's section."""

    def generate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise KeyError(f"{getattr(page, 'file', page)}: no generator for `<!-- generate: {name} -->`; "
                           f"known: {', '.join(GENERATORS)}")
        return GENERATORS[name]()

    return MARKER.sub(generate, markdown)
