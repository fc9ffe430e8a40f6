"""README.md says what the code does: its commands and excerpts are checked."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from layoutcheck.demo import main as demo_main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the core dependency tomli is the backport
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def code_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_two_setup_commands_and_ci_runs_the_test_command():
    setup = README.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)\n```", setup, flags=re.S)
    assert len(commands) == 2, commands
    demo, test = commands
    assert demo.endswith("python -m layoutcheck demo")
    assert test.endswith("python -m pytest")
    for command in commands:  # torch pinned to the CPU wheel only when missing
        assert command.startswith('python -c "import torch" 2>/dev/null || python -m pip install torch==2.13.0 && ')
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == test, "the last command of .ci/run must be README's test command"
    assert all(line.startswith(("set ", "cd ")) for line in ci[:-1])


def test_demo_excerpt_matches_the_demo(capsys):
    assert demo_main(["--no-color"]) == 0
    out = [line.strip() for line in capsys.readouterr().out.splitlines()]
    excerpt = README.split("## The demo", 1)[1].split("```", 2)[1].splitlines()[1:]
    for line in (line.strip() for line in excerpt):
        if not line or line == "...":
            continue
        if line.endswith("..."):
            assert any(o.startswith(line[:-3].rstrip()) for o in out), line
        else:
            assert line in out, line


def test_every_check_option_named_in_the_readme_exists(capsys):
    from layoutcheck.cli import main

    assert main(["check", "--help"]) == 0
    check_help = capsys.readouterr().out
    section = README.split("## The linter", 1)[1].split("### Suppressions", 1)[0]
    options = re.findall(r"`(--[a-z-]+)`", section)
    assert len(options) > 8
    for option in options:
        assert option in check_help, option


# --- the demo command installs everything the demo imports ------------------------------------


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(text: str) -> tuple[str, set[str], str]:
    """``(name, extras, marker)`` of a requirement string such as ``numpy>=1.24; python_version < '3.11'``."""
    spec, _, marker = text.partition(";")
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", spec)
    assert match, text
    extras = {_canonical(e) for e in (match.group(2) or "").split(",") if e.strip()}
    return _canonical(match.group(1)), extras, marker


def distributions_of_extra(extra: str) -> set[str]:
    """Every distribution ``pip install -e ".[extra]"`` brings: the project's requirements as pyproject.toml
    declares them, then the installed distributions' own requirements, transitively (extras followed only
    where requested; other markers are taken as true, which can only make the set larger)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    own, optional = _canonical(project["name"]), project["optional-dependencies"]
    wanted = [(own, {extra})]
    seen: set[str] = set()
    own_extras: set[str] = set()
    while wanted:
        name, extras = wanted.pop()
        if name == own:
            for e in extras - own_extras:
                own_extras.add(e)
                wanted += [(n, x) for n, x, _ in map(_requirement, optional[e])]
            if own not in seen:
                seen.add(own)
                wanted += [(n, x) for n, x, _ in map(_requirement, project["dependencies"])]
            continue
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue  # declared but not installed here: its own requirements are unknown
        for text in requires:
            dep, dep_extras, marker = _requirement(text)
            needed = re.findall(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
            if not needed or any(_canonical(e) in extras for e in needed):
                wanted.append((dep, dep_extras))
    return seen - {own}


def demo_imports() -> set[str]:
    """Top-level third-party modules the README's demo command imports, measured in a fresh interpreter."""
    code = (
        "import atexit, json, os, runpy, sys\n"
        "before = set(sys.modules)\n"
        "atexit.register(lambda: open(os.environ['OUT'], 'w').write(json.dumps(sorted(set(sys.modules) - before))))\n"
        "sys.argv = ['layoutcheck', 'demo', '--samples', '4', '--no-color']\n"
        "runpy.run_module('layoutcheck', run_name='__main__')\n"
    )
    out = ROOT / ".pytest_cache" / f"demo-imports-{os.getpid()}.json"
    out.parent.mkdir(exist_ok=True)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OUT": str(out)}, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    modules = {m.partition(".")[0] for m in json.loads(out.read_text())}
    out.unlink()
    first_party = {"layoutcheck", "minitrainer"}
    return {m for m in modules if m not in sys.stdlib_module_names and m not in first_party and not m.startswith("__")}


def test_the_demo_extra_provides_every_module_the_demo_imports():
    setup = README.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    demo = re.findall(r"```sh\n(.*?)\n```", setup, flags=re.S)[0]
    (extras,) = re.findall(r'pip install -e "\.\[([^\]]+)\]"', demo)
    provided = set().union(*(distributions_of_extra(e.strip()) for e in extras.split(",")))
    by_module = importlib.metadata.packages_distributions()
    imported = demo_imports()
    assert {"torch", "numpy"} <= imported
    missing = {m: by_module.get(m) for m in imported if not {_canonical(d) for d in by_module.get(m, [])} & provided}
    assert not missing, f"the demo imports {missing} (module: distributions), which `.[{extras}]` does not install"
    # the check can fail: the torch extra alone does not bring numpy (the fault this test guards)
    assert "numpy" not in distributions_of_extra("torch") and "numpy" in provided


def test_every_dotted_name_in_the_readme_resolves():
    # The README names modules and objects by dotted path (`layoutcheck.runtime.reporting.RunReport`);
    # a module that moves must take its README names along.
    import importlib

    names = set(re.findall(r"`(layoutcheck(?:\.[A-Za-z_]\w*)+)(?:\(\))?`", README)) - {"layoutcheck.toml"}
    assert "layoutcheck.runtime.reporting.RunReport" in names
    unresolved = []
    for name in sorted(names):
        parts = name.split(".")
        for i in range(len(parts), 0, -1):  # the longest importable module, then attributes
            try:
                value = importlib.import_module(".".join(parts[:i]))
                break
            except ImportError:
                continue
        for attribute in parts[i:]:
            value = getattr(value, attribute, None)
        if value is None:
            unresolved.append(name)
    assert not unresolved, f"README names that do not exist: {unresolved}"
