"""README.md says what the code does: its commands and excerpts are checked."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
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
    assert test.endswith(("python -m pytest", "python -m pytest -n 2")), test
    for command in commands:  # torch pinned to the CPU wheel only when missing
        assert command.startswith('python -c "import torch" 2>/dev/null || python -m pip install torch==2.13.0 && ')
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == test, "the last command of .ci/run must be README's test command"
    assert all(line.startswith(("set ", "cd ")) for line in ci[:-1])


def test_demo_excerpt_matches_the_demo(capsys):
    assert demo_main(["--no-color"]) == 0
    out = [line.strip() for line in capsys.readouterr().out.splitlines()]
    excerpt = README.split("## What it finds", 1)[1].split("```", 2)[1].splitlines()[1:]
    for line in (line.strip() for line in excerpt):
        if not line or line == "...":
            continue
        if line.endswith("..."):
            assert any(o.startswith(line[:-3].rstrip()) for o in out), line
        else:
            assert line in out, line


def test_every_check_option_named_in_the_linter_docs_exists(capsys):
    from layoutcheck.cli import main

    assert main(["check", "--help"]) == 0
    check_help = capsys.readouterr().out
    section = (ROOT / "docs" / "linter.md").read_text().split("## Suppressions", 1)[0]
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


def test_every_dotted_name_in_the_readme_and_the_docs_resolves():
    # The README and the docs name modules and objects by dotted path
    # (`layoutcheck.runtime.reporting.runreport.RunReport`); a module that moves must take its names along.
    import importlib

    texts = [README] + [page.read_text() for page in sorted((ROOT / "docs").glob("*.md"))]
    names = {name for text in texts for name in re.findall(r"`(layoutcheck(?:\.[A-Za-z_]\w*)+)(?:\(\))?`", text)}
    names -= {"layoutcheck.toml"}
    assert "layoutcheck.runtime.reporting.runreport.RunReport" in names
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
    assert not unresolved, f"README or docs names that do not exist: {unresolved}"


# --- the README's code blocks: run offline, or marked with why not --------------------------------

BLOCK = re.compile(r"(?:^<!-- not run: (?P<why>[^\n]*?) -->\n)?^```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.M | re.S)


def readme_blocks() -> list[tuple[str, str, str | None]]:
    """``(language, body, why not run)`` of every fenced block of the README."""
    return [(m["lang"], m["body"], m["why"]) for m in BLOCK.finditer(README)]


def test_the_readme_is_a_front_door():
    assert len(README.splitlines()) <= 250
    assert "DESIGN.md" not in README and "<org>" not in README
    links = re.findall(r"\]\((docs/[^)#]+)", README)
    assert len(links) >= 10 and all((ROOT / link).is_file() for link in links), links


def test_every_command_block_runs_or_says_why_not():
    # Commands are `console` blocks (run by the test below) or `sh` blocks, each marked with the reason
    # it cannot run here; a reason that names a test must name one that exists.
    blocks = readme_blocks()
    assert {lang for lang, _, _ in blocks} <= {"", "sh", "console", "toml", "yaml"}
    for lang, body, why in blocks:
        if lang == "sh":
            assert why, f"an sh block without `<!-- not run: why -->`: {body!r}"
            for named in re.findall(r"tests/\w+\.py", why):
                assert (ROOT / named).is_file(), named
        if lang == "console":
            assert why is None and body.startswith("$ ")
    assert sum(lang == "console" for lang, _, _ in blocks) >= 2


def run_console_block(body: str, cwd: Path) -> None:
    """Run each ``$ command`` of a console block in ``cwd``; its expected lines must appear in order in the output
    (``...`` stands for any lines)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAYOUTCHECK", "PYTHONPATH", "NO_COLOR"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # `layoutcheck` and this `python`
    commands: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            commands[-1][1].append(line.rstrip())
    for command, expected in commands:
        proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=300)
        seen = [line.rstrip() for line in (proc.stdout + proc.stderr).splitlines()]
        position = 0
        for line in expected:
            if line == "...":
                continue
            assert line in seen[position:], f"`{command}` did not print {line!r} (after line {position}):\n" + \
                "\n".join(seen)
            position = seen.index(line, position) + 1


