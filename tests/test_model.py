"""The project model (`layoutcheck.model`): per-file facts, the project phase, and `layoutcheck model`.

Facts are extracted from real source text and joined into a `Project`; the
tests assert what the rules rely on: calls bound to the ``def`` they reach,
CP helpers read from their own signatures, owners and why, the call graph,
tests kept out of the trainer model, and a one-file run that takes the other
files' facts from the cache instead of parsing them.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from layoutcheck.configfile import resolve_config
from layoutcheck.lint.engine import ProjectFile, analyse_project, file_facts, module_name_of
from layoutcheck.lint.registry import all_rules
from layoutcheck.lint.runner import run
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.extract import extract
from layoutcheck.model.facts import FileFacts, from_data, to_data
from layoutcheck.model.queries import FileQueries
from layoutcheck.model.vocabulary import Tag

ROOT = Path(__file__).resolve().parents[1]

# A small trainer shaped like docs/design.md#a-real-data-path-miles (its signatures, in our own code).
APPENDIX = {
    "trainer/__init__.py": "",
    "trainer/cp_utils.py": '''
        def get_logits_and_tokens_offset_with_cp(total_length, response_length, qkv_format="thd", max_seq_len=None,
                                                 cp_rank=None, cp_size=None):
            if qkv_format == "bshd":
                assert max_seq_len is not None
            return total_length, response_length


        def slice_with_cp(tokens, pad_value, qkv_format="thd", max_seq_len=None, parallel_state=None):
            length = max_seq_len if qkv_format == "bshd" else tokens.numel()
            return tokens[:length]


        def slice_log_prob_with_cp(log_prob, total_length, response_length, qkv_format="thd", max_token_len=None):
            _, offsets = get_logits_and_tokens_offset_with_cp(total_length, response_length, qkv_format, max_token_len)
            return log_prob[offsets:]
    ''',
    "trainer/data.py": '''
        import torch
        import torch.nn.functional as F

        from .cp_utils import slice_log_prob_with_cp, slice_with_cp
        from .mm import expand_in_place


        def get_rollout_data(args, rollout_data_ref, witness_info=None):
            rollout_data = dict(rollout_data_ref.data)
            unit = args.tp_size * args.data_pad_size_multiplier
            rollout_data["max_seq_lens"] = [(t + unit - 1) // unit * unit for t in rollout_data["total_lengths"]]
            rollout_data["rollout_log_probs"] = [
                slice_log_prob_with_cp(lp, t, r, args.qkv_format, p)
                for lp, t, r, p in zip(rollout_data["rollout_log_probs"], rollout_data["total_lengths"],
                                       rollout_data["response_lengths"], rollout_data["max_seq_lens"])
            ]
            return rollout_data, None


        def get_batch(data_iterator, keys, pad_multiplier=128, qkv_format="thd", get_position_ids=False,
                      allgather_cp=False):
            batch = data_iterator.get_next(keys)
            expand_in_place(batch)
            if qkv_format == "bshd":
                lens = batch["max_seq_lens"]
                assert len(set(lens)) == 1
                batch["tokens"] = torch.stack([slice_with_cp(t, 0, qkv_format, lens[0]) for t in batch["tokens"]])
                return batch
            tokens = [slice_with_cp(t, 0, qkv_format) for t in batch["tokens"]]
            cu_seqlens = [0]
            for t in tokens:
                cu_seqlens.append(cu_seqlens[-1] + t.numel())
            stream = torch.cat(tokens)
            pad = (pad_multiplier - stream.numel() % pad_multiplier) % pad_multiplier
            batch["cu_seqlens"] = torch.tensor(cu_seqlens + [cu_seqlens[-1] + pad])
            batch["tokens"] = F.pad(stream, (0, pad))
            return batch
    ''',
    "trainer/mm.py": '''
        def expand_in_place(rollout_data):
            rollout_data["total_lengths"] = [n + 1 for n in rollout_data["total_lengths"]]
    ''',
    "trainer/replay.py": '''
        from .cp_utils import slice_with_cp


        class ReplayFiller:
            def fill(self, batch, qkv_format):
                return [self._layout(r, qkv_format, p) for r, p in zip(batch["replay"], batch["max_seq_lens"])]

            def _layout(self, rows, qkv_format, max_seq_len):
                return slice_with_cp(rows, 0, qkv_format, max_seq_len)


        def fill_replay_data(*, args, models, data_iterator, num_microbatches, rollout_data, data_key, replay_list,
                             register_replay_list_func, if_sp_region=True, indices_are_token_positions=False):
            return ReplayFiller().fill(data_iterator[0].get_next([data_key]), args.qkv_format)
    ''',
    "tests/test_data.py": '''
        def test_uniform(rollout_data):
            rollout_data["max_seq_lens"] = [max(rollout_data["total_lengths"])] * len(rollout_data["tokens"])
    ''',
}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))


def project_of(files: dict[str, str], settings: LintSettings | None = None):
    settings = settings or LintSettings()
    entries = [
        ProjectFile(name, name, module_name_of(name), textwrap.dedent(text).lstrip("\n"), checked=True,
                    rules=tuple(all_rules()), is_package=name.endswith("__init__.py"))
        for name, text in files.items()
    ]
    _, project = analyse_project(entries, settings, all_rules=list(all_rules()))
    return project


# ---------------------------------------------------------------- per-file facts


def test_facts_survive_the_cache_as_plain_json() -> None:
    source = (ROOT / "fixtures" / "lint" / "flagged" / "replay_filler.py").read_text()
    facts = extract(source, LintSettings())
    assert facts.extracted and facts.pads and facts.functions
    data = json.loads(json.dumps(to_data(facts)))
    again = from_data(data)
    assert isinstance(again, FileFacts)
    assert json.dumps(to_data(again)) == json.dumps(to_data(facts))
    with pytest.raises(ValueError):
        from_data({"t": "Pad", "v": [1, 2]})


def test_a_walked_tree_holds_no_reference_cycle() -> None:
    # The lint's workers run with the collector off: every tree must go by reference counting when its
    # file is done, so no node may end up in a cycle (a memo listing its own node, a recursive closure).
    import gc

    sources = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "fixtures").rglob("*.py"))]
    extract(sources[0], LintSettings())  # the model's lazy imports leave their own garbage once
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for source in sources:
            extract(source, LintSettings())
        gc.collect()
        left = sorted({type(o).__name__ for o in gc.garbage if isinstance(o, ast.AST)})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
    assert len(sources) > 200 and left == []


def _deep_pad(terms: int) -> str:
    # Valid Python nested deeper than the walk recurses by default (a left-nested chain of `+`), then a pad.
    return ("import torch.nn.functional as F\n"
            "def f(x, a, unit):\n"
            "    total = " + " + ".join(["a"] * terms) + "\n"
            "    return F.pad(x, (0, (-total) % unit))\n")


@pytest.mark.parametrize("terms", [1500, 2500])
def test_code_python_parses_is_walked_however_deep(terms: int) -> None:
    source = _deep_pad(terms)
    ast.parse(source)  # valid Python (a few more terms and it is not: "nested too deeply to parse")
    limit = sys.getrecursionlimit()
    facts = extract(source, LintSettings())
    assert facts.extracted and facts.syntax_error is None
    assert [pad.span[0] for pad in facts.pads] == [4]  # the walk went past the chain, to the pad
    assert sys.getrecursionlimit() == limit and threading.stack_size() == 0  # both restored


def test_code_too_deep_even_for_the_deep_walk_is_an_error_that_says_what_to_do(monkeypatch) -> None:
    from layoutcheck.model import extract as extract_module

    monkeypatch.setattr(extract_module, "_DEEP_LIMIT", sys.getrecursionlimit())  # no deeper than the first try
    facts = extract(_deep_pad(1500), LintSettings())
    assert not facts.extracted and facts.syntax_error is not None
    line, column, message = facts.syntax_error
    assert message.startswith("code is nested too deeply to walk: not checked") and "`exclude`" in message


def test_spans_count_characters_not_bytes() -> None:
    facts = extract('# é\nx = "é"; pad = (-len(tokens)) % (2 * cp_size)\n', LintSettings())
    [pad] = facts.pads
    assert pad.span[:2] == (2, 16)  # `ast` says byte 16 (0-based); the finding shows character 16


_CLOSED_OFFSETS = """import torch.nn.functional as F


