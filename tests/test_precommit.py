"""The pre-commit hook, installed with real pre-commit from a snapshot of this repository.

pre-commit clones the hook repository at a ``rev``, so the test commits a copy
of the current working tree (tracked and untracked, not ignored files) into a
fresh git repository and points a user repository's ``.pre-commit-config.yaml``
at it. The hook environment is built once per module (``PRE_COMMIT_HOME`` is
shared); building it installs libcst and pydantic from the package index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A real finding: one maximum over all lengths broadcast to every sample, in a
# function that is not the owner of `max_seq_lens` (it only reads lengths). Its rule,
# global-max-padding, is a preview rule: the user's project turns preview on (PREVIEW).
BAD_SOURCE = textwrap.dedent(
    """\
    def round_up(n, m):
        return (n + m - 1) // m * m


    def build_micro_batch(samples):
        total_lengths = [len(s) for s in samples]
        max_seq_lens = [round_up(max(total_lengths), 128)] * len(total_lengths)
        return max_seq_lens
    """
)
PREVIEW = {"layoutcheck.toml": "preview = true\n"}
GOOD_SOURCE = textwrap.dedent(
    """\
    def total_tokens(samples):
        \"\"\"Nothing here pads anything.\"\"\"
        return sum(len(s) for s in samples)
    """
)


def _git(*args: str, cwd: Path, env: dict[str, str]) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=layoutcheck-test", "-c", "user.email=test@example.invalid",
         "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", *args],
        cwd=cwd, env=env, check=True, capture_output=True, text=True,
    ).stdout.strip()


@dataclass(frozen=True)
class HookRepo:
    """The snapshot repository, its commit, and the environment every command runs in."""

    path: Path
    rev: str
    env: dict[str, str]
    home: Path


# The module's module-scoped fixture runs once: its tests all go to one xdist worker
# (`--dist loadgroup` in pyproject.toml) instead of each worker paying for it.
pytestmark = pytest.mark.xdist_group("test_precommit")


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HookRepo]:
    if shutil.which("git") is None:
        pytest.fail("git is required to test the pre-commit hook")
    base = tmp_path_factory.mktemp("precommit")
    home = base / "pre-commit-home"
    env = {
        key: value for key, value in os.environ.items()
        if not key.startswith(("GIT_", "PRE_COMMIT", "VIRTUAL_ENV", "PYTHONPATH"))
    }
    env.update(PRE_COMMIT_HOME=str(home), GIT_CONFIG_NOSYSTEM="1", PRE_COMMIT_COLOR="never")

    snapshot = base / "layoutcheck-snapshot"
    snapshot.mkdir()
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT, env=env)
    for rel in filter(None, listed.split("\0")):
        source = ROOT / rel
        if source.is_file():  # listed but deleted in the working tree: skip
            target = snapshot / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    _git("init", "-q", cwd=snapshot, env=env)
    _git("add", "-A", cwd=snapshot, env=env)
    _git("commit", "-q", "-m", "snapshot of the working tree", cwd=snapshot, env=env)
    rev = _git("rev-parse", "HEAD", cwd=snapshot, env=env)
    yield HookRepo(snapshot, rev, env, home)


def _run_precommit(hook: HookRepo, workdir: Path, filename: str, source: str,
                   extra: dict[str, str] | None = None, config: str | None = None) -> subprocess.CompletedProcess[str]:
    """Commit ``filename`` (and the ``extra`` files, by relative path) to a new repository; run the hook
    (``config``: the ``.pre-commit-config.yaml``, by default the hook repository at its commit)."""
    workdir.mkdir()
    (workdir / ".pre-commit-config.yaml").write_text(
        config or f"repos:\n  - repo: {hook.path}\n    rev: {hook.rev}\n    hooks:\n      - id: layoutcheck\n"
    )
    for name, text in {filename: source, **(extra or {})}.items():
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_text(text)
    _git("init", "-q", cwd=workdir, env=hook.env)
    _git("add", "-A", cwd=workdir, env=hook.env)
    _git("commit", "-q", "--no-verify", "-m", "user code", cwd=workdir, env=hook.env)
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color=never"],
        cwd=workdir, env=hook.env, capture_output=True, text=True, timeout=600,
    )


def test_hook_fails_on_a_finding(hook_repo: HookRepo, tmp_path: Path) -> None:
    result = _run_precommit(hook_repo, tmp_path / "user", "trainer.py", BAD_SOURCE, PREVIEW)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "layoutcheck" in out and "Failed" in out, out
    assert "trainer.py:7:" in out and "global-max-padding" in out, out


def test_hook_passes_on_clean_code(hook_repo: HookRepo, tmp_path: Path) -> None:
    result = _run_precommit(hook_repo, tmp_path / "user", "utils.py", GOOD_SOURCE)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "Passed" in out, out


def test_hook_honours_the_exclude_of_the_layoutcheck_table(hook_repo: HookRepo, tmp_path: Path) -> None:
    # pre-commit passes every staged file by name, vendored ones included; the
    # hook's --force-exclude applies the project's `exclude` to them.
    extra = {
        "pyproject.toml": '[tool.layoutcheck]\nexclude = ["vendored"]\n',
        "vendored/upstream_trainer.py": BAD_SOURCE,
    }
    result = _run_precommit(hook_repo, tmp_path / "user", "utils.py", GOOD_SOURCE, extra)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "Passed" in out and "global-max-padding" not in out, out


def test_hook_environment_has_no_torch(hook_repo: HookRepo, tmp_path: Path) -> None:
    # Build the environment if no other test of this module has yet.
    _run_precommit(hook_repo, tmp_path / "user", "utils.py", GOOD_SOURCE)
    pythons = sorted(hook_repo.home.glob("repo*/py_env-*/bin/python"))
    assert pythons, f"no hook environment under {hook_repo.home}"
    for python in pythons:
        env_dir = python.parents[1]
        assert not [p for p in env_dir.rglob("torch") if p.is_dir()], f"torch installed in {env_dir}"
        probe = subprocess.run(
            [str(python), "-c",
             "import importlib.util, layoutcheck; "
             "print(importlib.util.find_spec('libcst') is not None, importlib.util.find_spec('torch') is None)"],
            env=hook_repo.env, capture_output=True, text=True, check=True,
        )
        assert probe.stdout.split() == ["True", "True"], probe.stdout + probe.stderr


def test_the_readme_snippet_with_its_placeholders_filled_in_runs(hook_repo: HookRepo, tmp_path: Path) -> None:
    # The README's .pre-commit-config.yaml: OWNER/layoutcheck and COMMIT are its only placeholders, the README
    # says what to put there, and with them filled in (here: the snapshot repository and its commit) it works.
    import re

    readme = (ROOT / "README.md").read_text()
    (snippet,) = re.findall(r"```yaml\n(.*?)```", readme, flags=re.S)
    assert "repo: https://github.com/OWNER/layoutcheck" in snippet and "rev: COMMIT" in snippet
    assert "`OWNER/layoutcheck` is the repository" in readme and "there are no release\ntags yet, so give a commit hash" \
        in readme
    config = snippet.replace("https://github.com/OWNER/layoutcheck", str(hook_repo.path)).replace("COMMIT", hook_repo.rev)
    workdir = tmp_path / "user"
    result = _run_precommit(hook_repo, workdir, "trainer.py", BAD_SOURCE, PREVIEW, config=config)
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "global-max-padding" in out, out