def test_the_quick_starts_run_as_written(tmp_path):
    # A folder set up as the quick starts say: a copy of the reference pipeline as `mytrainer/`, the checkout's
    # fixtures, and the README's toml block as layoutcheck.toml.
    shutil.copytree(ROOT / "fixtures" / "minitrainer", tmp_path / "mytrainer",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    tomls = [body for lang, body, _ in readme_blocks() if lang == "toml"]
    assert len(tomls) == 1
    (tmp_path / "layoutcheck.toml").write_text(tomls[0])
    for lang, body, _ in readme_blocks():
        if lang == "console":
            run_console_block(body, tmp_path)
    assert (tmp_path / "run.json").is_file()


def _python_of(venv: Path) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / "python"


def _copy_of_checkout(to: Path) -> Path:
    """The files of this checkout that git tracks or would track (what a fresh clone plus your edits has)."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, names):
        if (ROOT / name).is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, to / name)
    return to


def test_the_wheel_installs_offline_into_a_fresh_environment_and_runs(tmp_path):
    # The README's two commands, with two changes that keep them offline: the build uses this environment's
    # setuptools (--no-build-isolation: isolation would only download setuptools), and the install into a
    # fresh virtual environment leaves out the dependencies (--no-deps: the command line needs none of them
    # for --version or a check without a configuration table).
    build, install = next(body for lang, body, why in readme_blocks()
                          if lang == "sh" and "pip wheel" in body).strip().splitlines()
    dist = tmp_path / "dist"
    build_args = build.split()[1:] + ["--no-build-isolation"]
    build_args[build_args.index("dist")] = str(dist)
    # Built in a copy of the checkout's files: setuptools writes ./build, which must neither land in the
    # user's checkout nor feed a stale file of an earlier build into this wheel.
    source = _copy_of_checkout(tmp_path / "source")
    proc = subprocess.run([sys.executable, *build_args], cwd=source, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = dist.glob("*.whl")
    assert wheel.name == Path(install.split()[-1]).name  # the README names the file the build writes
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    install_args = install.split()[1:-1] + ["--no-deps", "--no-index", str(wheel)]
    proc = subprocess.run([str(_python_of(venv)), *install_args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    layoutcheck = _python_of(venv).parent / "layoutcheck"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "VIRTUAL_ENV", "LAYOUTCHECK"))}
    project = tmp_path / "project"  # outside the checkout: `python -c` would import ./layoutcheck from there
    project.mkdir()
    version = subprocess.run([str(layoutcheck), "--version"], capture_output=True, text=True, env=env, timeout=60,
                             cwd=project)
    assert version.stdout.strip() == f"layoutcheck {importlib.metadata.version('layoutcheck')}", version.stderr
    (project / "producer.py").write_text(  # the longest sample's length, given to every sample
        "def get_rollout_data(tokens):\n"
        "    max_seq_lens = [max(len(t) for t in tokens)] * len(tokens)\n"
        "    return max_seq_lens\n")
    # --preview: global-max-padding is a preview rule (`layoutcheck rules`).
    check = subprocess.run([str(layoutcheck), "check", "--no-cache", "--preview", "."], cwd=project, capture_output=True,
                           text=True, env=env, timeout=120)
    assert check.returncode == 1 and "producer.py:2:" in check.stdout and "global-max-padding" in check.stdout, (
        check.stdout + check.stderr)
    where = subprocess.run([str(_python_of(venv)), "-c", "import layoutcheck; print(layoutcheck.__file__)"],
                           capture_output=True, text=True, env=env, timeout=60, cwd=project)
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr  # the wheel's copy, not this checkout


def test_the_git_url_requirement_installs_from_a_git_repository(tmp_path):
    # The README's git URL, pointed at a local git repository of this checkout (no network): pip clones it at
    # the commit and builds it. Installed with --target, out of the way of this environment's copy.
    (line,) = [body for lang, body, _ in readme_blocks() if lang == "sh" and "git+" in body]
    requirement = re.search(r'"(layoutcheck @ git\+https://github\.com/OWNER/layoutcheck@COMMIT)"', line)[1]
    assert "`OWNER/layoutcheck` is the repository" in README and "`COMMIT`\na full commit hash" in README
    repo = tmp_path / "repo"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PYTHONPATH", "LAYOUTCHECK"))}
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True, env=env).stdout
    for rel in filter(None, listed.split("\0")):
        if (ROOT / rel).is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, repo / rel)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run([*git, *args], cwd=repo, check=True, env=env, capture_output=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                            check=True, env=env).stdout.strip()
    # file://localhost/...: older pips reject a git+file URL with an empty host; git reads both the same way.
    local = requirement.replace("https://github.com/OWNER/layoutcheck", f"file://localhost{repo}")
    local = local.replace("COMMIT", commit)
    target = tmp_path / "target"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                           "--target", str(target), local], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = subprocess.run([sys.executable, "-S", "-c", "import layoutcheck; print(layoutcheck.__file__)"],
                         capture_output=True, text=True, env={**env, "PYTHONPATH": str(target)}, timeout=60,
                         cwd=tmp_path)
    assert run.stdout.startswith(str(target)), run.stdout + run.stderr
