"""The corpus of real layout-bug fixes (issue 21, point 3): the corpus itself, then the linter on it.

``fixtures/lint/corpus/`` holds one folder per fix found in a trainer's history,
with ``before.py`` (the bug) and ``after.py`` (the fix) written in this
project's own names, and ``corpus.toml``, the manifest: where each fix comes
from, its bug class (docs/design.md#layout-spaces-and-bug-classes), and the lines of ``before.py`` a
linter should point at.

The first tests check the corpus: files present and parsing, attributed in
their docstrings, the pointed lines on the code the fix changes, and the
breadth the issues ask for (15 pairs or more, four trainers or more, the
public examples of the design page's bug classes among them; since issue 28,
40 pairs or more visible in source, from eight trainers or more).

The last tests run ``layoutcheck check`` as a new user would: a subprocess, on a
temporary copy of one file with an empty ``layoutcheck.toml`` beside it (no
configuration, no cache). Each file is its own project, so a pair's two files
never see each other. ``after.py`` must be silent for every pair. ``before.py``
must be flagged at a manifest line, for the pairs whose bug is visible in
source; a pair the rules do not catch yet is an expected failure, listed in
`PENDING_PAIRS` (whoever makes a pair pass removes it from there).
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the tomli backport has the same API
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "fixtures" / "lint" / "corpus"
PAIRS: list[dict] = tomllib.loads((CORPUS / "corpus.toml").read_text())["pair"]
STATIC = [pair for pair in PAIRS if pair["static"]]

DESIGN_EXAMPLES = {
    "e78cfb3": 1,  # radixark/miles, the seed
    "9469b7239": 2,  # radixark/miles
    "b178a3cd5": 3,  # volcengine/verl, the buggy tree (fixed later)
    "2a3969205": 4,  # THUDM/slime
    "2d6c6dbb3": 5,  # volcengine/verl
    "52dac7f29": 7,  # inclusionAI/AReaL
    "416687f437": 8,  # NVIDIA/Megatron-LM
}
"""The public examples of the design page's bug classes (docs/design.md), by the hash it names, with their class."""

REQUIRED = {
    "folder": str, "trainer": str, "repo": str, "mirrors": list, "commit": str, "paths": list,
    "functions": list, "bug_class": int, "description": str, "lines": list, "static": bool,
}

PENDING = pytest.mark.xfail(strict=False, reason="linter by use: issue 21")
PENDING_PAIRS: set[str] = {
    # Grown from the trainers' histories (issue 28, point 7); each waits for the construct named.
    "xtuner_f60dca617_shard_pad_not_block_multiple",  # a shard size checked against one unit, the total against none
    "xtuner_91e30dd16_pad_rows_in_sequence_stats",  # a plain mean over rows that include padding-only rows
    "torchtitan_6b36b52fd_context_check_unshifted",  # a bound on len(tokens) guarding the tokens[:-1] it later builds
    "slime_1d31a49fb_offsets_left_out_of_kernel",  # a keyword partner passed to one call, left out of the next
    "openrlhf_d2fcab25_rebatch_left_padded",  # strip, then re-pad on the left: no reader of a row's head reached
    "nanotron_fd6ded8d_local_offsets_scaled_as_global",  # offsets from a CP-local slice, times the CP size, as global
    # Mined on branch mine28h: each waits for the construct named.
    "verl_3ee9ce6fa_teacher_topk_unshifted",  # a model's per-position predictions cut as tokens, another's as logits
    "slime_e12e5db78_teacher_logp_not_cp_sliced",  # a CP-local value combined with an unsliced partner's tail
    "openrlhf_a3d74759_prompt_cut_at_first_pad",  # a tokenizer's pad side (set on it) read where its batch is cut
    "xtuner_5134781a4_global_padding_on_sp_shard",  # a whole row's count handed to a shard's record
    "openinstruct_2c322b373_offsets_not_cut_to_pairs",  # a count cut applied to one field of a record, not its partner
}
"""Static pairs the linter does not flag yet: each is an expected failure until it passes (then it leaves
this set, and its test must pass)."""


def _id(pair: dict) -> str:
    return pair["folder"]


def _refs(pair: dict) -> list[str]:
    return [pair["commit"], *([pair["design_ref"]] if "design_ref" in pair else [])]


# --- the corpus itself -------------------------------------------------------


def test_manifest_entries_are_complete_and_consistent():
    folders = [p["folder"] for p in PAIRS]
    assert len(folders) == len(set(folders)), "a folder is listed twice"
    for pair in PAIRS:
        for key, kind in REQUIRED.items():
            assert isinstance(pair.get(key), kind), f"{pair.get('folder')}: `{key}` missing or not {kind.__name__}"
        folder = pair["folder"]
        assert len(pair["commit"]) == 40 and int(pair["commit"], 16) >= 0, f"{folder}: commit is not a full hash"
        trainer, short = folder.split("_")[:2]
        assert trainer == pair["trainer"], f"{folder}: folder prefix is not the trainer `{pair['trainer']}`"
        assert pair["commit"].startswith(short), f"{folder}: folder names {short}, the commit is {pair['commit']}"
        assert 1 <= pair["bug_class"] <= 9, f"{folder}: bug_class {pair['bug_class']} is not a class of section 10"
        assert pair["paths"] and pair["functions"] and pair["mirrors"], f"{folder}: paths, functions, mirrors"
        assert pair["lines"] or not pair["static"], f"{folder}: a static bug needs the lines a linter should flag"