def close(offsets, end, start):
    n = end - start
    return F.pad(offsets, (0, 1), value=end)
"""


@pytest.mark.parametrize("source, line", [
    (_CLOSED_OFFSETS, 6),
    # `ｐad` (a compatibility spelling) is `pad` to the parser: the function's text lacks `pad`.
    (_CLOSED_OFFSETS.replace("F.pad", "F.\uff50ad"), 6),
    # Form feeds end lines for `str.splitlines`, not for the parser; `\r\n` ends one line.
    ("x = 1\x0c\r\n\x0c\r\ny = 2\r\n" + _CLOSED_OFFSETS.replace("\n", "\r\n"), 9),
    ('"""\x0c\x0c\x0c\x0c\n\x0c\x0c"""\n' + _CLOSED_OFFSETS, 8),
], ids=["ascii", "compatibility-spelling", "crlf-and-form-feeds", "form-feeds-in-a-string"])
def test_a_check_skipped_where_the_text_lacks_its_words_still_runs_where_the_parser_sees_them(
    source: str, line: int,
) -> None:
    # Each function-level check runs only where the function's lines spell what it matches
    # (`partners.SPELLINGS`): the lines are the parser's, and a non-ASCII spelling may be the word.
    facts = extract(source, LintSettings())
    assert [(c.kind, c.span[0]) for c in facts.clashes] == [("empty_segment", line)]
    plain = extract(source.replace("F.pad", "F.grow").replace("F.\uff50ad", "F.grow"), LintSettings())
    assert plain.clashes == []


def test_branches_are_joined_and_their_layout_is_recorded() -> None:
    facts = extract(textwrap.dedent('''
        def advantages(values, max_seq_lens, qkv_format, cp_size, total_lengths):
            if cp_size > 1 and qkv_format == "bshd":
                per_sample = max_seq_lens
            else:
                per_sample = [None] * len(values)
            out = []
            for i, v in enumerate(values):
                out.append(slice_log_prob_with_cp(v, total_lengths[i], 1, qkv_format, per_sample[i]))
            if qkv_format != "thd":
                return out
            return [slice_with_cp(v, 0, qkv_format) for v in values]
    '''), LintSettings())
    calls = {c.callee: c for c in facts.functions[1].calls}
    padded = calls["slice_log_prob_with_cp"].args[4]
    assert padded.params == ("max_seq_lens",)  # either branch's value counts: the list the callers pass
    assert calls["slice_log_prob_with_cp"].layout is None
    assert calls["slice_with_cp"].layout == "thd"  # after the early return under BSHD


def test_a_file_the_prefilter_clears_still_says_what_it_imports() -> None:
    facts = file_facts("from trainer.testing.fake import rollout\n", LintSettings(), list(all_rules()))
    assert not facts.extracted and facts.imported == ("trainer.testing.fake",)


# ---------------------------------------------------------------- the project phase


def test_calls_bind_to_their_defs_and_helpers_to_their_own_signatures() -> None:
    project = project_of(APPENDIX, LintSettings(cp_helpers={"all_gather_with_cp": {"qkv_format": 3, "max_seq_len": 4}}))
    helper = project.helper("get_logits_and_tokens_offset_with_cp")
    assert helper.text() == ("get_logits_and_tokens_offset_with_cp(total_length, response_length, qkv_format=\"thd\", "
                             "max_seq_len=None, cp_rank=None, cp_size=None)")
    assert (helper.layout, helper.padded, helper.none_checked) == (("qkv_format", 2), ("max_seq_len", 3),
                                                                   ("max_seq_len",))
    assert project.helper("slice_log_prob_with_cp").padded == ("max_token_len", 4)
    configured = project.helper("all_gather_with_cp")  # no def in this tree: the configured positions
    assert configured.ref is None and configured.layout == ("qkv_format", 3)
    # `from .mm import expand_in_place` (relative), `self._layout` (same class), a constructor call.
    callers = {project.function(t).qualname: sorted(project.function(c).qualname for c, _ in sites)
               for t, sites in project.callers.items()}
    assert callers["expand_in_place"] == ["get_batch"]
    assert callers["ReplayFiller._layout"] == ["ReplayFiller.fill"]
    assert callers["slice_with_cp"] == ["ReplayFiller._layout", "get_batch", "get_batch"]


def test_owners_say_why_and_tests_are_not_the_trainer() -> None:
    project = project_of(APPENDIX)
    owners = {project.function(r).qualname: (o.layouts, o.why) for r, o in project.owners.items()}
    assert owners == {
        "get_rollout_data": (("bshd",), "writes each sample's padded length to `max_seq_lens`"),
        "get_batch": (("thd",), "builds `cu_seqlens` (cumulative lengths of the packed batch)"),
    }
    tests = [f.relpath for f in project.files if f.is_test]
    assert tests == ["tests/test_data.py"]
    configured = project_of(APPENDIX, LintSettings(owners={"bshd": ("trainer.replay:fill_replay_data",)}))
    assert any(o.why == "listed in `owners.bshd`" for o in configured.owners.values())


def test_a_test_module_that_trainer_code_imports_is_trainer_code() -> None:
    files = {
        "pkg/__init__.py": "", "pkg/testing/__init__.py": "",
        "pkg/testing/fakes.py": "def fake(tokens):\n    return {'max_seq_lens': [max(map(len, tokens))] * len(tokens)}\n",
        "pkg/warmup.py": "from pkg.testing.fakes import fake\n",
        "tests/test_fakes.py": "from pkg.testing.fakes import fake\n",
    }
    project = project_of(files)
    assert {f.relpath: f.is_test for f in project.files if "test" in f.relpath} == {
        "pkg/testing/__init__.py": True, "pkg/testing/fakes.py": False, "tests/test_fakes.py": True,
    }
    assert project_of(files, LintSettings(lint_tests=True)).files[-1].is_test is False


def test_rewrites_after_the_owner_are_followed_through_the_call_graph() -> None:
    files = {
        "t/__init__.py": "",
        "t/mm.py": "def expand(d):\n    d['total_lengths'] = [n + 1 for n in d['total_lengths']]\n",
        "t/prep.py": "from t.mm import expand\n\ndef prepare(d):\n    expand(d)\n",
        "t/actor.py": (
            "from t.data import get_rollout_data\nfrom t.prep import prepare\n\n"
            "def step(args, ref):\n    d = get_rollout_data(args, ref)\n    prepare(d)\n    return d\n"
        ),
        "t/data.py": ("def get_rollout_data(args, ref):\n"
                      "    ref['max_seq_lens'] = [-(-t // 128) * 128 for t in ref['total_lengths']]\n    return ref\n"),
    }
    project = project_of(files)
    mm = next(i for i, f in enumerate(project.files) if f.relpath == "t/mm.py")
    [stale] = list(FileQueries(project, mm).stale_rewrites())
    caller, call = stale.via
    # two calls up: `step` wrote the source (it called the owner) before it called `prepare`
    assert project.function(caller).qualname == "step" and call.callee.endswith("prepare")


def test_a_test_that_runs_a_rewrite_after_the_owner_is_neither_evidence_nor_read() -> None:
    """A test's call order is not the trainer's: the project never reads a test in full to find
    callers of an undecided rewrite (a pre-commit or cold run would pay for every test that names it)."""
    files = {
        "t/__init__.py": "",
        "t/mm.py": "def expand(d):\n    d['total_lengths'] = [n + 1 for n in d['total_lengths']]\n",
        "t/data.py": ("def get_rollout_data(args, ref):\n"
                      "    ref['max_seq_lens'] = [-(-t // 128) * 128 for t in ref['total_lengths']]\n    return ref\n"),
        "tests/test_mm.py": ("from t.data import get_rollout_data\nfrom t.mm import expand\n\n"
                             "def test_expand(args, ref):\n    d = get_rollout_data(args, ref)\n    expand(d)\n"),
    }
    entries = [
        ProjectFile(name, name, module_name_of(name), text, checked=True, rules=tuple(all_rules()),
                    is_package=name.endswith("__init__.py"), light=name.startswith("tests/"))
        for name, text in files.items()
    ]
    analyses, project = analyse_project(entries, LintSettings(), all_rules=list(all_rules()))
    test = project.files[-1]
    assert test.is_test and not test.facts.extracted
    assert not project.callers_of(next(ref for ref, f in project.functions() if f.qualname == "expand"))
    assert [f.rule for f in analyses["t/mm.py"].findings] == []


def test_kernel_and_model_code_owns_its_own_geometry() -> None:
    files = {
        "k.py": "import triton\n\ndef pad(seq_len, cp_size):\n    return (-seq_len) % (2 * cp_size)\n",
        "m.py": ("class Attn(nn.Module):\n    def forward(self, x, cu_seqlens):\n"
                 "        cu_seqlens = x.new_zeros(3)\n        return x\n"),
    }
    project = project_of(files)
    assert project.owners == {}
    assert all(project.owns(ref) for ref, f in project.functions() if ref[1])


# ---------------------------------------------------------------- runs


def test_a_one_file_run_reads_the_other_files_facts_from_the_cache(tmp_path, monkeypatch) -> None:
    write_tree(tmp_path, APPENDIX)
    loaded = resolve_config(["."], cwd=tmp_path)
    full = run(["."], cwd=tmp_path, loaded=loaded, jobs=1)
    assert {(f.path, f.rule) for f in full.findings} == {("trainer/mm.py", "lengths-mutated-after-owner")}
    import layoutcheck.model.extract as extract_module

    parsed: list[str] = []
    real = extract_module.extract

    def counting(source, settings, memo=None):  # a one-file run passes the file's function records
        parsed.append(source.split("\n", 1)[0])
        return real(source, settings, memo)

    monkeypatch.setattr(extract_module, "extract", counting)
    (tmp_path / "trainer" / "mm.py").write_text(
        "def expand_in_place(rollout_data):\n    rollout_data['total_lengths'] = list(rollout_data['total_lengths'])\n"
        "    rollout_data['total_lengths'][0] += 1\n")
    one = run(["trainer/mm.py"], cwd=tmp_path, loaded=resolve_config(["trainer/mm.py"], cwd=tmp_path), jobs=1)
    assert len(parsed) == 1  # only the changed file: the rest of `trainer/` came from the cache
    # ...and its findings still know who calls it, after the owner.
    assert [(f.path, f.line) for f in one.findings] == [("trainer/mm.py", 3)]
    assert "`get_batch` (trainer/data.py:20) calls `expand_in_place`" in one.findings[0].message, one.findings
    parsed.clear()
    cold = run(["trainer/mm.py"], cwd=tmp_path, loaded=resolve_config(["trainer/mm.py"], cwd=tmp_path), jobs=1,
               use_cache=False)
    assert cold.findings == one.findings
    assert len(parsed) < len(APPENDIX) - 1  # only the files whose text the model needs (not `__init__`, tests)


def test_a_warm_run_finds_what_a_cold_run_finds_when_one_file_changed(tmp_path) -> None:
    # The other files' facts come from the cache with their calls still a string: every question
    # the project asks about a function (helpers found by use, callers, spaces) must decode them.
    import shutil

    shutil.copytree(ROOT / "fixtures" / "minitrainer", tmp_path / "minitrainer",
                    ignore=shutil.ignore_patterns("__pycache__"))

    def findings(use_cache: bool) -> list[tuple[str, int, str]]:
        done = run(["minitrainer"], cwd=tmp_path, loaded=resolve_config(["minitrainer"], cwd=tmp_path), jobs=1,
                   use_cache=use_cache)
        return sorted((f.path, f.line, f.rule) for f in done.findings)

    cold = findings(True)
    assert ("minitrainer/data.py", 193, "cp-helper-without-geometry") in cold  # a helper of cp_utils.py
    with (tmp_path / "minitrainer" / "data.py").open("a") as out:
        out.write("# edited\n")
    assert findings(True) == cold
    assert findings(False) == cold


# ---------------------------------------------------------------- `layoutcheck model`


def model_command(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "layoutcheck", "model", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_model_command_prints_owners_sources_and_helper_signatures(tmp_path) -> None:
    write_tree(tmp_path, APPENDIX)
    done = model_command("--output-format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["files"], data["tests_and_benchmarks_left_out"]) == (5, 1)
    fields = {f["name"]: [(s["space"], s.get("function"), s.get("line")) for s in f["spaces"]] for f in data["fields"]}
    assert fields["max_seq_lens"] == [("each sample's padded length P", "get_rollout_data", 11)]
    assert fields["cu_seqlens"] == [("cumulative lengths of a packed batch", "get_batch", 35)]
    assert [(o["function"], o["why"]) for o in data["owners"]["bshd"]] == [
        ("get_rollout_data", "writes each sample's padded length to `max_seq_lens`")]
    assert [(o["function"], o["units"]) for o in data["owners"]["thd"]] == [("get_batch", ["pad_multiplier"])]
    helpers = {h["name"]: h for h in data["cp_helpers"]}
    assert helpers["slice_with_cp"]["signature"] == (
        'slice_with_cp(tokens, pad_value, qkv_format="thd", max_seq_len=None, parallel_state=None)')
    assert helpers["slice_with_cp"]["layout_param"] == {"name": "qkv_format", "position": 2, "default": '"thd"'}
    assert helpers["slice_with_cp"]["defined_at"] == {"path": "trainer/cp_utils.py", "line": 8}
    assert {(w["parameter"], w["space"], w["line"]) for w in helpers["slice_with_cp"]["why"]} == {
        ("qkv_format", "layout kind", 8), ("max_seq_len", "padded length P (parameter)", 9)}
    assert [r["function"] for r in data["stale_rewrites"]] == ["expand_in_place"]
    spaces = {f["function"]: {(e["subject"], e["space"]) for e in f["spaces"]} for f in data["functions"]}
    assert ("cu_seqlens", "cumulative lengths (packed stream)") in spaces["get_batch"]
    assert ("stream", "packed stream") in spaces["get_batch"]
    text = model_command(cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "bshd: get_rollout_data (trainer/data.py:8): writes each sample's padded length to `max_seq_lens`" in text.stdout
    assert ("slice_log_prob_with_cp(log_prob, total_length, response_length, qkv_format=\"thd\", "
            "max_token_len=None)\n      defined at trainer/cp_utils.py:13; layout kind `qkv_format` (position 3); "
            "padded length `max_token_len` (position 4)") in text.stdout
    assert "  get_batch (trainer/data.py:20)\n" in text.stdout  # spaces by function, each with its line


def test_model_command_reports_a_missing_path_and_a_bad_config(tmp_path) -> None:
    done = model_command("nowhere", cwd=tmp_path)
    assert done.returncode == 2 and "nowhere: no such file or directory" in done.stderr
    (tmp_path / "layoutcheck.toml").write_text("bucket-quantum = 0\n")
    done = model_command(cwd=tmp_path)
    assert done.returncode == 2 and "bucket-quantum" in done.stderr


# The reference pipeline, against docs/design.md#a-real-data-path-miles signatures (issue 11's "done when").
APPENDIX_SIGNATURES = {
    "get_logits_and_tokens_offset_with_cp": (
        'get_logits_and_tokens_offset_with_cp(total_length, response_length, qkv_format="thd", max_seq_len=None, '
        "cp_rank=None, cp_size=None)",
        {"name": "qkv_format", "position": 2, "default": '"thd"'}, {"name": "max_seq_len", "position": 3},
    ),
    "slice_with_cp": (
        'slice_with_cp(tokens, pad_value, qkv_format="thd", max_seq_len=None, parallel_state=None)',
        {"name": "qkv_format", "position": 2, "default": '"thd"'}, {"name": "max_seq_len", "position": 3},
    ),
    "slice_log_prob_with_cp": (
        'slice_log_prob_with_cp(log_prob, total_length, response_length, qkv_format="thd", max_token_len=None)',
        {"name": "qkv_format", "position": 3, "default": '"thd"'}, {"name": "max_token_len", "position": 4},
    ),
}


def _pipeline_matches_the_appendix() -> bool:
    """Has the reference pipeline's rewrite to the appendix signatures landed (branch `pipeline`)?"""
    source = (ROOT / "fixtures" / "minitrainer" / "cp_utils.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == "slice_with_cp":
            return [a.arg for a in node.args.args] == ["tokens", "pad_value", "qkv_format", "max_seq_len",
                                                       "parallel_state"]
    return False


@pytest.mark.xfail(not _pipeline_matches_the_appendix(), strict=True,
                   reason="fixtures/minitrainer is being rewritten to docs/design.md#a-real-data-path-miles signatures (branch pipeline)")
def test_model_of_the_reference_pipeline_matches_the_appendix() -> None:
    done = model_command("fixtures/minitrainer", "--output-format", "json", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    owners = {layout: [(o["function"], o["path"]) for o in found] for layout, found in data["owners"].items()}
    assert owners["bshd"] == [("get_rollout_data", "fixtures/minitrainer/data.py")]
    assert owners["thd"] == [("get_batch", "fixtures/minitrainer/data.py")]
    fields = {f["name"]: [s.get("function") for s in f["spaces"]] for f in data["fields"]}
    assert fields["max_seq_lens"] == ["get_rollout_data"] and fields["cu_seqlens"] == ["get_batch"]
    helpers = {h["name"]: h for h in data["cp_helpers"]}
    for name, (signature, layout, padded) in APPENDIX_SIGNATURES.items():
        assert helpers[name]["found"] == "def", name
        assert helpers[name]["defined_at"]["path"] == "fixtures/minitrainer/cp_utils.py"
        assert (helpers[name]["signature"], helpers[name]["layout_param"], helpers[name]["padded_param"]) == (
            signature, layout, padded)


def test_model_shows_the_side_each_field_is_padded_on_and_read_as(tmp_path) -> None:
    """Pad sides come from what the code does: a store at `P - n`, a row read `x[i, :n]` with `n` a
    difference of cumulative offsets (a true length), joined through the field and a call."""
    write_tree(tmp_path, {
        "rollout.py": '''
            import torch


            def routing_tensor(choices, width, real):
                out = torch.zeros(1, width, choices.shape[1])
                start = width - real
                out[0, start : start + real] = choices[:real]
                return out


            def finish(sample, choices, real):
                sample["routing"] = routing_tensor(choices, sample["ids"].shape[1], real)
                return sample
        ''',
        "replay.py": '''
            def align(routing, cu):
                lengths = (cu[1:] - cu[:-1]).tolist()
                return [routing[i, :n] for i, n in enumerate(lengths)]


            def replay(batch, cu):
                return align(batch["routing"], cu)
        ''',
    })
    done = model_command("--output-format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    fields = {f["name"]: [(s["space"], s.get("path"), s.get("line")) for s in f["spaces"]]
              for f in json.loads(done.stdout)["fields"]}
    assert fields["routing"] == [
        ("padded on the left", "rollout.py", 7), ("read as padded on the right", "replay.py", 3)]
    project = project_of({name: (tmp_path / name).read_text() for name in ("rollout.py", "replay.py")})
    [found] = project.sides.disagreements
    assert (found.field, found.place.side, found.place.span[0]) == ("routing", "left", 7)
    assert "read on the right at replay.py:3" in found.other


def test_a_tuple_a_helper_returns_is_read_element_by_element_in_another_module() -> None:
    """`_, p = helper(...)`, `n, _ = helper(...)` and `helper(...)[1]`: each local holds what the
    helper returns at its position (the summary by element), through an import."""
    project = project_of({
        "trainer/__init__.py": "",
        "trainer/sizes.py": '''
            def sizes(response, unit):
                n = response.size(0)
                return n, (n + unit - 1) // unit * unit
        ''',
        "trainer/batch.py": '''
            from trainer.sizes import sizes

            def build(d, response, unit):
                _, padded = sizes(response, unit)
                true, _ = sizes(response, unit)
                d["padded_a"] = padded
                d["padded_b"] = sizes(response, unit)[1]
                d["true_a"] = true
                d["true_b"] = sizes(response, unit)[0]
        ''',
    })
    ref = next(r for r, f in project.functions() if f.qualname == "build")
    pad = int(Tag.PAD)
    held = {w.key: bool(w.tags & pad) for w in project.writes(ref)}
    assert held == {"padded_a": True, "padded_b": True, "true_a": False, "true_b": False}
    sizes = project.function(next(r for r, f in project.functions() if f.qualname == "sizes"))
    assert len(sizes.returns_elements) == 2 and not sizes.returns_elements[0][0] & pad


def test_an_element_computed_from_a_parameter_holds_what_the_caller_passes() -> None:
    """`return ids, width` with `width` a parameter: `_, w = helper(ids, padded)` is the padded length
    this caller passes, and a caller passing a true length gets no padded length."""
    project = project_of({
        "trainer/__init__.py": "",
        "trainer/rows.py": '''
            def with_width(ids, width):
                return ids, width
        ''',
        "trainer/batch.py": '''
            from trainer.rows import with_width

            def padded(d, ids, n, unit):
                _, w = with_width(ids, (n + unit - 1) // unit * unit)
                d["padded"] = w

            def true(d, ids, n):
                _, w = with_width(ids, n)
                d["true"] = w
        ''',
    })
    pad = int(Tag.PAD)
    held = {w.key: bool(w.tags & pad) for ref, _ in project.functions() for w in project.writes(ref)}
    assert held == {"padded": True, "true": False}


_UNDER_ANOTHER_NAME = {
    "assigned onto another module's class": ({
        "cp_utils.py": "def chunk_offsets(owner, total):\n    return total\n",
        "loss.py": "class Loss:\n    def local(self, total):\n        return self.offsets(total)\n",
        "patch.py": "from loss import Loss\nfrom cp_utils import chunk_offsets\n\nLoss.offsets = chunk_offsets\n",
    }, "chunk_offsets", "Loss.local"),
    "collate_fn of a loader looped over in another module": ({
        "data.py": "def collate(items):\n    return items[0]\n",
        "main.py": ("from torch.utils.data import DataLoader\nfrom data import collate\nfrom trainer import Trainer\n\n"
                    "def main(ds):\n    loader = DataLoader(ds, batch_size=1, collate_fn=collate)\n"
                    "    return Trainer(loader).fit()\n"),
        "trainer.py": ("class Trainer:\n    def __init__(self, loader):\n        self.train_loader = loader\n\n"
                       "    def fit(self):\n        out = []\n        for batch in self.train_loader:\n"
                       "            out.append(batch)\n        return out\n"),
    }, "collate", "Trainer.fit"),
}


@pytest.mark.parametrize("case", list(_UNDER_ANOTHER_NAME), ids=list(_UNDER_ANOTHER_NAME))
def test_callers_of_finds_a_call_that_reaches_a_def_under_another_name(case: str) -> None:
    """`self.offsets(t)` reaches `chunk_offsets` (assigned onto the class in a third module), and a loop over a
    loader handed to a constructor reaches the loader's `collate_fn`: the one-file query `callers_of` (and
    `functions_calling` with `target_names`, which warm runs filter cached files by) finds what resolving
    every call of the project (`callers`) finds."""
    files, target, caller = _UNDER_ANOTHER_NAME[case]
    project = project_of(files)
    ref = next(r for r, f in project.defs() if f.qualname == target)
    found = [project.signature(c).qualname for c, _ in project.callers_of(ref)]
    assert caller in found
    assert [project.signature(c).qualname for c, _ in project.callers.get(ref, [])] == found
    # `functions_calling` skips a cached file none of whose calls' last names is among these
    names = project.target_names([ref])
    assert {call.callee.rsplit(".", 1)[-1] for _, call in project.callers[ref]} <= names


_PATCHED_EXPANDER = {
    "trainer/__init__.py": "",
    "trainer/owner.py": '''
        def get_rollout_data(args, ref):
            data = dict(ref.data)
            unit = args.tp_size
            data["max_seq_lens"] = [(t + unit - 1) // unit * unit for t in data["total_lengths"]]
            return data
    ''',
    "trainer/mm.py": '''
        def expand_in_place(owner, rollout_data):
            rollout_data["total_lengths"] = [n + 1 for n in rollout_data["total_lengths"]]
    ''',
    "trainer/loader.py": '''
        class Loader:
            def get_batch(self, data_iterator):
                batch = data_iterator.get_next(["tokens"])
                self.expand(batch)
                lens = batch["max_seq_lens"]
                assert len(set(lens)) == 1
                return lens
    ''',
    "trainer/patch.py": '''
        from .loader import Loader
        from .mm import expand_in_place

        setattr(Loader, "expand", expand_in_place)
    ''',
}


def test_a_rewrite_reached_as_a_method_assigned_in_another_module_runs_after_the_owner(tmp_path: Path) -> None:
    """`expand_in_place` (mm.py) rewrites `total_lengths`; patch.py puts it onto `Loader` as `expand`, and
    `Loader.get_batch` calls `self.expand(batch)` then reads the padded `max_seq_lens`: LC105 names that
    caller (found by `callers_of` under the assigned name), cold and from the cache."""
    write_tree(tmp_path, _PATCHED_EXPANDER)
    loaded = resolve_config(["."], cwd=tmp_path)
    for _ in ("cold", "warm"):
        found = run(["."], cwd=tmp_path, loaded=loaded, jobs=1).findings
        assert [(f.path, f.line, f.rule) for f in found] == [("trainer/mm.py", 2, "lengths-mutated-after-owner")]
        assert "`Loader.get_batch` (trainer/loader.py:2) calls `expand_in_place`" in found[0].message


_PACKERS = {
    "a record's field, in the loop": (
        'pack = {"labels": [], "lengths": []}\n    for sample in samples:\n'
        '        pack["labels"] += sample["labels"]\n        pack["lengths"] += [len(sample["labels"])]\n'
        '    return pack'),
    "append, then cat": (
        'rows, lengths = [], []\n    for sample in samples:\n        rows.append(sample["labels"])\n'
        '        lengths.append(len(sample["labels"]))\n'
        '    return {"labels": torch.cat(rows), "lengths": torch.tensor(lengths)}'),
    "+= [x] through enumerate, stored through a local": (
        'rows = []\n    ends = [0]\n    for i, sample in enumerate(samples):\n        rows += [sample["labels"]]\n'
        '        ends.append(ends[-1] + sample["labels"].numel())\n    labels = torch.cat(rows, dim=0)\n'
        '    out = {}\n    out["labels"] = labels\n    out["cu_seqlens"] = torch.tensor(ends)\n    return out'),
    "extend, stored as is": (
        'rows, sizes = [], []\n    for sample in samples:\n        rows.extend(sample["labels"])\n'
        '        sizes += [len(sample["labels"])]\n    return {"labels": rows, "sizes": sizes}'),
    "comprehensions": (
        'labels = torch.cat([s["labels"] for s in samples])\n'
        '    return {"labels": labels, "lengths": [len(s["labels"]) for s in samples]}'),
}


@pytest.mark.parametrize("body", list(_PACKERS.values()), ids=list(_PACKERS))
def test_a_packer_is_read_however_it_collects_its_samples(body: str) -> None:
    """A field a loop packs samples into, with where each sample ends stored beside it: on a record's
    field in the loop, in a local list appended, extended or grown by `+=` then joined and stored, or in
    comprehensions (the loop written as one expression), the field is packed alike (issue 28: a loop
    with `append` is a comprehension)."""
    source = f"import torch\n\n\ndef pack_rows(samples):\n    {body}\n"
    packed = extract(source, LintSettings()).packed_rows[0]
    assert [(field, name) for field, _, _, name in packed] == [("labels", "pack_rows")]


_NOT_PACKERS = {
    "samples given a leading axis (a batch of rows)": (
        'rows, lengths = [], []\n    for sample in samples:\n        rows.append(sample["labels"].unsqueeze(0))\n'
        '        lengths.append(len(sample["labels"]))\n'
        '    return {"labels": torch.cat(rows), "lengths": torch.tensor(lengths)}'),
    "no size of each sample beside it": (
        'rows, ids = [], []\n    for sample in samples:\n        rows.append(sample["labels"])\n'
        '        ids.append(sample["id"])\n    return {"labels": torch.cat(rows), "ids": ids}'),
    "the sizes of other samples": (
        'rows = []\n    for sample in samples:\n        rows.append(sample["labels"])\n'
        '    return {"labels": torch.cat(rows), "lengths": [len(o) for o in samples[1:]]}'),
    "the sizes stored in another record": (
        'labels = torch.cat([s["labels"] for s in samples])\n'
        '    meta = {"lengths": [len(s["labels"]) for s in samples]}\n    return {"labels": labels}, meta'),
}


@pytest.mark.parametrize("body", list(_NOT_PACKERS.values()), ids=list(_NOT_PACKERS))
def test_a_join_without_each_samples_end_beside_it_packs_nothing(body: str) -> None:
    """Samples joined into a batch of rows, or joined with nothing recording where each one ends in the
    same record: not a packer."""
    source = f"import torch\n\n\ndef pack_rows(samples):\n    {body}\n"
    assert extract(source, LintSettings()).packed_rows[0] == ()
