"""README.md says what the code does: its commands and excerpts are checked."""

from __future__ import annotations

import re
from pathlib import Path


from layoutcheck.demo import main as demo_main

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