def test_pending_pairs_are_static_pairs_of_the_manifest():
    assert PENDING_PAIRS <= {p["folder"] for p in STATIC}


def test_every_corpus_folder_is_in_the_manifest():
    on_disk = {p.name for p in CORPUS.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert on_disk == {p["folder"] for p in PAIRS}


def test_corpus_breadth():
    assert len(PAIRS) >= 15
    assert len({p["trainer"] for p in PAIRS}) >= 4
    # Issue 28: 40 fixes visible in source, from 8 trainers or more.
    assert len(STATIC) >= 40, f"{len(STATIC)} static pairs"
    assert len({p["trainer"] for p in STATIC}) >= 8, "static pairs from fewer than 8 trainers"
    design_page = (ROOT / "docs" / "design.md").read_text()
    for ref, bug_class in DESIGN_EXAMPLES.items():
        assert ref in design_page, f"docs/design.md does not name the example {ref}"
        found = [p for p in PAIRS if any(r.startswith(ref) for r in _refs(p))]
        assert found, f"the design page's example {ref} has no pair"
        assert all(p["bug_class"] == bug_class for p in found), f"{ref} is class {bug_class}"


@pytest.mark.parametrize("pair", PAIRS, ids=_id)
def test_pair_files_parse_are_attributed_and_differ(pair):
    texts = {}
    for name in ("before.py", "after.py"):
        path = CORPUS / pair["folder"] / name
        assert path.is_file(), path
        texts[name] = path.read_text()
        doc = ast.get_docstring(ast.parse(texts[name], filename=str(path))) or ""
        assert f"Class {pair['bug_class']}," in doc, f"{path}: the docstring names another class"
        assert pair["repo"] in doc, f"{path}: the docstring does not name {pair['repo']}"
        assert any(ref[:7] in doc for ref in _refs(pair)), f"{path}: the docstring does not name the commit"
    assert texts["before.py"] != texts["after.py"]


def _functions(source: str) -> dict[str, ast.AST]:
    """Every function of a module by qualified name (``Class.method``)."""
    found: dict[str, ast.AST] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    found[name] = child
                visit(child, name + ".")

    visit(ast.parse(source), "")
    return found


@pytest.mark.parametrize("pair", PAIRS, ids=_id)
def test_manifest_lines_point_at_code_the_fix_changes(pair):
    before_text = (CORPUS / pair["folder"] / "before.py").read_text()
    after_text = (CORPUS / pair["folder"] / "after.py").read_text()
    before, after = _functions(before_text), _functions(after_text)
    lines = before_text.splitlines()
    changed = []
    for number in pair["lines"]:
        assert 1 <= number <= len(lines), f"{pair['folder']}: line {number} is past the end of before.py"
        text = lines[number - 1].strip()
        assert text and not text.startswith("#"), f"{pair['folder']}: line {number} is not code"
        inside = [name for name, node in before.items() if node.lineno <= number <= node.end_lineno]
        assert inside, f"{pair['folder']}: line {number} is outside every function"
        name = max(inside, key=lambda n: before[n].lineno)  # the innermost
        changed.append(
            name not in after
            or ast.get_source_segment(before_text, before[name]) != ast.get_source_segment(after_text, after[name])
        )
    # The lines name the bug: at least one lies in a function the fix changes.
    assert any(changed), f"{pair['folder']}: no pointed line is in a function that after.py changes"


# --- the linter on the corpus -------------------------------------------------


@cache
def _findings(folder: str, name: str, workdir: Path) -> tuple[tuple[int, str, str], ...]:
    """``layoutcheck check --preview`` with no configuration on one corpus file, alone in its own project
    (``--preview``: a pair shows what its rule finds, whatever the rule's release status)."""
    project = workdir / folder / Path(name).stem
    project.mkdir(parents=True)
    shutil.copyfile(CORPUS / folder / name, project / name)
    (project / "layoutcheck.toml").write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "layoutcheck", "check", "--no-cache", "--output-format", "json", "--exit-zero",
         "--preview", "."],
        cwd=project, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return tuple((f["line"], f["rule"], f["message"]) for f in json.loads(done.stdout))


# The module's module-scoped fixture runs once: its tests all go to one xdist worker
# (`--dist loadgroup` in pyproject.toml) instead of each worker paying for it.
pytestmark = pytest.mark.xdist_group("test_lint_corpus")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("lint_corpus")


def _shown(found) -> list[str]:
    return [f"{line}: {rule}: {message}" for line, rule, message in found]


@pytest.mark.parametrize("pair", PAIRS, ids=_id)
def test_linter_is_silent_on_the_fix(pair, workdir):
    found = _findings(pair["folder"], "after.py", workdir)
    assert not found, _shown(found)


@pytest.mark.parametrize(
    "pair", [pytest.param(p, marks=PENDING) if p["folder"] in PENDING_PAIRS else p for p in STATIC], ids=_id
)
def test_linter_flags_the_bug_and_not_the_fix(pair, workdir):
    before = _findings(pair["folder"], "before.py", workdir)
    assert {line for line, _, _ in before} & set(pair["lines"]), (
        f"no finding at lines {pair['lines']} of {pair['folder']}/before.py: {_shown(before)}"
    )
    assert not _findings(pair["folder"], "after.py", workdir)
