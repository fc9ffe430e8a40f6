"""README.md says what the code does: its commands and excerpts are checked."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import docblocks

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


def test_what_it_finds_is_the_demo_the_set_up_runs():
    # The excerpt under "What it finds" is a console block, run as written (and compared, `...` eliding lines) by
    # test_the_quick_starts_run_as_written_in_a_fresh_clone; it is the demo the set-up command ends with.
    (block,) = [b for b in docblocks.blocks(ROOT / "README.md")
                if b.lang == "console" and "layoutcheck demo" in b.body]
    ((command, shown),) = docblocks.commands(block.body)
    setup = README.split("## Set-up: two commands", 1)[1]
    assert re.findall(r"```sh\n(.*?)\n```", setup, flags=re.S)[0].endswith(command)
    assert "  FOUND  62 layout violations (O3 x62) in get_rollout_data ..." in shown


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


def readme_blocks() -> list[tuple[str, str, str | None]]:
    """``(language, body, why not run)`` of every fenced block of the README."""
    return [(b.lang, b.body, b.why) for b in docblocks.blocks(ROOT / "README.md")]


def test_the_readme_is_a_front_door():
    assert len(README.splitlines()) <= 250
    assert "DESIGN.md" not in README and "<org>" not in README
    links = re.findall(r"\]\((docs/[^)#]+)", README)
    assert len(links) >= 10 and all((ROOT / link).is_file() for link in links), links


def test_the_quick_starts_run_as_written_in_a_fresh_clone(tmp_path):
    # A new user's clone (the checkout's files, nothing else: no mytrainer/, no layoutcheck.toml), with the
    # README's install done (the environment running the tests). Every console block runs there, in order, as
    # written, and prints what the README shows.
    clone = docblocks.copy_of_checkout(tmp_path / "clone")
    consoles = [b for b in docblocks.blocks(ROOT / "README.md") if b.lang == "console"]
    assert len(consoles) >= 2
    for block in consoles:
        docblocks.run_console_block(block, clone)
    assert (clone / "run.json").is_file() and (clone / "mytrainer" / "data.py").is_file()


def test_the_debug_run_table_shown_is_the_one_the_quick_start_runs_with():
    # Quick start 2 shows the table and runs with LAYOUTCHECK_CONFIG naming its file: they must be the same table.
    (shown,) = [body for lang, body, _ in readme_blocks() if lang == "toml"]
    quick_start = README.split("## Quick start 2", 1)[1].split("\n## ", 1)[0]
    assert "`fixtures/debug-run.toml`" in quick_start
    commands = [c for b in docblocks.blocks(ROOT / "README.md") if b.lang == "console" and "train.py" in b.body
                for c, _ in docblocks.commands(b.body) if "train.py" in c]
    assert commands and all("LAYOUTCHECK_CONFIG=fixtures/debug-run.toml" in c for c in commands)
    assert tomllib.loads(shown) == tomllib.loads((ROOT / "fixtures" / "debug-run.toml").read_text())


def _python_of(venv: Path) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / "python"


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
    source = docblocks.copy_of_checkout(tmp_path / "source")
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


# --- fixtures/train.py, the quick start's trainer: each bug flag says what it needs, and does something there --


def _fingerprint(value: object) -> object:
    """What a training run produced, compared by value: tensors by shape, dtype and sum."""
    import dataclasses

    import torch

    if isinstance(value, torch.Tensor):
        return tuple(value.shape), str(value.dtype), float(value.double().sum()) if value.numel() else 0.0
    if dataclasses.is_dataclass(value):
        return tuple((f.name, _fingerprint(getattr(value, f.name))) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return tuple(sorted((str(k), _fingerprint(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_fingerprint(v) for v in value)
    return value if isinstance(value, (int, float, str, bool, type(None))) else type(value).__name__


def _train_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_train_script", ROOT / "fixtures" / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_quick_start_script_says_what_set_up_each_bug_needs_and_refuses_a_bug_without_it():
    from minitrainer.bugs import BUG_NAMES

    env = {**os.environ, "PYTHONPATH": str(ROOT / "fixtures"), "COLUMNS": "200"}
    env.pop("LAYOUTCHECK", None)
    help_text = subprocess.run([sys.executable, "fixtures/train.py", "--help"], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=120, check=True).stdout
    listed = dict(re.findall(r"^  ([a-z_]+) +(\S.*)$", help_text.split("the set-up it needs", 1)[1], flags=re.M))
    assert set(listed) == set(BUG_NAMES)
    assert "--buckets" in listed["wrong_bucket"] and "--layout thd" in listed["replay_thd_pad_multiplier"]
    assert "LAYOUTCHECK_TRACE=1" in listed["loss_repad_to_rollout_max"]
    refused = subprocess.run([sys.executable, "fixtures/train.py", "--bug", "wrong_bucket"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "--bug wrong_bucket does nothing in this set-up: add --buckets" in \
        refused.stderr, refused.stderr
    assert "trained" not in refused.stdout


def test_each_bug_flag_changes_the_run_in_the_set_up_the_help_names_and_nothing_without_it():
    # What `--help` lists is true: with the options it names, the bug changes what training produces (the same
    # seeds, CP rank 0, one rollout); without them (or under THD, for a BSHD bug) it changes nothing, and the
    # script refuses it instead of running with no bug.
    from minitrainer.bugs import BUG_NAMES

    script = _train_script()
    cli = script.parser()

    @functools.lru_cache(maxsize=None)  # the clean runs recur
    def produced(*argv: str) -> tuple[object, str | None]:
        options = cli.parse_args(["--rollouts", "1", "--samples", "12", *argv])
        return _fingerprint(script.train(options)), script.problem(options)

    for bug in BUG_NAMES:
        named = script.setup_of(bug).split(" (")[0].split(";")[0]
        setup = [] if named == "the default set-up" else named.split()
        clean, _ = produced(*setup)
        buggy, problem = produced("--bug", bug, *setup)
        assert problem is None and buggy != clean, f"--bug {bug} changes nothing with {setup or 'the defaults'}"
        if setup:
            without, problem = produced("--bug", bug)
            assert without == produced()[0] and problem and setup[0] in problem, bug
        if bug in script.BSHD_ONLY:
            thd, problem = produced("--bug", bug, "--layout", "thd", *setup)
            assert thd == produced("--layout", "thd", *setup)[0] and "BSHD" in problem, bug
