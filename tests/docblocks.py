"""The fenced code blocks of README.md and docs/*.md, and running their commands as a reader would.

A block's language says what it is: ``console`` blocks are commands (``$ ``
lines) with the output they print, and are run; ``sh`` blocks are commands
that cannot run here (your own trainer, the network, the test suite itself),
each marked on the line before with ``<!-- not run: why -->``; the others
(``toml``, ``yaml``, ``python``, ``text`` and plain) are files and output.

A console block's commands run in order, in one folder (a fresh copy of the
checkout, as a clone has it), each in its own ``bash -c``. The lines shown
under a command are its output, stdout and stderr as a terminal interleaves
them: ``...`` on a line of its own stands for any number of lines (without
one, the shown lines are the first, consecutive, and the last), and a line
ending in `` ...`` is a line that starts with what precedes it (a path or a
timing that differs from run to run). A command exits 0 unless it says
otherwise with a comment, ``# exit N``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(?:^ *<!-- not run: (?P<why>[^\n]*?) -->\n)?^(?P<indent> *)```(?P<lang>\w*)\n(?P<body>.*?)^(?P=indent)```$",
                   re.M | re.S)
"""A fenced block (indented too: a block in a list item), with the `not run` reason on the line before it."""
GENERATED = re.compile(r"^<!-- generate: [a-z-]+ -->$.*?^<!-- end generate -->$", re.M | re.S)
EXIT = re.compile(r"#\s*exit (\d+)\b")
ELIDED = "..."


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    body: str
    why: str | None

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.lang or 'plain'})"


def pages() -> list[Path]:
    """README.md and every page of docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a page outside its generated sections (those are the code's own text)."""
    text = GENERATED.sub(lambda m: "\n" * m.group(0).count("\n"), path.read_text(encoding="utf-8"))
    name = str(path.relative_to(ROOT))
    return [Block(name, text.count("\n", 0, m.start("body")), m["lang"], textwrap.dedent(m["body"]), m["why"])
            for m in BLOCK.finditer(text)]


def copy_of_checkout(to: Path) -> Path:
    """The files of this checkout that git tracks or would track: what a fresh clone (plus your edits) has."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, names):
        if (ROOT / name).is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, to / name)
    return to


def commands(body: str) -> list[tuple[str, list[str]]]:
    """``(command, expected output lines)`` of a console block."""
    out: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            assert out, f"a console block starts with output, not a command: {line!r}"
            out[-1][1].append(line.rstrip())
    return out


def _same(expected: str, seen: str) -> bool:
    if expected.endswith(" " + ELIDED):
        return seen.startswith(expected[: -len(ELIDED)].rstrip())
    return seen == expected


def _find(segment: list[str], seen: list[str], start: int, anchored: bool) -> int | None:
    """Where ``segment`` occurs as consecutive lines of ``seen``, at ``start`` if anchored, else from it on."""
    for at in [start] if anchored else range(start, len(seen) - len(segment) + 1):
        if at + len(segment) <= len(seen) and all(_same(e, s) for e, s in zip(segment, seen[at:])):
            return at
    return None


def mismatch(expected: list[str], seen: list[str]) -> str | None:
    """Why ``seen`` is not what ``expected`` shows (``...`` elides lines), or None when it is."""
    while expected and not expected[-1]:
        expected = expected[:-1]
    if not expected:
        return None
    segments: list[list[str]] = [[]]
    for line in expected:
        if line == ELIDED:
            segments.append([])
        else:
            segments[-1].append(line)
    position = 0
    for i, segment in enumerate(segments):
        if not segment:
            continue
        at = _find(segment, seen, position, anchored=i == 0)
        if at is None:
            where = "as its first lines" if i == 0 else f"after line {position}"
            return f"did not print {segment!r} {where}"
        position = at + len(segment)
    if segments[-1] and position != len(seen):
        return f"printed more after {segments[-1][-1]!r} (add a line `...` if that is meant): {seen[position:]!r}"
    return None


def environment() -> dict[str, str]:
    """A reader's environment: this interpreter's `python` and `layoutcheck` first on PATH, no debug mode on,
    output unbuffered so that stdout and stderr interleave as on a terminal."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAYOUTCHECK", "PYTHONPATH", "NO_COLOR"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "100"
    return env


def run_console_block(block: Block, cwd: Path, timeout: float = 120) -> None:
    """Run each command of a console block in ``cwd`` and compare its output with what the block shows."""
    env = environment()
    for command, expected in commands(block.body):
        proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout)
        seen = [line.rstrip() for line in proc.stdout.splitlines()]
        status = EXIT.search(command)
        wanted = int(status[1]) if status else 0
        assert proc.returncode == wanted, (
            f"{block}: `{command}` exited {proc.returncode}, not {wanted}"
            f"{'' if status else ' (say `# exit N` after a command that fails on purpose)'}:\n{proc.stdout}")
        why = mismatch(expected, seen)
        assert why is None, f"{block}: `{command}` {why}; it printed:\n{proc.stdout}"
