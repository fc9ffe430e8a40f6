"""Function summaries across modules, and call sites read through their callee (issue 28, point 2).

Each case is a small project of real files linted as a new user would (no
configuration, every rule, `--preview`): a helper in one module, its caller in
another, written the ways trainers write them.
"""

from __future__ import annotations

import ast
import contextlib
import textwrap
from pathlib import Path

import pytest

from layoutcheck.configfile import TABLE, LoadedConfig
from layoutcheck.lint.engine import ProjectFile, analyse_project, module_name_of
from layoutcheck.lint.registry import all_rules
from layoutcheck.lint.runner import run
from layoutcheck.lint.selection import SelectionOverrides
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.calls import read_calls_through
from layoutcheck.model.project import FileModel, Project
from linttree import lint_files
from renaming import rename_project

_HELPER = '''
def chunk_offsets(total, response, rank, size):
    prompt = total - response
    step = (total + 2 * size - 1) // (2 * size)
    head = (rank * step, (rank + 1) * step)
    tail = ((2 * size - rank - 1) * step, (2 * size - rank) * step)
    logits_0 = (max(head[0], prompt - 1), min(head[1], total - 1))
    logits_1 = (max(tail[0], prompt - 1), min(tail[1], total - 1))
    {first}
    {second}
    return step, (head, tail), (logits_0, logits_1), (token_0, token_1)
'''
_EMPTY_AS_ZERO = (
    ("if logits_0[0] < logits_0[1]:\n        token_0 = (logits_0[0] + 1, logits_0[1] + 1)\n"
     "    else:\n        token_0 = (0, 0)"),
    ("if logits_1[0] < logits_1[1]:\n        token_1 = (logits_1[0] + 1, logits_1[1] + 1)\n"
     "    else:\n        token_1 = (0, 0)"),
)
_ALWAYS_CLAMPED = ("token_0 = (logits_0[0] + 1, logits_0[1] + 1)", "token_1 = (logits_1[0] + 1, logits_1[1] + 1)")

_CALLER = '''
import torch
from cp_utils import chunk_offsets


def local_masks(loss_masks, totals, responses, rank, size):
    chunks = []
    for i in range(len(loss_masks)):
        full = loss_masks[i]
        total, response, prompt = totals[i], responses[i], totals[i] - responses[i]
        {call}
        s0, e0 = {bounds0}
        s1, e1 = {bounds1}
        chunks.append(torch.cat([full[s0:e0], full[s1:e1]]))
    return torch.cat(chunks)
'''
_UNPACKED = "_, _, _, offs = chunk_offsets(total, response, rank, size)"
_PARTIAL = "offsets_of = functools.partial(chunk_offsets, rank=rank, size=size)\n        _, _, _, offs = offsets_of(total, response)"
_RAW = ("offs[0][0] - prompt, offs[0][1] - prompt", "offs[1][0] - prompt, offs[1][1] - prompt")
_ACROSS = ("offs[0][0] - prompt, offs[1][1] - prompt", "offs[1][0] - prompt, offs[1][1] - prompt")
"""The first window runs from the front chunk's start to the back chunk's end: where the front chunk is
`(0, 0)` and the back one is not, its start is `-prompt` and its end is not (a wrong window)."""
_CLAMPED = ("max(0, offs[0][0] - prompt), max(0, offs[0][1] - prompt)",
            "max(0, offs[1][0] - prompt), max(0, offs[1][1] - prompt)")


def _lint(tmp_path: Path, files: dict[str, str]) -> list[tuple[str, int, str]]:
    return sorted((Path(f.path).name, f.line, f.rule) for f in lint_files(tmp_path, files))


def _project(helper: tuple[str, str], call: str, bounds: tuple[str, str]) -> dict[str, str]:
    caller = _CALLER.format(call=call, bounds0=bounds[0], bounds1=bounds[1])
    if "functools" in call:
        caller = "import functools\n" + caller
    return {"cp_utils.py": _HELPER.format(first=helper[0], second=helper[1]), "loss.py": caller}


def _moved(found: list[tuple[str, int, str]]) -> list[tuple[str, str]]:
    return [(name, rule) for name, _, rule in found if rule == "positions-in-another-space"]


@pytest.mark.parametrize("call", [_UNPACKED, _PARTIAL], ids=["unpacked", "through functools.partial"])
def test_positions_a_helper_returns_as_zero_on_one_path_are_judged_at_the_caller(tmp_path: Path, call: str) -> None:
    """The helper clamps chunk offsets on one path and returns `(0, 0)` on the other; the caller in
    another module moves them to the response's origin unclamped. The helper's summary
    (`Function.zero_elements`) says which element is unclamped on a path, so the caller's window whose
    ends come from two pairs is flagged; the window of one pair is not (`x[-p:-p]` is empty, as the
    empty chunk's slice should be: thudm/slime afda55394's parent, read, slices so)."""
    files = _project(_EMPTY_AS_ZERO, call, _ACROSS)
    window = next(i for i, line in enumerate(files["loss.py"].splitlines(), 1) if "full[s0:e0]" in line)
    found = _lint(tmp_path, files)
    assert [(name, line) for name, line, rule in found if rule == "positions-in-another-space"] == [
        ("loss.py", window)], found
    assert _moved(_lint(tmp_path / "pairs", _project(_EMPTY_AS_ZERO, call, _RAW))) == []


@pytest.mark.parametrize(("helper", "call", "bounds"), [
    (_ALWAYS_CLAMPED, _UNPACKED, _ACROSS), (_ALWAYS_CLAMPED, _PARTIAL, _ACROSS), (_EMPTY_AS_ZERO, _UNPACKED, _CLAMPED),
], ids=["helper clamps on every path", "through functools.partial", "caller clamps"])
def test_positions_clamped_on_every_path_are_not_flagged(tmp_path: Path, helper: tuple[str, str], call: str,
                                                         bounds: tuple[str, str]) -> None:
    """A helper's clamp is its own to judge, reached however it is called (a partial of it included:
    a call of an unknown function would be flagged, its clamp unseen)."""
    assert _moved(_lint(tmp_path, _project(helper, call, bounds))) == []


def test_a_helper_projected_for_its_own_module_keeps_its_tuple_for_other_modules(tmp_path: Path) -> None:
    """The helper's own module takes one element of its result (read there as returning that element);
    a caller in another module takes another element, and still reads that element's summary."""
    files = _project(_EMPTY_AS_ZERO, _UNPACKED, _ACROSS)
    files["cp_utils.py"] += "\n\ndef chunk_size(total, response, rank, size):\n" \
                            "    step, _, _, _ = chunk_offsets(total, response, rank, size)\n    return step\n"
    assert _moved(_lint(tmp_path, files)) == [("loss.py", "positions-in-another-space")]


def test_a_helper_and_its_caller_in_one_module_are_judged_without_error(tmp_path: Path) -> None:
    """Helper and caller in one module (thudm/slime's `cp_utils.py` before afda55394): the module reads
    the helper as returning the one element its callers take, so the window's positions are the whole
    result of a call, not an element of it; the rule judged them as an element and crashed (`None >= 0`)
    on a whole-tree run, which checks that file. Now it runs: the window of one pair stays silent."""
    files = _project(_EMPTY_AS_ZERO, _UNPACKED, _RAW)
    caller = files.pop("loss.py").replace("from cp_utils import chunk_offsets\n", "")
    files["cp_utils.py"] += caller
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "cp_utils.py").write_text(files["cp_utils.py"])
    loaded = LoadedConfig(None, tmp_path, {}, TABLE)
    result = run([tmp_path], cwd=tmp_path, use_cache=False, jobs=1, loaded=loaded,
                 overrides=SelectionOverrides(preview=True))
    assert not result.errors, [e.message for e in result.errors]
    assert _moved(sorted((Path(f.path).name, f.line, f.rule) for f in result.findings)) == []


def _read(source: str) -> str:
    tree = ast.parse(source)
    return ast.unparse(read_calls_through(tree, source))


def test_a_tuple_return_every_caller_takes_one_element_of_reads_as_that_element() -> None:
    source = (
        "def f(x):\n    return None, x[:, 1:]\n\n"
        "def g(y):\n    _, a = f(y)\n    return a\n\n"
        "def h(y):\n    return f(y)[1] * 2\n"
    )
    assert _read(source) == (
        "def f(x):\n    return x[:, 1:]\n\n"
        "def g(y):\n    a = f(y)\n    return a\n\n"
        "def h(y):\n    return f(y) * 2"
    )


@pytest.mark.parametrize("callers", [
    "def g(y):\n    a, b = f(y)\n    return a + b\n",  # both elements read
    "def g(y):\n    _, a = f(y)\n    return f(y)[0] + a\n",  # different elements
    "def g(y):\n    return f(y)\n",  # the whole tuple
    "def g(y):\n    return map(f, y)\n",  # passed on
], ids=["both read", "two elements", "whole", "passed on"])
def test_a_tuple_return_read_otherwise_is_left_as_is(callers: str) -> None:
    source = "def f(x):\n    return x, x[:, 1:]\n\n" + callers
    assert _read(source) == ast.unparse(ast.parse(source))


def test_a_partial_call_reads_as_the_call_it_stands_for() -> None:
    source = (
        "import functools\n\n"
        "def pad(rows, side='left', fill=0):\n    return rows\n\n"
        "def collate(items):\n    right = functools.partial(pad, side='right')\n"
        "    return right(items, fill=1), right(items, side='left')\n"
    )
    assert _read(source).splitlines()[-1] == (
        "    return (pad(items, side='right', fill=1), pad(items, side='left'))"
    )


_PAIRS = (Path(__file__).resolve().parents[1] / "fixtures" / "lint" / "corpus" / "openrlhf_a32a7322_pair_rows_left_padded"
          / "before.py").read_text().split("def policy_pair_masks")[0]
"""Preference rows padded on the left by a collate method (OpenRLHF a32a7322), and a loss that hides each
row's prompt from its start."""

_LOOPS = {
    "local loader": '''
def policy_pair_masks(pairs: PreferencePairs, items: list):
    loader = DataLoader(items, batch_size=2, collate_fn=pairs.collate)
    out = []
    for good, good_mask, bad, bad_mask, sizes in loader:
        out.append((hide_questions(good_mask, sizes), hide_questions(bad_mask, sizes)))
    return out
''',
    "loader stored on the trainer, enumerated": '''
class Trainer:
    def __init__(self, pairs: PreferencePairs, items: list):
        self.loader = DataLoader(items, batch_size=2, collate_fn=pairs.collate)

    def fit(self):
        out = []
        for step, (good, good_mask, bad, bad_mask, sizes) in enumerate(self.loader):
            out.append((step, hide_questions(good_mask, sizes), hide_questions(bad_mask, sizes)))
        return out
''',
    "collate_fn=functools.partial": '''
def policy_pair_masks(pairs: PreferencePairs, items: list):
    loader = DataLoader(items, batch_size=2, collate_fn=functools.partial(PreferencePairs.collate, pairs))
    out = []
    for good, good_mask, bad, bad_mask, sizes in loader:
        out.append((hide_questions(good_mask, sizes), hide_questions(bad_mask, sizes)))
    return out
''',
}


@pytest.mark.parametrize("loop", list(_LOOPS), ids=list(_LOOPS))
@pytest.mark.parametrize("side", ["left", "right"])
def test_a_loop_over_a_dataloader_binds_what_its_collate_function_returns(tmp_path: Path, loop: str, side: str) -> None:
    """`for batch in DataLoader(..., collate_fn=f)` binds `f`'s result: the rows the collate method pads
    on the left meet the loss that reads each row from its start (pad-sides-disagree); padded on the
    right, nothing is flagged."""
    source = _PAIRS.replace('side: str = "left"', f'side: str = "{side}"') + \
        "import functools\nfrom torch.utils.data import DataLoader\n" + _LOOPS[loop]
    found = [rule for _, _, rule in _lint(tmp_path, {"dpo.py": source})]
    assert found == (["pad-sides-disagree"] * 2 if side == "left" else []), found


_ASSIGNED = '''
import torch


def targets(self, ids):
    return ids[:, 1:]


class Head:
    def loss(self, ids, logits, mask):
        labels = self.shift(ids)
        return (logits * labels).sum() * mask[:, 1:]


Head.shift = targets
'''


def test_a_function_assigned_onto_a_class_is_called_through_its_instance() -> None:
    """`Cls.name = f`, then `self.name(x)` in a method: the call is `f(self, x)`."""
    assert "labels = targets(self, ids)" in _read(_ASSIGNED)


def test_a_helper_assigned_onto_a_class_is_reached_through_the_instance(tmp_path: Path) -> None:
    """`Loss.offsets = chunk_offsets`, then `self.offsets(...)`: the positions are the helper's, which clamps
    them on every path (silent); a call of an unknown method would be flagged, its clamp unseen."""
    helper = _HELPER.format(first=_ALWAYS_CLAMPED[0], second=_ALWAYS_CLAMPED[1]).replace(
        "def chunk_offsets(total,", "def chunk_offsets(owner, total,")
    caller = '''
import torch


class Loss:
    def local_masks(self, loss_masks, totals, responses, rank, size):
        chunks = []
        for i in range(len(loss_masks)):
            full = loss_masks[i]
            total, response, prompt = totals[i], responses[i], totals[i] - responses[i]
            _, _, _, offs = self.offsets(total, response, rank, size)
            chunks.append(full[offs[0][0] - prompt : offs[1][1] - prompt])
        return torch.cat(chunks)
'''
    assigned = helper + caller + "\n\nLoss.offsets = chunk_offsets\n"
    assert _moved(_lint(tmp_path / "assigned", {"loss.py": assigned})) == []
    assert _moved(_lint(tmp_path / "unknown", {"loss.py": helper + caller})) == [("loss.py", "positions-in-another-space")]


_PAD_SIDES = Path(__file__).resolve().parents[1] / "fixtures" / "lint" / "pairs" / "d7b_pad_sides" / "flagged"
"""Routing rows placed on the left by one module (`rollout.py`), stored as a record's field by a helper
that takes them as a parameter, and read from each row's start by another module (`replay.py`)."""

_FORWARDS = {
    "**kwargs": ("finish(sample, routing=routing)", "def finish(sample, **kwargs):\n    return attach_routing(sample, **kwargs)"),
    "*args, **kwargs": ("finish(sample, routing)", "def finish(*args, **kwargs):\n    return attach_routing(*args, **kwargs)"),
    "*args after a positional": ("finish(sample, routing)", "def finish(sample, *rest):\n    return attach_routing(sample, *rest)"),
    "two wrappers": ("outer(sample, routing=routing)",
                     "def outer(sample, **options):\n    return finish(sample, **options)\n\n\n"
                     "def finish(sample, **kwargs):\n    return attach_routing(sample, **kwargs)"),
}


@pytest.mark.parametrize("across", [False, True], ids=["one module", "wrapper in another module"])
@pytest.mark.parametrize("forward", list(_FORWARDS), ids=list(_FORWARDS))
def test_arguments_forwarded_through_args_and_kwargs_reach_the_callee(tmp_path: Path, forward: str,
                                                                      across: bool) -> None:
    """`def finish(sample, **kwargs): return attach_routing(sample, **kwargs)`, called `finish(sample,
    routing=routing)`: the helper's `routing` parameter receives the caller's left-padded rows, as it does
    when called directly (pad-sides-disagree where they are placed); a wrapper's caller that names
    the keyword, positions forwarded through `*args`, and a forward of a forward alike."""
    call, wrapper = _FORWARDS[forward]
    rollout = (_PAD_SIDES / "rollout.py").read_text()
    direct = "    return attach_routing(sample, routing)"
    assert direct in rollout
    rollout = rollout.replace(direct, f"    return {call}")
    placed = next(i for i, line in enumerate(rollout.splitlines(), 1) if "expect: pad-sides-disagree" in line)
    files = {"replay.py": (_PAD_SIDES / "replay.py").read_text()}
    if across:
        files["rollout.py"] = f"from wrappers import {call.split('(')[0]}\n" + rollout
        files["wrappers.py"] = "from rollout import attach_routing\n\n\n" + wrapper + "\n"
        placed += 1
    else:
        files["rollout.py"] = rollout + "\n\n" + wrapper + "\n"
    assert _lint(tmp_path, files) == [("rollout.py", placed, "pad-sides-disagree")]


def test_a_wrapper_that_takes_the_keyword_itself_forwards_nothing(tmp_path: Path) -> None:
    """The wrapper names `routing` as its own parameter and passes something else on: the caller's rows
    never reach the helper (silent)."""
    rollout = (_PAD_SIDES / "rollout.py").read_text().replace(
        "    return attach_routing(sample, routing)", "    return finish(sample, routing=routing)")
    rollout += "\n\ndef finish(sample, routing=None, **kwargs):\n    return attach_routing(sample, None, **kwargs)\n"
    assert _lint(tmp_path, {"replay.py": (_PAD_SIDES / "replay.py").read_text(), "rollout.py": rollout}) == []


_PATCHES = {
    "Cls.name = f": "from loss import Loss\nfrom cp_utils import chunk_offsets\n\nLoss.offsets = chunk_offsets\n",
    "mod.Cls.name = f in a function": ("import loss\n\n\ndef patch():\n    from cp_utils import chunk_offsets\n"
                                       "    loss.Loss.offsets = chunk_offsets\n"),
    "setattr(Cls, name, f)": ('from loss import Loss\nfrom cp_utils import chunk_offsets\n\n'
                              'setattr(Loss, "offsets", chunk_offsets)\n'),
}


@pytest.mark.parametrize("patch", list(_PATCHES), ids=list(_PATCHES))
def test_a_helper_assigned_onto_another_modules_class_is_reached_through_the_instance(tmp_path: Path,
                                                                                       patch: str) -> None:
    """The class (`loss.py`), the helper (`cp_utils.py`) and the assignment that puts the helper onto the
    class (`patch.py`, as a monkey patch does) are three modules: `self.offsets(...)` in the class is a
    call of the helper, which clamps on every path (silent); a call of an unknown method is flagged."""
    helper = _HELPER.format(first=_ALWAYS_CLAMPED[0], second=_ALWAYS_CLAMPED[1]).replace(
        "def chunk_offsets(total,", "def chunk_offsets(owner, total,")
    caller = '''
import torch


class Loss:
    def local_masks(self, loss_masks, totals, responses, rank, size):
        chunks = []
        for i in range(len(loss_masks)):
            full = loss_masks[i]
            total, response, prompt = totals[i], responses[i], totals[i] - responses[i]
            _, _, _, offs = self.offsets(total, response, rank, size)
            chunks.append(full[offs[0][0] - prompt : offs[1][1] - prompt])
        return torch.cat(chunks)
'''
    files = {"cp_utils.py": helper, "loss.py": caller}
    assert _moved(_lint(tmp_path / "alone", files)) == [("loss.py", "positions-in-another-space")]
    assert _moved(_lint(tmp_path / "patched", {**files, "patch.py": _PATCHES[patch]})) == []


@pytest.mark.parametrize("name, receiver", [("attach", "self"), ("attach_routing", "finisher")],
                         ids=["self", "an instance, under the def's own name"])
def test_a_function_assigned_onto_another_modules_class_binds_its_receiver_first(tmp_path: Path, name: str,
                                                                                 receiver: str) -> None:
    """`def attach_routing(owner, sample, routing)` in one module, assigned onto a class of another
    (`Finisher.attach = attach_routing`), called `self.attach(sample, routing)` or through an instance: the
    receiver fills `owner` (whatever it is called), so `routing` receives the left-padded rows the
    reader takes from each row's start (pad-sides-disagree where they are placed, as with a direct call)."""
    rollout = (_PAD_SIDES / "rollout.py").read_text().split("def attach_routing")[0]
    rollout += ("class Finisher:\n    def finish_sample(self, sample, choices):\n"
                "        routing = routing_tensor(choices, sample[\"input_ids\"], sample[\"attention_mask\"])\n"
                "        finisher = self\n"
                f"        return {receiver}.{name}(sample, routing)\n")
    attach = ("from rollout import Finisher\n\n\ndef attach_routing(owner, sample, routing):\n"
              "    if routing is not None:\n        sample[\"routing\"] = routing\n    return sample\n\n\n"
              f"Finisher.{name} = attach_routing\n")
    placed = next(i for i, line in enumerate(rollout.splitlines(), 1) if "expect: pad-sides-disagree" in line)
    files = {"replay.py": (_PAD_SIDES / "replay.py").read_text(), "rollout.py": rollout, "attach.py": attach}
    assert _lint(tmp_path, files) == [("rollout.py", placed, "pad-sides-disagree")]


@pytest.mark.parametrize("patch", ["Cls.name = f", "setattr(Cls, name, f)"])
def test_a_patch_module_with_no_call_is_read_whichever_rules_run(tmp_path: Path, patch: str) -> None:
    """`patch.py` only imports the class and the helper and assigns one onto the other (no `def`, no call):
    no rule's text prefilter asks for it, yet the link it makes decides the finding. With the one rule
    selected, it is read as with every rule: `routing` reaches `attach_routing` (pad-sides-disagree)."""
    rollout = (_PAD_SIDES / "rollout.py").read_text().split("def attach_routing")[0]
    rollout += ("class Finisher:\n    def finish_sample(self, sample, choices):\n"
                "        routing = routing_tensor(choices, sample[\"input_ids\"], sample[\"attention_mask\"])\n"
                "        return self.attach(sample, routing)\n")
    attach = ("def attach_routing(owner, sample, routing):\n    if routing is not None:\n"
              "        sample[\"routing\"] = routing\n    return sample\n")
    assign = "Finisher.attach = attach_routing\n" if patch == "Cls.name = f" else \
        'setattr(Finisher, "attach", attach_routing)\n'
    placed = next(i for i, line in enumerate(rollout.splitlines(), 1) if "expect: pad-sides-disagree" in line)
    files = {"replay.py": (_PAD_SIDES / "replay.py").read_text(), "rollout.py": rollout, "attach.py": attach,
             "patch.py": "from rollout import Finisher\nfrom attach import attach_routing\n\n" + assign}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    result = run([tmp_path], cwd=tmp_path, use_cache=False, jobs=1, loaded=LoadedConfig(None, tmp_path, {}, TABLE),
                 overrides=SelectionOverrides(preview=True, select=("pad-sides-disagree",)))
    assert not result.errors, result.errors
    assert [(Path(f.path).name, f.line, f.rule) for f in result.findings] == [
        ("rollout.py", placed, "pad-sides-disagree")]


def test_a_script_looping_over_a_dataloader_at_top_level_binds_its_collate_result(tmp_path: Path) -> None:
    """`main.py` is a script: at module level, `for routing in DataLoader(ds, collate_fn=collate):
    consume(...)`, no `def`. Its loop binds what `collate` (`data.py`, rows placed on the left) returns, as a
    loop in a function does, and `consume` (another module) stores it as the field `replay.py` reads from
    each row's start (pad-sides-disagree where `data.py` places the rows)."""
    rollout = (_PAD_SIDES / "rollout.py").read_text().split("def attach_routing")[0]
    placed = next(i for i, line in enumerate(rollout.splitlines(), 1) if "expect: pad-sides-disagree" in line)
    files = {
        "replay.py": (_PAD_SIDES / "replay.py").read_text(),
        "data.py": rollout + _COLLATE,
        "consumer.py": ("from replay import replay_inputs\n\n\ndef consume(routing, cu_seqlens, max_len):\n"
                        "    sample = {}\n    sample[\"routing\"] = routing\n"
                        "    return replay_inputs(sample, cu_seqlens, max_len)\n"),
        "main.py": ("from torch.utils.data import DataLoader\nfrom data import collate\nfrom consumer import consume\n"
                    "from config import ds, cu_seqlens, max_len\n\n"
                    "for routing in DataLoader(ds, collate_fn=collate):\n    consume(routing, cu_seqlens, max_len)\n"),
    }
    assert _lint(tmp_path, files) == [("data.py", placed, "pad-sides-disagree")]


def test_a_call_of_a_forwarder_reads_as_the_call_it_forwards() -> None:
    """`def w(x, **kw): return g(x, **kw)`, then `w(a, k=v)`: the call is `g(a, k=v)`; the positions
    `*args` takes land after the forwarder's own; a missing parameter with a literal default takes it;
    a call that spreads its own `*`/`**`, or passes a keyword the forwarder cannot take, is left as is."""
    source = (
        "def inner(x, cu_seqlens=None, side='left'):\n    return x\n\n"
        "def w(x, **kwargs):\n    '''doc'''\n    return inner(x, **kwargs)\n\n"
        "def v(*args, **kwargs):\n    return inner(*args, **kwargs)\n\n"
        "def u(a, b=1, *rest):\n    return inner(a, *rest, side=b)\n\n"
        "def caller(t, c):\n    return (w(t, cu_seqlens=c), v(t, c, side='right'), u(t), u(t, 2, c), w(*t), u(t, q=1))\n"
    )
    assert _read(source).splitlines()[-1] == (
        "    return (inner(t, cu_seqlens=c), inner(t, c, side='right'), inner(t, side=1), inner(t, c, side=2), "
        "w(*t), u(t, q=1))")


def test_rows_forwarded_through_kwargs_in_one_module_meet_the_reader_of_their_start(tmp_path: Path) -> None:
    """The collate method pads rows on the left; a wrapper forwards `**kwargs` to the function that reads
    each row from its start: pad-sides-disagree, as with the direct call (the per-module reader follows
    the forward); padded on the right, silent."""
    wrapper = '''
def scored(sizes, **kwargs):
    return hide_questions(question_sizes=sizes, **kwargs)


def policy_pair_masks(pairs: PreferencePairs, items: list):
    good, good_mask, bad, bad_mask, sizes = pairs.collate(items)
    return scored(sizes, mask=good_mask)
'''
    for side, expected in (("left", ["pad-sides-disagree"]), ("right", [])):
        source = _PAIRS.replace('side: str = "left"', f'side: str = "{side}"') + wrapper
        assert [rule for _, _, rule in _lint(tmp_path / side, {"dpo.py": source})] == expected


_COLLATE = '''

def collate(items):
    item = items[0]
    return routing_tensor(item["choices"], item["input_ids"], item["attention_mask"])
'''
_BUILDER = '''
from torch.utils.data import DataLoader
from data import collate
from trainer import Trainer


def main(ds, cu_seqlens, max_len):
    loader = DataLoader(ds, batch_size=1{collate})
    return Trainer({passed}, cu_seqlens=cu_seqlens, max_len=max_len).fit()
'''
_TRAINER = '''
from replay import replay_inputs


class Trainer:
    def __init__(self, loader, cu_seqlens, max_len):
        self.train_loader = loader
        self.cu_seqlens = cu_seqlens
        self.max_len = max_len

    def fit(self):
        out = []
        for {target} in {loop}:
            sample = {{}}
            sample["routing"] = routing
            out.append(replay_inputs(sample, self.cu_seqlens, self.max_len))
        return out
'''
_HANDED_ON = {
    "positional": ("loader", "routing", "self.train_loader"),
    "by keyword, enumerated": ("loader=loader", "step, routing", "enumerate(self.train_loader)"),
    "built in the call": ("DataLoader(ds, collate_fn=collate)", "routing", "self.train_loader"),
}


@pytest.mark.parametrize("collate", [True, False], ids=["collate_fn given", "no collate_fn"])
@pytest.mark.parametrize("handed", list(_HANDED_ON), ids=list(_HANDED_ON))
def test_a_loader_passed_to_a_constructor_and_looped_over_in_another_module_binds_its_collate_result(
        tmp_path: Path, handed: str, collate: bool) -> None:
    """`main.py` builds `DataLoader(ds, collate_fn=collate)` (`collate` from `data.py`, which places routing
    rows on the left) and passes it to `Trainer` (`trainer.py`), which stores it on `self` and loops over
    it: the loop binds what `collate` returns, stored as the record's `routing` field that `replay.py`
    reads from each row's start (pad-sides-disagree where `data.py` places the rows). With no
    `collate_fn`, the loop binds nothing known (silent)."""
    passed, target, loop = _HANDED_ON[handed]
    if not collate:
        passed = passed.replace(", collate_fn=collate", "")
    rollout = (_PAD_SIDES / "rollout.py").read_text().split("def attach_routing")[0]
    placed = next(i for i, line in enumerate(rollout.splitlines(), 1) if "expect: pad-sides-disagree" in line)
    files = {
        "replay.py": (_PAD_SIDES / "replay.py").read_text(),
        "data.py": rollout + _COLLATE,
        "main.py": _BUILDER.format(collate=", collate_fn=collate" if collate else "", passed=passed),
        "trainer.py": _TRAINER.format(target=target, loop=loop),
    }
    assert _lint(tmp_path, files) == ([("data.py", placed, "pad-sides-disagree")] if collate else [])


def test_a_forwarder_that_drops_a_parameter_is_left_as_is() -> None:
    """`def w(x, unused, **kw): return g(x, **kw)`: reading `w(t, c[1:], k=c)` as `g(t, k=c)` would drop
    the caller's `c[1:]` from the tree (a finding in it lost); the call stays."""
    source = ("def g(x, k=None):\n    return x\n\ndef w(x, unused, **kwargs):\n    return g(x, **kwargs)\n\n"
              "def caller(t, c):\n    return w(t, c[1:], k=c)\n")
    assert _read(source) == ast.unparse(ast.parse(source))


_SHIFTER = '''
import torch


def step(t, left=True):
    tail = torch.zeros_like(t[:, -1:])
    if left:
        t = torch.cat((tail, t[:, :-1]), dim=1)
    else:
        t = torch.cat((t[:, 1:], tail), dim=1)
    return t
'''
_STORED = '''
import torch

from draft.shifts import step


class StoredRecords(torch.utils.data.Dataset):
    def __init__(self, records, limit):
        self.records = records
        self.limit = limit

    @staticmethod
    def load(rec, limit):
        out = {{}}
        out["input_ids"] = {stored}
        out["loss_mask"] = rec["loss_mask"][:limit][None, :]
        return out

    def __getitem__(self, i):
        return self.load(self.records[i], self.limit)
'''
_HEAD = '''
from torch import nn

from draft.shifts import step


class Projector(nn.Module):
    def prepare(self, input_ids, loss_mask):
        input_ids = step(input_ids, left=False)
        return input_ids, loss_mask[..., None]
'''
_LOOP = '''
from torch.utils.data import DataLoader

{imported}


def train_step(head, model, batch):
    input_ids = batch["input_ids"].cuda()
    input_ids, loss_mask = head.prepare(input_ids, batch["loss_mask"].cuda())
    return model(input_ids, loss_mask)


def main(records, head, model):
    for batch in DataLoader({dataset}, batch_size=1):
        train_step(head, model, batch)
'''


_SHIFTED = 'step(rec["input_ids"][:limit][None, :], left=False)'
_RIVAL = '''

class Passthrough:
    def prepare(self, input_ids, loss_mask):
        return input_ids, loss_mask
'''


@pytest.mark.parametrize(("stored", "imported", "rival", "flagged"), [
    (_SHIFTED, True, False, True),
    ('rec["input_ids"][:limit][None, :]', True, False, False),
    ('step(rec["input_ids"][:limit][None, :])', True, False, False),
    (_SHIFTED, False, False, False),
    (_SHIFTED, True, True, False),
], ids=["stored shifted, shifted again", "stored as read (the fix)", "shifted the other way", "not imported",
        "another class's method of that name does not shift"])
def test_a_field_stored_shifted_and_shifted_again_in_other_modules(tmp_path: Path, stored: str, imported: bool,
                                                                    rival: bool, flagged: bool) -> None:
    """sgl-project/SpecForge 20924186: a dataset stores `step(ids, left=False)` (a shifter of a utility
    module whose parameter picks the side), and a training script reads the field and hands it to a
    method of a head class in a fourth module, which shifts that parameter again the same way: the
    store is flagged (transform-applied-twice). Silent when the dataset stores the value as read (the
    fix), when the two shifts go opposite ways (`left` left at its default), when the script does not
    import the dataset's module (nothing says the value read is the one stored), and when another class
    has a `prepare` that passes the value on unshifted (the instance's class is not known at the call)."""
    files = {
        "draft/__init__.py": "",
        "draft/shifts.py": _SHIFTER,
        "draft/records.py": _STORED.format(stored=stored),
        "draft/head.py": _HEAD + (_RIVAL if rival else ""),
        "train.py": _LOOP.format(imported="from draft.records import StoredRecords" if imported else "",
                                 dataset="StoredRecords(records, 64)" if imported else "records"),
    }
    (tmp_path / "draft").mkdir()
    line = next(i for i, text in enumerate(files["draft/records.py"].splitlines(), 1) if 'out["input_ids"]' in text)
    found = [(name, at) for name, at, rule in _lint(tmp_path, files) if rule == "transform-applied-twice"]
    assert found == ([("records.py", line)] if flagged else []), found


def test_a_shifter_assigned_onto_a_class_reads_its_side_from_the_arguments_after_the_receiver(
        tmp_path: Path) -> None:
    """The head shifts through a method assigned onto its class (`Projector.shift = step`, `step(owner, t,
    left=True)` in another module), called `self.shift(input_ids, False)`: the receiver fills `owner`, so
    `False` is `left` and the head shifts the way the dataset's stored value already is (flagged, as when
    the head calls `step(input_ids, left=False)` itself)."""
    head = _HEAD.replace("step(input_ids, left=False)", "self.shift(input_ids, False)") + \
        "\n\nProjector.shift = step\n"
    files = {
        "draft/__init__.py": "",
        "draft/shifts.py": _SHIFTER.replace("def step(t, left=True):", "def step(owner, t, left=True):"),
        "draft/records.py": _STORED.format(stored='step(None, rec["input_ids"][:limit][None, :], left=False)'),
        "draft/head.py": head,
        "train.py": _LOOP.format(imported="from draft.records import StoredRecords",
                                 dataset="StoredRecords(records, 64)"),
    }
    (tmp_path / "draft").mkdir()
    line = next(i for i, text in enumerate(files["draft/records.py"].splitlines(), 1) if 'out["input_ids"]' in text)
    found = [(name, at) for name, at, rule in _lint(tmp_path, files) if rule == "transform-applied-twice"]
    assert found == [("records.py", line)], found


@pytest.mark.parametrize(("source", "expected"), [
    ("def f(t):\n    return t[:, 1:]\n", [("f", "t", "first", "first", "")]),
    ("class H:\n    def f(self, x):\n        return torch.cat((x[..., :-1], pad), dim=-1)\n",
     [("H.f", "x", "last", "last", "")]),
    ("def f(t, left=True):\n    z = t[:, -1:]\n    if left:\n        t = cat((z, t[:, :-1]))\n    else:\n"
     "        t = cat((t[:, 1:], z))\n    return t\n", [("f", "t", "last", "first", "left")]),
    ("def f(t, right=False):\n    if not right:\n        t = t[:, :-1]\n    else:\n        t = t[:, 1:]\n    return t\n",
     [("f", "t", "first", "last", "right")]),
    ("def f(t, k):\n    if k:\n        return t[:, 1:]\n    return t\n", []),
    ("def f(t, left):\n    if left:\n        t = t[:, :-1]\n    return t\n", []),
    ("def f(t):\n    t = t[:, 1:]\n    t = t[:, 1:]\n    return t\n", []),
], ids=["returned", "a method", "side picked by a parameter", "negated", "two returns", "one arm only",
        "rebound twice"])
def test_a_shifter_summary_says_which_parameter_is_shifted_and_how(source: str, expected: list) -> None:
    """`FileFacts.shifters`: a function whose one return is a one-position shift of a parameter, directly or
    through the parameter rebound on every path (both arms of `if flag:` on another parameter); anything
    else (a path that returns the value unshifted, a second rebinding) is no shifter."""
    from layoutcheck.model.modulereaders import shifters_of_module

    assert [tuple(s) for s in shifters_of_module(ast.parse(source), source)] == expected


_PACKER = '''
import torch


class PackedRows:
    def __init__(self, ds, width):
        self.ds, self.width, self.rows = ds, width, []
        self._pack()

    def _pack(self):
        current = {{"tokens": [], "labels": [], "lengths": []}}
        for sample in self.ds:
            tokens, labels = sample["tokens"], sample["labels"]
            current["tokens"] += tokens
            current["labels"] += {labels}
            current["lengths"] += [len(tokens)]
        self.rows.append({{k: torch.tensor(v) for k, v in current.items()}})

    def __getitem__(self, i):
        return self.rows[i]
'''
_RECIPE = '''
import torch
{imported}


class Recipe:
    def __init__(self, model, loss_fn, ignore):
        self.model, self.loss_fn, self.ignore = model, loss_fn, ignore

    def loss_step(self, batch):
        labels = batch.pop("labels")
        logits = self.model(**batch)
        labels = torch.hstack((labels{shift}, self.ignore[: labels.shape[0]]))
        return self.loss_fn(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))
'''


@pytest.mark.parametrize(("packed", "imported", "shift", "flagged"), [
    ("labels", "from data import PackedRows", "[..., 1:]", True),
    ("labels", "from data import PackedRows", "", False),
    ("labels", "", "[..., 1:]", False),
    ("[len(labels)]", "from data import PackedRows", "[..., 1:]", False),
], ids=["packed, shifted as a row", "the fix: not shifted", "not imported", "one entry per sample, not packed"])
def test_a_packed_field_shifted_as_a_row_in_a_module_that_imports_the_packer(
        tmp_path: Path, packed: str, imported: str, shift: str, flagged: bool) -> None:
    """pytorch/torchtune b18312c7d: a dataset's loop concatenates each sample's labels onto one row beside
    the samples' lengths (a package `data`, the packer in a submodule its `__init__` imports), and a
    recipe in another module, which imports the package, shifts the batch's labels by one along the row:
    flagged (shift-across-packed-samples) at the shift. Silent at the fix (the recipe does not shift),
    when the recipe does not import the packer's package, and when the loop adds one entry per sample to
    the field (a list of per-sample values, not a row of samples)."""
    (tmp_path / "data").mkdir()
    files = {
        "data/__init__.py": "from data._packed import PackedRows\n",
        "data/_packed.py": _PACKER.format(labels=packed),
        "recipe.py": _RECIPE.format(imported=imported, shift=shift),
    }
    line = next(i for i, text in enumerate(files["recipe.py"].splitlines(), 1) if "torch.hstack" in text)
    found = [(name, at) for name, at, rule in _lint(tmp_path, files) if rule == "shift-across-packed-samples"]
    assert found == ([("recipe.py", line)] if flagged else []), found


_FORWARD_BY_PLACE = '''
class Store:
    def attach_rows(self, sample, routing=None):
        return sample, routing

    @staticmethod
    def attach_static(sample, routing=None):
        return sample, routing


class Wrapper(Store):
    def finish_rows(self, *args, **kwargs):
        return Store.attach_rows(self, *args, **kwargs)

    def finish_static(self, *args):
        return self.attach_static(*args)

    @staticmethod
    def finish_free(*args):
        return Store.attach_static(*args)


def through_instance(wrapper, sample, rows):
    return wrapper.finish_rows(sample, rows)


def through_class(wrapper, sample, rows):
    return Wrapper.finish_rows(wrapper, sample, rows)


def static_through_instance(wrapper, sample, rows):
    return wrapper.finish_static(sample, rows)


def static_wrapper(wrapper, sample, rows):
    return wrapper.finish_free(sample, rows)


def static_wrapper_through_class(sample, rows):
    return Wrapper.finish_free(sample, rows)
'''


def test_arguments_forwarded_through_a_class_or_a_staticmethod_land_where_python_binds_them() -> None:
    """``Store.attach_rows(self, *args, **kwargs)`` passes the receiver by hand, so the wrapper's first
    forwarded argument lands on ``sample``, not ``routing``; ``Wrapper.finish_rows(wrapper, sample, rows)``
    passes the wrapper's receiver by hand, so ``wrapper`` is taken by the wrapper's ``self``; a
    ``@staticmethod`` wrapper or callee takes no receiver, through an instance or its class. Each call of a
    wrapper reads as ``attach_*(sample=sample, routing=rows)``."""
    project = _graph({"forwards.py": _FORWARD_BY_PLACE})
    refs = {f.qualname: (0, j) for j, f in enumerate(project.files[0].facts.functions)}
    names = {ref: name for name, ref in refs.items()}

    def forwarded(callee: str) -> dict[str, dict[str, tuple[str, ...]]]:
        return {names[caller]: {a.keyword: a.params for a in call.args}
                for caller, call in project.callers_of(refs[callee]) if not names[caller].startswith("Wrapper.")}

    both = {"sample": ("sample",), "routing": ("rows",)}
    assert forwarded("Store.attach_rows") == {"through_instance": both, "through_class": both}
    assert forwarded("Store.attach_static") == {"static_through_instance": both, "static_wrapper": both,
                                                "static_wrapper_through_class": both}


def _graph(files: dict[str, str]):
    entries = [ProjectFile(name, name, module_name_of(name), textwrap.dedent(text).lstrip("\n"), checked=True,
                           rules=tuple(all_rules()), is_package=False)
               for name, text in files.items()]
    return analyse_project(entries, LintSettings(), all_rules=list(all_rules()))[1]


_ROUTED = '''

class {cls}:
    def __init__(self, items):
        self.items = items

    def {method}(self, items):
        item = items[0]
        return routing_tensor(item["choices"], item["input_ids"], item["attention_mask"])


class Unrouted:
    def {method}(self, items):
        return items
'''
"""A Dataset whose collate function is a method placing routing rows on the left (`routing_tensor`), and
another class with a method of the same name: the name alone does not say which one a call reaches."""
_LOADERS = '''
from torch.utils.data import DataLoader


def {helper}(dataset, batch_size, shuffle=True, collate_fn=None):
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, collate_fn=collate_fn)


class {strategy}:
    def __init__(self, seed):
        self.seed = seed

    def {method}(self, dataset, batch_size, pin_memory=False, shuffle=True, collate_fn=None, drop_last=True):
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, collate_fn=collate_fn,
                            drop_last=drop_last, pin_memory=pin_memory)
        return loader
'''
"""Project helpers that build and return a DataLoader given their parameter as its collate function: a
function, and a method of a strategy class (OpenRLHF's `strategy.setup_dataloader`)."""
_BUILT_BY_HELPER = {
    "a method of a local instance, given to DataLoader": "loader = DataLoader(ds, batch_size=1, collate_fn=ds.{method})",
    "a helper function, positional": "loader = {helper}(ds, 1, True, ds.{method})",
    "a helper function, by keyword": "loader = loaders.{helper}(ds, 1, collate_fn=ds.{method})",
    "a strategy's method, positional": "loader = strategy.{builder}(ds, 1, True, True, ds.{method})",
    "a strategy's method, by keyword": "loader = strategy.{builder}(ds, 1, collate_fn=ds.{method}, drop_last=False)",
}
_MAIN = '''
import loaders
from torch.utils.data import DataLoader
from data import {cls}
from loaders import {helper}, {strategy}
from trainer import Trainer


def main(items, cu_seqlens, max_len):
    strategy = {strategy}(seed=1)
    ds = {cls}(items)
    {built}
    return Trainer(loader, cu_seqlens=cu_seqlens, max_len=max_len).fit()
'''
_NAMES = {
    "as OpenRLHF names them": dict(cls="RewardDataset", method="collate_fn", helper="build_loader",
                                   strategy="DeepspeedStrategy", builder="setup_dataloader"),
    "renamed": dict(cls="Pairs", method="batch", helper="mk", strategy="Plan", builder="feed"),
}


@pytest.mark.parametrize("names", list(_NAMES), ids=list(_NAMES))
@pytest.mark.parametrize("built", list(_BUILT_BY_HELPER), ids=list(_BUILT_BY_HELPER))
def test_a_loader_built_by_a_helper_with_a_method_of_a_local_instance_binds_that_methods_result(
        tmp_path: Path, built: str, names: str) -> None:
    """`main.py` builds its loader by a project helper that returns `DataLoader(..., collate_fn=<its
    parameter>)` (a function, or a method of a strategy instance held in a local), given `ds.collate_fn`,
    a method of a Dataset instance held in a local (`ds = RewardDataset(items)`; another class has a method
    of that name), and hands it to `Trainer`, which loops over it: the loop binds what that method
    returns (routing rows placed on the left, read from each row's start by `replay.py`:
    pad-sides-disagree). Renamed, the same finding; with the method returning its items as given, none."""
    spelled = _NAMES[names]
    rollout = (_PAD_SIDES / "rollout.py").read_text().split("def attach_routing")[0]
    placed = next(i for i, line in enumerate(rollout.splitlines(), 1) if "expect: pad-sides-disagree" in line)
    files = {
        "replay.py": (_PAD_SIDES / "replay.py").read_text(),
        "data.py": rollout + _ROUTED.format(cls=spelled["cls"], method=spelled["method"]),
        "loaders.py": _LOADERS.format(helper=spelled["helper"], strategy=spelled["strategy"],
                                      method=spelled["builder"]),
        "main.py": _MAIN.format(built=_BUILT_BY_HELPER[built].format(**spelled), **spelled),
        "trainer.py": _TRAINER.format(target="routing", loop="self.train_loader"),
    }
    assert _lint(tmp_path, files) == [("data.py", placed, "pad-sides-disagree")]
    # the other class's method of that name: nothing placed, nothing flagged
    files["main.py"] = files["main.py"].replace(f"from data import {spelled['cls']}",
                                                f"from data import Unrouted as {spelled['cls']}")
    assert _lint(tmp_path / "unrouted", files) == []


_HELD_CLASSES = '''

class {cls}:
    @classmethod
    def build(cls, items):
        return cls(items)

    def __init__(self, items):
        self.items = items

    def {method}(self, items):
        item = items[0]
        return routing_tensor(item["choices"], item["input_ids"], item["attention_mask"])


class Unrouted:
    def __init__(self):
        self.items = []

    def {method}(self, items):
        return items


class Derived({cls}):
    pass
'''
_HELD = {
    "a local built by the class": ("def main(items, cu_seqlens, max_len, flag):\n    ds = {cls}(items)\n", True),
    "built alike on both paths": ("def main(items, cu_seqlens, max_len, flag):\n    if flag:\n"
                                  "        ds = {cls}(items[:1])\n    else:\n        ds = {cls}(items)\n", True),
    "a parameter annotated with the class": ("def main(items, cu_seqlens, max_len, flag, ds: {cls}):\n", True),
    "a parameter annotated as text": ("def main(items, cu_seqlens, max_len, flag, ds: \"{cls}\"):\n", True),
    "a classmethod returning cls(...)": ("def main(items, cu_seqlens, max_len, flag):\n    ds = {cls}.build(items)\n",
                                         True),
    "the method inherited from a base": ("def main(items, cu_seqlens, max_len, flag):\n    ds = Derived(items)\n",
                                         True),
    "two classes on two paths": ("def main(items, cu_seqlens, max_len, flag):\n    if flag:\n"
                                 "        ds = {cls}(items)\n    else:\n        ds = Unrouted()\n", False),
    "rebound by a loop": ("def main(items, cu_seqlens, max_len, flag):\n    ds = {cls}(items)\n"
                          "    for ds in items:\n        pass\n", False),
}


@pytest.mark.parametrize("names", list(_NAMES), ids=list(_NAMES))
@pytest.mark.parametrize("held", list(_HELD), ids=list(_HELD))
def test_a_method_called_on_an_instance_held_in_a_local_reads_through_that_classs_method(
        tmp_path: Path, held: str, names: str) -> None:
    """`ds = RewardDataset(items)` then `routing = ds.collate_fn(items)` in another module: the call reaches
    that class's method (another class has a method of that name), whose return (routing rows placed
    on the left) is stored as the record's `routing` field that `replay.py` reads from each row's start
    (pad-sides-disagree). So for a parameter annotated with the class, a `@classmethod` that returns
    `cls(...)`, and a method a base defines. Where the local may hold two classes, or is rebound by a
    loop, the call reaches nothing known (silent)."""
    spelled = _NAMES[names]
    head, caught = _HELD[held]
    rollout = (_PAD_SIDES / "rollout.py").read_text().split("def attach_routing")[0]
    placed = next(i for i, line in enumerate(rollout.splitlines(), 1) if "expect: pad-sides-disagree" in line)
    data = rollout + _HELD_CLASSES.format(cls=spelled["cls"], method=spelled["method"])
    main = (f"from data import {spelled['cls']}, Derived, Unrouted\nfrom replay import replay_inputs\n\n\n"
            + head.format(**spelled)
            + f"    routing = ds.{spelled['method']}(items)\n    sample = {{}}\n    sample[\"routing\"] = routing\n"
            "    return replay_inputs(sample, cu_seqlens, max_len)\n")
    files = {"replay.py": (_PAD_SIDES / "replay.py").read_text(), "data.py": data, "main.py": main}
    assert _lint(tmp_path, files) == ([("data.py", placed, "pad-sides-disagree")] if caught else [])


def test_a_class_reexported_by_a_package_resolves_for_a_local_instance(tmp_path: Path) -> None:
    """`from pkg import RewardDataset` where `pkg/__init__.py` only re-exports it from `pkg/data.py` (a
    file the prefilter clears, which keeps only the modules it imports from), and the loader built by
    a strategy's method as OpenRLHF's `train_dpo.py` builds it: the loop binds the method's result."""
    spelled = _NAMES["as OpenRLHF names them"]
    rollout = (_PAD_SIDES / "rollout.py").read_text().split("def attach_routing")[0]
    placed = next(i for i, line in enumerate(rollout.splitlines(), 1) if "expect: pad-sides-disagree" in line)
    main = _MAIN.format(built=_BUILT_BY_HELPER["a strategy's method, positional"].format(**spelled), **spelled)
    files = {
        "replay.py": (_PAD_SIDES / "replay.py").read_text(),
        "pkg/__init__.py": "from .data import RewardDataset, Unrouted\n",
        "pkg/data.py": rollout + _ROUTED.format(cls=spelled["cls"], method=spelled["method"]),
        "loaders.py": _LOADERS.format(helper=spelled["helper"], strategy=spelled["strategy"],
                                      method=spelled["builder"]),
        "main.py": main.replace("from data import", "from pkg import"),
        "trainer.py": _TRAINER.format(target="routing", loop="self.train_loader"),
    }
    assert _lint(tmp_path, files) == [("data.py", placed, "pad-sides-disagree")]


_DPO_FILES = {
    "padding.py": '''
import torch
import torch.nn.functional as F


def {pad}(rows, side="left", fill=0):
    width = max(r.size(-1) for r in rows)
    out = []
    for r in rows:
        gap = width - r.size(-1)
        amount = (gap, 0) if side == "left" else (0, gap)
        out.append(F.pad(r, amount, value=fill))
    return torch.stack(out)
''',
    "pairs.py": '''
from padding import {pad}


class {cls}:
    def __init__(self, items, pad_id):
        self.items = items
        self.pad_id = pad_id

    def {collate}(self, items):
        good = {pad}([it[0] for it in items]{side}, fill=self.pad_id)
        good_mask = {pad}([it[1] for it in items]{side})
        sizes = [it[2] for it in items]
        return good, good_mask, sizes
''',
    "loop.py": '''
import torch


class {trainer}:
    def __init__(self, loader):
        self.loader = loader

    def fit(self):
        out = []
        for ids, mask, sizes in self.loader:
            mask = mask.squeeze(1)
            out.append(self.{fwd}(ids, mask, sizes))
        return out

    def {fwd}(self, ids, mask, sizes):
        ids, masks, sizes = self.{join}(ids, mask, sizes)
        return self.{score}(ids, masks, sizes)

    def {join}(self, ids, mask, sizes):
        def widen(t, n):
            if t.size(-1) >= n:
                return t
            return torch.cat([t, t.new_zeros(t.size(0), n - t.size(-1))], dim=-1)

        return torch.cat((widen(ids, 8), widen(ids, 8))), torch.cat((widen(mask, 8), widen(mask, 8))), sizes * 2

    def {score}(self, ids, mask, sizes):
        keep = mask.clone().bool()
        for row, n in zip(keep, sizes):
            row[:n] = False
        return ids * keep
''',
    "setup.py": '''
from torch.utils.data import DataLoader


class {strategy}:
    def {setup}(self, dataset, batch_size, pin_memory=False, shuffle=True, collate_fn=None):
        return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, collate_fn=collate_fn,
                          pin_memory=pin_memory)
''',
    "main.py": '''
from loop import {trainer}
from pairs import {cls}
from setup import {strategy}


def main(items):
    strategy = {strategy}()
    ds = {cls}(items, 0)
    loader = strategy.{setup}(ds, 1, True, True, ds.{collate})
    return {trainer}(loader).fit()
''',
}
"""OpenRLHF a32a7322 in five modules, in this project's own words: a side switch that pads on the left by
default (`padding.py`), a Dataset's collate method that calls it without a side (`pairs.py`), a loader
built by a strategy's method given that method of a local instance (`main.py`, `setup.py`), and a trainer
that loops over the loader, widens the rows through a nested helper and a returned tuple, and hides each
row's first `n` columns (`loop.py`)."""
_DPO_NAMES = {
    "as OpenRLHF names them": dict(pad="zero_pad_sequences", cls="RewardDataset", collate="collate_fn",
                                   trainer="DPOTrainer", fwd="concatenated_forward", join="concatenated_inputs",
                                   score="_get_batch_logps", strategy="DeepspeedStrategy",
                                   setup="setup_dataloader"),
    "renamed": dict(pad="fill_up", cls="Duo", collate="stack", trainer="Fit", fwd="step", join="both",
                    score="logps", strategy="Plan", setup="feed"),
}


@pytest.mark.parametrize("names", list(_DPO_NAMES), ids=list(_DPO_NAMES))
@pytest.mark.parametrize("side", ["", ', side="right"'], ids=["side left to its default", "side given"])
def test_rows_a_switch_pads_on_the_left_reach_a_head_reader_in_another_module(
        tmp_path: Path, side: str, names: str) -> None:
    """The collate method pads its rows with the switch's default side (left); the trainer's loop over the
    loader a strategy built with that method passes the mask on, widened through a nested helper and an
    element of a returned tuple, to a method that reads each row's first `n` columns: pad-sides-disagree
    at the collate's padding call (the first one its returned rows come from). Given a side, the call is
    not judged (silent). Renamed, the same."""
    spelled = _DPO_NAMES[names]
    files = {name: text.format(side=side, **spelled) for name, text in _DPO_FILES.items()}
    called = next(i for i, line in enumerate(files["pairs.py"].splitlines(), 1) if "good = " in line)
    assert _lint(tmp_path, files) == ([("pairs.py", called, "pad-sides-disagree")] if not side else [])


@pytest.mark.parametrize("names", list(_DPO_NAMES), ids=list(_DPO_NAMES))
def test_a_head_reader_spelled_with_the_loops_index_is_reached_across_modules_too(tmp_path: Path, names: str) -> None:
    """The head reader of the five modules above, its zip spelled with `enumerate` and the row's index
    (`keep[i, :n] = False`): the same reader, the same finding (a module that slices rows only that way
    is read for head readers too)."""
    spelled = _DPO_NAMES[names]
    files = {name: text.format(side="", **spelled) for name, text in _DPO_FILES.items()}
    zipped = "        for row, n in zip(keep, sizes):\n            row[:n] = False\n"
    assert sum(zipped in text for text in files.values()) == 1
    files = {name: text.replace(zipped, "        for i, n in enumerate(sizes):\n            keep[i, :n] = False\n")
             for name, text in files.items()}
    called = next(i for i, line in enumerate(files["pairs.py"].splitlines(), 1) if "good = " in line)
    assert _lint(tmp_path, files) == [("pairs.py", called, "pad-sides-disagree")]


_BUFFER_FILES = {
    "padding.py": _DPO_FILES["padding.py"],
    "replay_buffer.py": '''
from padding import {pad}


class {buffer}:
    def __init__(self, sample_batch_size, limit=0):
        self.sample_batch_size = sample_batch_size
        self.limit = limit
        self.items = []

    def append(self, item):
        self.items.append(item)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]

    def {collate}(self, batch):
        good = {pad}([it[0] for it in batch]{side})
        good_mask = {pad}([it[1] for it in batch]{side})
        sizes = [it[2] for it in batch]
        return good, good_mask, sizes


class {other}:
    def __init__(self, sample_batch_size, limit=0):
        self.sample_batch_size = sample_batch_size

    def {collate}(self, batch):
        return batch


def {make}(sample_batch_size, limit):
    return {buffer}(sample_batch_size, limit)
''',
    "setup.py": _DPO_FILES["setup.py"],
    "ppo_actor.py": '''
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm
from replay_buffer import {buffer}, {other}, {make}
from setup import {strategy}


class {trainer}:
    def __init__(self, micro_train_batch_size, buffer_limit):
        self.strategy = {strategy}()
        {stored}

    def {train}(self):
        {loader}
        out = []
        {loop}
            out.append(self.{step}(ids, mask, sizes))
        return out

    def {step}(self, ids, mask, sizes):
        keep = mask.clone().bool()
        for row, n in zip(keep, sizes):
            row[:n] = False
        return ids * keep
''',
}
"""OpenRLHF's replay buffer (d2fcab25's parent) in this project's own words: a trainer stores a buffer
instance on itself in ``__init__``, and its training method loops over ``DataLoader(self.replay_buffer,
collate_fn=self.replay_buffer.collate_fn)``, a collate function that is a method of that attribute (the
side switch left at its default: left), passing each batch to a method that reads each row's first ``n``
columns. Another class has a method of the collate's name: the name alone does not say which one runs."""
_BUFFER_NAMES = {
    "as OpenRLHF names them": dict(pad="zero_pad_sequences", buffer="NaiveReplayBuffer", collate="collate_fn",
                                   other="FixedBuffer", make="make_buffer", trainer="ActorPPOTrainer",
                                   attr="replay_buffer", train="ppo_train", step="training_step",
                                   strategy="DeepspeedStrategy", setup="setup_dataloader"),
    "renamed": dict(pad="fill_up", buffer="Store", collate="stack", other="Plain", make="mk", trainer="Fit",
                    attr="pool", train="run", step="one", strategy="Plan", setup="feed"),
}
_DIRECT = "dataloader = DataLoader(self.{attr}, batch_size=1, shuffle=True, collate_fn=self.{attr}.{collate})"
_FOR = "for ids, mask, sizes in dataloader:"
_BUFFER_CASES = {
    "stored in __init__": ("self.{attr} = {buffer}(micro_train_batch_size, buffer_limit)", _DIRECT, _FOR, True),
    "stored from a function returning the class": (
        "self.{attr} = {make}(micro_train_batch_size, buffer_limit)", _DIRECT, _FOR, True),
    "looped through a progress bar": (
        "self.{attr} = {buffer}(micro_train_batch_size, buffer_limit)", _DIRECT + "\n        pbar = tqdm(dataloader)",
        "for ids, mask, sizes in pbar:", True),
    "a progress bar written in the loop": (
        "self.{attr} = {buffer}(micro_train_batch_size, buffer_limit)", _DIRECT,
        "for ids, mask, sizes in tqdm(dataloader, desc='train'):", True),
    "a local built by the class": (
        "self.size = micro_train_batch_size", ("buf = {buffer}(1, 0)\n"
                                               "        dataloader = DataLoader(buf, batch_size=1, collate_fn=buf.{collate})"),
        _FOR, True),
    "a local from a function returning the class": (
        "self.size = micro_train_batch_size", ("buf = {make}(1, 0)\n"
                                               "        dataloader = DataLoader(buf, batch_size=1, collate_fn=buf.{collate})"),
        _FOR, True),
    "a loader a helper built in the same method": (
        "self.{attr} = {buffer}(micro_train_batch_size, buffer_limit)",
        "dataloader = self.strategy.{setup}(self.{attr}, 1, True, True, self.{attr}.{collate})", _FOR, True),
    "a loader a helper built and stored on self": (
        ("self.{attr} = {buffer}(micro_train_batch_size, buffer_limit)\n"
         "        self.dataloader = self.strategy.{setup}(self.{attr}, 1, True, True, self.{attr}.{collate})"),
        "pass", "for ids, mask, sizes in self.dataloader:", True),
    "a loader stored on self, built from a local instance": (
        ("buf = {buffer}(micro_train_batch_size, buffer_limit)\n"
         "        self.dataloader = self.strategy.{setup}(buf, 1, True, True, buf.{collate})"),
        "pass", "for ids, mask, sizes in self.dataloader:", True),
    "a loader a helper built, through a progress bar": (
        "self.{attr} = {buffer}(micro_train_batch_size, buffer_limit)",
        ("dataloader = self.strategy.{setup}(self.{attr}, 1, True, True, self.{attr}.{collate})\n"
         "        pbar = tqdm(dataloader)"), "for ids, mask, sizes in pbar:", True),
    "a helper held in a local of __init__, then stored": (
        "buf = {buffer}(micro_train_batch_size, buffer_limit)\n        self.{attr} = buf", _DIRECT, _FOR, True),
    "a local from a function returning the class, then stored": (
        "buf = {make}(micro_train_batch_size, buffer_limit)\n        self.{attr} = buf", _DIRECT, _FOR, True),
    "a local stored, then rebound": (
        "buf = {buffer}(micro_train_batch_size, buffer_limit)\n        self.{attr} = buf\n        buf = None",
        _DIRECT, _FOR, False),
    "the attribute stored as two classes": (
        ("self.{attr} = {buffer}(micro_train_batch_size, buffer_limit)\n\n    def reset(self):\n"
         "        self.{attr} = {other}(1)"), _DIRECT, _FOR, False),
}


@pytest.mark.parametrize("names", list(_BUFFER_NAMES), ids=list(_BUFFER_NAMES))
@pytest.mark.parametrize("case", list(_BUFFER_CASES), ids=list(_BUFFER_CASES))
@pytest.mark.parametrize("side", ["", ', side="right"'], ids=["side left to its default", "side given"])
def test_a_collate_method_of_an_instance_stored_on_self_binds_the_loops_batches(
        tmp_path: Path, side: str, case: str, names: str) -> None:
    """`self.replay_buffer = NaiveReplayBuffer(...)` in `__init__` (or from a function whose every return
    builds that class), then a loop over `DataLoader(self.replay_buffer, collate_fn=self.replay_buffer.
    collate_fn)` (directly, through `tqdm`, or built by a strategy's method in that method): the loop binds
    what the buffer's collate method returns, rows padded on the left by the switch's default, and hands
    them to a method that reads each row's first `n` columns: pad-sides-disagree at the collate's padding
    call. Given a side, silent; the attribute stored as two classes reaches no known method (silent).
    Renamed, the same."""
    spelled = _BUFFER_NAMES[names]
    stored, loader, loop, caught = _BUFFER_CASES[case]
    given = dict(spelled, side=side, stored=stored.format(**spelled), loader=loader.format(**spelled), loop=loop)
    files = {name: text.format(**given) for name, text in _BUFFER_FILES.items()}
    called = next(i for i, line in enumerate(files["replay_buffer.py"].splitlines(), 1) if "good = " in line)
    expected = [("replay_buffer.py", called, "pad-sides-disagree")] if caught and not side else []
    assert _lint(tmp_path, files) == expected


def test_an_attribute_holds_one_class_only_where_every_store_of_it_in_the_class_builds_it() -> None:
    """`FileFacts.instances`' attributes: `self.buffer = Buffer(...)` in `__init__` (and the same call in
    another method) is kept; an attribute also stored otherwise (`+=`, a tuple's target, another callee,
    a value that is no call, a store in a closure) is left out; a declaration (`self.x: Buffer`) stores
    nothing; another class's stores are its own."""
    from layoutcheck.model.origins import origins_and_instances

    source = textwrap.dedent('''
        from data import Buffer, Other


        class Trainer:
            def __init__(self, n):
                self.buffer = Buffer(n)
                self.declared: Buffer
                self.declared = Buffer(n)
                self.counted = Buffer(n)
                self.pair = Buffer(n)
                self.mixed = Buffer(n)
                self.plain = Buffer(n)
                self.closed = Buffer(n)

            def reset(self, n):
                self.buffer = Buffer(n)
                self.counted += 1
                self.pair, self.other = Buffer(n), 1
                self.mixed = Other(n)
                self.plain = [Buffer(n)]

                def later():
                    self.closed = None
                return later


        class Critic:
            def __init__(self, n):
                self.buffer = Other(n)
    ''')
    attributes = origins_and_instances(ast.parse(source))[1][3]
    assert attributes == (("Critic", "buffer", "data.Other"), ("Trainer", "buffer", "data.Buffer"),
                          ("Trainer", "declared", "data.Buffer"))


_ATTRIBUTE_CALLS = {
    "data.py": '''
class Buffer:
    def fill(self, rows):
        return rows


class Other:
    def fill(self, rows):
        return rows


def make_buffer():
    return Buffer()


def make_either(flag):
    if flag:
        return Buffer()
    return Other()
''',
    "trainer.py": '''
from data import Buffer, Other, make_buffer, make_either


class Base:
    def __init__(self):
        self.buffer = Buffer()
        self.made = make_buffer()
        self.either = make_either(True)


class Derived(Base):
    def step(self, rows):
        self.buffer.fill(rows)
        self.made.fill(rows)
        self.either.fill(rows)


class Shadowing(Base):
    def __init__(self):
        super().__init__()
        self.buffer = Other()

    def step(self, rows):
        self.buffer.fill(rows)
''',
}


def test_an_attribute_a_base_stores_reaches_its_classs_method_from_a_subclass() -> None:
    """`self.buffer.fill(rows)` in a subclass whose base's `__init__` stores `self.buffer = Buffer()` (or
    `make_buffer()`, whose every return builds `Buffer`) reaches `Buffer.fill`, though `Other` has a
    method of that name; a function returning either class reaches neither by its class (the name alone
    is no one `def`'s); a subclass that stores the attribute itself reads its own class."""
    project = _graph(_ATTRIBUTE_CALLS)
    index = next(i for i, f in enumerate(project.files) if f.facts.functions and f.module == "trainer")
    reached = {}
    for j, function in enumerate(project.files[index].facts.functions):
        for call in function.calls:
            if call.callee.endswith(".fill"):
                target = project.resolve((index, j), call)
                reached[(function.qualname, call.callee)] = target and project.signature(target).qualname
    assert reached == {("Derived.step", "self.buffer.fill"): "Buffer.fill",
                       ("Derived.step", "self.made.fill"): "Buffer.fill",
                       ("Derived.step", "self.either.fill"): None,
                       ("Shadowing.step", "self.buffer.fill"): "Other.fill"}


_HOLDERS = {
    "a base's constructor called through its class": (
        "class {base}:\n"
        "    def __init__(self, sample, {param}):\n"
        "        if {param} is not None:\n"
        "            sample[\"routing\"] = {param}\n"
        "        self.sample = sample\n\n\n"
        "class {sub}({base}):\n"
        "    def __init__(self, sample, {param}):\n"
        "        {base}.__init__(self, sample, {param})\n",
        "{sub}(sample, routing)\n    return sample"),
    "a function a package re-exports under another name": (
        "def {helper}(sample, {param}):\n"
        "    if {param} is not None:\n"
        "        sample[\"routing\"] = {param}\n"
        "    return sample\n",
        "{alias}(sample, routing)"),
}
"""The helper that stores its parameter as the record's `routing` field (`_PAD_SIDES`), reached as Python
reaches it: a subclass's constructor that calls its base's by hand (`Worker.__init__(self, ...)`, as verl's
workers do), or a name a package's ``__init__`` re-exports it under (``from .gpu import attn_v2 as attn``,
as xtuner's ops do)."""
_HOLDER_NAMES = {
    "as verl and xtuner name them": dict(base="Worker", sub="ActorRolloutRefWorker", helper="attach_routing_v2",
                                         alias="attach_routing", param="routing"),
    "renamed": dict(base="Keep", sub="Held", helper="put_b", alias="put", param="rows"),
}


@pytest.mark.parametrize("names", list(_HOLDER_NAMES), ids=list(_HOLDER_NAMES))
@pytest.mark.parametrize("holder", list(_HOLDERS), ids=list(_HOLDERS))
def test_a_call_spelt_with_another_name_than_the_defs_reaches_its_parameters(
        tmp_path: Path, holder: str, names: str) -> None:
    """`ProjectGraph.callers_of` (the calls of one ``def``, found by the names a call can spell it with) finds
    what `ProjectGraph.callers` (every call resolved) finds: a base's ``__init__`` called as
    `Base.__init__(self, ...)`, and a function called by a package's alias of it. The helper's parameter then
    holds the left-placed rows its caller passes, and they meet the reader of each row's start:
    pad-sides-disagree where they are placed. Renamed, the same."""
    spelled = _HOLDER_NAMES[names]
    helper, call = (text.format(**spelled) for text in _HOLDERS[holder])
    rollout = (_PAD_SIDES / "rollout.py").read_text()
    direct = "    return attach_routing(sample, routing)"
    assert direct in rollout
    rollout = rollout.replace(direct, f"    return {call}")
    helper_at = "from pkg.store import {sub}\n" if "class" in helper else "from pkg import {alias}\n"
    rollout = helper_at.format(**spelled) + rollout.replace("def attach_routing", "def _unused_attach")
    placed = next(i for i, line in enumerate(rollout.splitlines(), 1) if "expect: pad-sides-disagree" in line)
    files = {"replay.py": (_PAD_SIDES / "replay.py").read_text(), "rollout.py": rollout, "pkg/store.py": helper,
             # a package that only re-exports: the prefilter clears it, its aliases still read (`scan_aliases`)
             "pkg/__init__.py": "" if "class" in helper else "from .store import {helper} as {alias}\n".format(**spelled)}
    assert _lint(tmp_path, files) == [("rollout.py", placed, "pad-sides-disagree")]
    with contextlib.chdir(tmp_path):
        project = run(["."], use_cache=False, keep_project=True).project
    by_name = {ref: project.callers_of(ref) for ref, _ in project.defs() if ref[1]}
    every = _again(project)
    every.callers  # noqa: B018 - every call resolved first: `callers_of` then reads it
    assert by_name == {ref: every.callers_of(ref) for ref in by_name}
    stores = "{base}.__init__" if "class" in helper else "{helper}"
    store = next(ref for ref in by_name if project.signature(ref).qualname == stores.format(**spelled))
    assert len(by_name[store]) == 1, by_name[store]


def _again(project: Project) -> Project:
    """The same files' facts as a new project, nothing computed yet."""
    return Project([FileModel(f.display, f.relpath, f.module, f.facts, f.checked, is_package=f.is_package)
                    for f in project.files], project.settings)


_ITEMS_FILES = {
    "data.py": '''
import torch
from torch.utils.data import Dataset


def {place}(choices, input_ids, attention_mask):
    seq_len = input_ids.shape[1]
    real = int(attention_mask.sum())
    out = torch.zeros(1, seq_len, choices.shape[1], dtype=torch.int32)
    start = seq_len - real
    n = min(choices.shape[0], real)
    out[0, start : start + n] = choices[:n]
    return out


class {cls}(Dataset):
    def __init__(self, samples):
        self.samples = samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        sample = self.samples[idx]
        {local} = {place}(sample["choices"], sample["input_ids"], sample["attention_mask"])
        return sample["input_ids"], {local}


def {collate}({items}):
{body}
''',
    "train.py": '''
from torch.utils.data import DataLoader
from data import {cls}, {collate}
from replay import replay_inputs


class {trainer}:
    def __init__(self, samples):
        self.{attr} = {cls}(samples)
        {init}

    def {fit}({me}, samples, cu_seqlens, max_len):
        out = []
        {built}
        for {target} in {looped}:
            {record}
            out.append(replay_inputs(batch, cu_seqlens, max_len))
        return out
''',
}
"""A Dataset whose ``__getitem__`` returns each sample's router choices placed at the end of the row (left
padding, `_PAD_SIDES`'s placement), a collate function over a list of its items, and a trainer that loops
over ``DataLoader(<the dataset>, collate_fn=<it>)`` and hands each batch to the reader of each row's start
(`_PAD_SIDES`'s ``replay.py``)."""
_ITEMS_RECORDS = {
    "the collate function fills the record": (
        "    out = {{}}\n    out[\"input_ids\"] = torch.cat([it[0] for it in {items}])\n"
        "    out[\"{field}\"] = torch.cat([it[1] for it in {items}])\n    return out",
        "batch", "pass", ("data.py", "out[0, start : start + n] = choices[:n]")),
    "the loop stores the collate function's element": (
        "    return torch.cat([it[0] for it in {items}]), torch.cat([it[1] for it in {items}])",
        "ids, rows", 'batch = {{"input_ids": ids, "{field}": rows}}', ("train.py", "batch = {")),
}
_ITEMS_GIVEN = {
    "a local": ("ds = {cls}(samples)", "ds"),
    "dataset=": ("ds = {cls}(samples)", "dataset=ds"),
    "built in the call": ("pass", "{cls}(samples)"),
    "an attribute": ("pass", "{recv}.{attr}"),
}
_ITEMS_BUILT = {
    "in the looping method": ("pass", "{ds}\n        loader = DataLoader({given}, batch_size=4, collate_fn={collate})",
                              "loader", "{me}"),
    "in __init__, looped in another method": (
        "{ds}\n        self.loader = DataLoader({given}, batch_size=4, collate_fn={collate})", "pass", "{me}.loader",
        "self"),
}
_ITEMS_NAMES = {
    "as a trainer names them": dict(place="routing_tensor", cls="RoutingDataset", local="routing", collate="collate_fn",
                                    items="batch", trainer="Trainer", attr="dataset", fit="train_epoch",
                                    field="routing", me="self"),
    "renamed": dict(place="lay", cls="Rows", local="r", collate="merge", items="xs", trainer="Loop", attr="src",
                    fit="go", field="experts", me="this"),
}



@pytest.mark.parametrize("names", list(_ITEMS_NAMES), ids=list(_ITEMS_NAMES))
@pytest.mark.parametrize("built", list(_ITEMS_BUILT), ids=list(_ITEMS_BUILT))
@pytest.mark.parametrize("given", list(_ITEMS_GIVEN), ids=list(_ITEMS_GIVEN))
@pytest.mark.parametrize("record", list(_ITEMS_RECORDS), ids=list(_ITEMS_RECORDS))
def test_a_datasets_items_reach_the_collate_functions_parameter(tmp_path: Path, record: str, given: str,
                                                                  built: str, names: str) -> None:
    """`DataLoader(ds, collate_fn=f)` calls `f` on a list of `ds.__getitem__` results: the rows the
    dataset's items place at the end of each row reach `f`'s parameter's entries, and what `f` returns for
    them reaches the loop over the loader. Stored as a record's field (in `f`, or in the loop from `f`'s
    element) and read from each row's start in another module: pad-sides-disagree, at the placement (its
    parameter traced to the items) or at the loop's store. The dataset a local, `dataset=`, built in the
    loader's call, or an attribute stored in `__init__`; the loader built in the looping method, or stored
    in `__init__` and looped over in another method (whose receiver has another name); renamed (the field
    too), the same. Placed at the row's start, silent."""
    spelled = _ITEMS_NAMES[names]
    body, target, stored, (where, at) = _ITEMS_RECORDS[record]
    init, inline, looped, recv = _ITEMS_BUILT[built]
    made, loader = (text.format(recv=recv.format(**spelled), **spelled) for text in _ITEMS_GIVEN[given])
    init, inline, looped = (text.format(ds=made, given=loader, **spelled) for text in (init, inline, looped))
    files = {name: text.format(body=body.format(**spelled), target=target, record=stored.format(**spelled), init=init,
                               built=inline, looped=looped, **spelled)
             for name, text in _ITEMS_FILES.items()}
    files["replay.py"] = (_PAD_SIDES / "replay.py").read_text().replace('"routing"', f'"{spelled["field"]}"')
    line = next(i for i, text in enumerate(files[where].splitlines(), 1) if at in text)
    assert _lint(tmp_path, files) == [(where, line, "pad-sides-disagree")]
    files["data.py"] = files["data.py"].replace("start = seq_len - real", "start = 0")  # placed at the start: silent
    assert _lint(tmp_path / "right", files) == []


_OUTSIDE = {
    "built and stored in a builder": '''
from ppo_actor import {trainer}
from replay_buffer import {buffer}


def build(micro_train_batch_size, buffer_limit):
    actor = {trainer}(micro_train_batch_size, buffer_limit)
    actor.{attr} = {buffer}(micro_train_batch_size, buffer_limit)
    return actor.{train}()
''',
    "a helper held in a local, then stored": '''
from ppo_actor import {trainer}
from replay_buffer import {make}


def build(micro_train_batch_size, buffer_limit):
    actor = {trainer}(micro_train_batch_size, buffer_limit)
    buf = {make}(micro_train_batch_size, buffer_limit)
    actor.{attr} = buf
    return actor.{train}()
''',
    "stored into an annotated parameter": '''
from ppo_actor import {trainer}
from replay_buffer import {buffer}


def attach(actor: {trainer}, micro_train_batch_size, buffer_limit):
    actor.{attr} = {buffer}(micro_train_batch_size, buffer_limit)
    return actor
''',
}
"""`_BUFFER_FILES`' trainer, its replay buffer stored from another module onto an instance a local (or an
annotated parameter) holds, not in the trainer's own methods."""


@pytest.mark.parametrize("names", list(_BUFFER_NAMES), ids=list(_BUFFER_NAMES))
@pytest.mark.parametrize("outside", list(_OUTSIDE), ids=list(_OUTSIDE))
@pytest.mark.parametrize("other", [False, True], ids=["one class stored", "another class stored elsewhere too"])
def test_an_attribute_stored_from_outside_its_class_reaches_that_classs_methods(
        tmp_path: Path, other: bool, outside: str, names: str) -> None:
    """`actor = ActorPPOTrainer(...)`, then `actor.replay_buffer = NaiveReplayBuffer(...)` in another module
    (or a local holding one, or a parameter annotated with the trainer's class): the trainer's
    `DataLoader(self.replay_buffer, collate_fn=self.replay_buffer.collate_fn)` reaches the buffer's collate
    method, whose rows, padded on the left, reach the method that reads each row's start:
    pad-sides-disagree, as when `__init__` stores it. Another module storing another class there too
    leaves the attribute unknown (silent). Renamed, the same."""
    spelled = _BUFFER_NAMES[names]
    given = dict(spelled, side="", stored="self.size = micro_train_batch_size", loader=_DIRECT.format(**spelled),
                 loop=_FOR)
    files = {name: text.format(**given) for name, text in _BUFFER_FILES.items()}
    files["main.py"] = _OUTSIDE[outside].format(**spelled)
    if other:
        files["reset.py"] = (f"from ppo_actor import {spelled['trainer']}\nfrom replay_buffer import {spelled['other']}"
                             f"\n\n\ndef reset(n):\n    actor = {spelled['trainer']}(n, 0)\n"
                             f"    actor.{spelled['attr']} = {spelled['other']}(n)\n    return actor\n")
    called = next(i for i, line in enumerate(files["replay_buffer.py"].splitlines(), 1) if "good = " in line)
    assert _lint(tmp_path, files) == ([] if other else [("replay_buffer.py", called, "pad-sides-disagree")])


def test_attributes_stored_from_outside_are_summarised_only_on_instances_a_local_holds() -> None:
    """`FileFacts.instances`' outside stores: a store into a local's instance (`t = Trainer(); t.buffer =
    Buffer()`, or a local holding one, `t.pool = buf`) is kept with the instance's callee, a value that is
    no call, or a tuple's target, as ``""`` (no one class); a store into a parameter that is not annotated
    (`args.lr = ...`) or into a local bound twice is left out."""
    from layoutcheck.model.origins import origins_and_instances

    source = textwrap.dedent('''
        from data import Buffer, Trainer


        def build(args, n):
            t = Trainer(n)
            t.buffer = Buffer(n)
            buf = Buffer(n)
            t.pool = buf
            t.size = n
            t.a, t.b = Buffer(n), 1
            args.lr = Buffer(n)
            u = Trainer(n)
            u = Trainer(n + 1) if n else None
            u.buffer = Buffer(n)
            return t
    ''')
    assert origins_and_instances(ast.parse(source))[1][4] == (
        ("data.Trainer", "a", ""), ("data.Trainer", "b", ""), ("data.Trainer", "buffer", "data.Buffer"),
        ("data.Trainer", "pool", "data.Buffer"), ("data.Trainer", "size", ""))


_INHERITED = {
    "base.py": '''
class {base}:
    def __init__(self, step=8):
        self.step = step

    def {helper}(self, n, m):
        return (n + m - 1) // m * m

    def {build}(self, seqs):
        return self.{helper}(max(len(s) for s in seqs), self.step)
''',
    "derived.py": '''
from base import {base}


class {derived}({base}):
    def {build}(self, seqs):
        return self.{helper}(max(len(s) for s in seqs), 32)


class Unrelated:
    def {helper}(self, n, m):
        return n
''',
}


@pytest.mark.parametrize("spelled", [
    {"base": "TuneDataset", "derived": "ChatTuneDataset", "helper": "_ceil_to_nearest", "build": "collate_fn"},
    {"base": "Rows", "derived": "LabelledRows", "helper": "up", "build": "gather"},
], ids=["as Megatron-Bridge names them", "renamed"])
def test_a_method_a_base_defines_is_reached_through_the_receiver_and_rounds_as_a_pad(tmp_path: Path, spelled) -> None:
    """`self.up(n, 32)` in a subclass reaches the base's `up` (another module), though another class
    defines a method of that name; the call is a pad of the subclass's method with the unit it passes
    (`method_pads`: the helper's positions count its receiver, the call's arguments do not), and the
    override's literal unit against the base's configured one is flagged (disagreeing-owners)."""
    files = {name: text.format(**spelled) for name, text in _INHERITED.items()}
    project = _graph(files)
    index = next(i for i, f in enumerate(project.files) if f.module == "derived")
    build = next(j for j, f in enumerate(project.files[index].facts.functions)
                 if f.qualname == f"{spelled['derived']}.{spelled['build']}")
    call = next(c for c in project.files[index].facts.functions[build].calls if c.callee.endswith(spelled["helper"]))
    target = project.resolve((index, build), call)
    assert target is not None and project.signature(target).qualname == f"{spelled['base']}.{spelled['helper']}"
    assert [p.unit for p in project.method_pads((index, build))] == ["32"]
    base = next(i for i, f in enumerate(project.files) if f.module == "base")
    base_build = next(j for j, f in enumerate(project.files[base].facts.functions)
                      if f.qualname == f"{spelled['base']}.{spelled['build']}")
    assert [p.unit for p in project.method_pads((base, base_build))] == ["step"]
    assert _lint(tmp_path, files) == [("derived.py", 7, "disagreeing-owners")]


_SUPER_BASE = '''class Finisher:
    def attach(self, sample, routing):
        if routing is not None:
            sample["routing"] = routing
        return sample
'''
_SUPER_CALLS = {
    # the subclass fills the base method's parameter through `super().m(...)`
    "super().m(x)": ("finisher.py", _SUPER_BASE, '''from trainer.finisher import Finisher


class RoutedFinisher(Finisher):
    def attach(self, sample, choices):
        routing = routing_tensor(choices, sample["input_ids"], sample["attention_mask"])
        return super().attach(sample, routing)
'''),
    "super(Cls, self).m(x)": ("finisher.py", _SUPER_BASE, '''from trainer.finisher import Finisher


class RoutedFinisher(Finisher):
    def attach(self, sample, choices):
        routing = routing_tensor(choices, sample["input_ids"], sample["attention_mask"])
        return super(RoutedFinisher, self).attach(sample, routing)
'''),
    # the base's base defines it: the first class in the method resolution order that does
    "inherited by the base": ("finisher.py", _SUPER_BASE + '''

class PlainFinisher(Finisher):
    def close(self):
        return None
''', '''from trainer.finisher import PlainFinisher


class RoutedFinisher(PlainFinisher):
    def attach(self, sample, choices):
        routing = routing_tensor(choices, sample["input_ids"], sample["attention_mask"])
        return super().attach(sample, routing)
'''),
    # a constructor's parameter filled through `super().__init__(...)`
    "super().__init__(x)": ("finished.py", '''class Finished:
    def __init__(self, sample, routing):
        if routing is not None:
            sample["routing"] = routing
        self.sample = sample
''', '''from trainer.finished import Finished


class RoutedSample(Finished):
    def __init__(self, sample, choices):
        routing = routing_tensor(choices, sample["input_ids"], sample["attention_mask"])
        super().__init__(sample, routing)
'''),
    # what the base method returns, passed on by the override
    "x = super().m()": ("router.py", '''from trainer.rollout import routing_tensor


class Router:
    def routing(self, sample, choices):
        return routing_tensor(choices, sample["input_ids"], sample["attention_mask"])
''', '''from trainer.router import Router


class StoringRouter(Router):
    def routing(self, sample, choices):
        routing = super().routing(sample, choices)
        sample["routing"] = routing
        return sample
'''),
}


def _super_project(base: tuple[str, str], subclass: str) -> dict[str, str]:
    """The pad-sides pair with the routing rows' store moved into a base class of another module, reached
    from a subclass through `super()` (the subclass beside the producer, or in a module of its own when
    the base method calls the producer)."""
    producer = (_PAD_SIDES / "rollout.py").read_text().split("def attach_routing")[0]
    files = {"replay.py": (_PAD_SIDES / "replay.py").read_text(), base[0]: base[1]}
    if "import routing_tensor" in base[1]:
        files.update({"rollout.py": producer, "store.py": subclass})
    else:
        files["rollout.py"] = producer + subclass
    # a package imported by its name, as trainers import their modules
    return {"trainer/__init__.py": "", **{f"trainer/{name}": text for name, text in files.items()}}


@pytest.mark.parametrize("kind", list(_SUPER_CALLS), ids=list(_SUPER_CALLS))
def test_a_value_passed_through_super_reaches_the_base_method(tmp_path: Path, kind: str) -> None:
    """`super().attach(sample, routing)` (and `super(Cls, self)`, `super().__init__`) in a subclass whose base
    is imported from another module runs the base's method: its `routing` parameter receives the left-padded
    rows the reader takes from each row's start (pad-sides-disagree where they are placed), and a base method
    that returns them gives them to the override that stores them. The same once every name (classes,
    methods, receivers, fields, modules) is renamed; `callers_of` agrees with `callers` on every ``def``."""
    where, base, subclass = _SUPER_CALLS[kind]
    files = _super_project((where, base), subclass)
    placed = next(i for i, line in enumerate(files["trainer/rollout.py"].splitlines(), 1)
                  if "expect: pad-sides-disagree" in line)
    assert _lint(tmp_path / "named", files) == [("rollout.py", placed, "pad-sides-disagree")]

    renaming = rename_project(tmp_path / "named", tmp_path / "renamed")
    back = {new: old for old, new in renaming.modules.items()}
    found = [(back.get(Path(f.path).stem, Path(f.path).stem), f.line, f.rule)
             for f in lint_files(tmp_path / "renamed", {})]
    assert found == [("rollout", placed, "pad-sides-disagree")]
    calling = renaming.modules["store" if "trainer/store.py" in files else "rollout"]
    assert "super(" in (tmp_path / "renamed" / "trainer" / f"{calling}.py").read_text()
    assert "Finish" not in (tmp_path / "renamed" / "trainer" / f"{calling}.py").read_text()

    with contextlib.chdir(tmp_path / "named"):
        project = run(["."], use_cache=False, keep_project=True).project
    by_name = {ref: project.callers_of(ref) for ref, _ in project.defs() if ref[1]}
    every = _again(project)
    every.callers  # noqa: B018 - every call resolved first: `callers_of` then reads it
    assert by_name == {ref: every.callers_of(ref) for ref in by_name}
    reached = next(ref for ref in by_name if project.signature(ref).qualname in (
        "Finisher.attach", "Finished.__init__", "Router.routing"))
    assert [project.signature(caller).qualname for caller, _ in by_name[reached]] == [
        {"Finisher.attach": "RoutedFinisher.attach", "Finished.__init__": "RoutedSample.__init__",
         "Router.routing": "StoringRouter.routing"}[project.signature(reached).qualname]]


_NOT_THROUGH_SUPER = {
    # a class that is no base of the caller's has the method: `super()` never reaches it
    "another class's method": '''from trainer.finisher import Finisher, Keeper


class RoutedFinisher(Keeper):
    def attach(self, sample, choices):
        routing = routing_tensor(choices, sample["input_ids"], sample["attention_mask"])
        return super().attach(sample, routing)
''',
    # the base is a library's: nothing of the project runs
    "a library base": '''import torch


class RoutedFinisher(torch.nn.Module):
    def attach(self, sample, choices):
        routing = routing_tensor(choices, sample["input_ids"], sample["attention_mask"])
        return super().attach(sample, routing)
''',
    # `super(Base, self)` starts after the base: the base's own method is skipped
    "super(Base, self) skips the base": '''from trainer.finisher import Keeper


class RoutedFinisher(Keeper):
    def attach(self, sample, choices):
        routing = routing_tensor(choices, sample["input_ids"], sample["attention_mask"])
        return super(Keeper, self).attach(sample, routing)
''',
}


@pytest.mark.parametrize("kind", list(_NOT_THROUGH_SUPER), ids=list(_NOT_THROUGH_SUPER))
def test_super_reaches_only_the_bases_method(tmp_path: Path, kind: str) -> None:
    """The store of the rows is `Finisher.attach`; `super().attach(...)` from a class whose bases are `Keeper`
    (whose `attach` drops the rows) or a library's, or `super(Keeper, self)` past `Keeper` (a base with no
    `attach` above it), reaches no store of them (silent): the call is resolved by the class's bases, not
    by the method's name."""
    base = _SUPER_BASE + '''

class Keeper:
    def attach(self, sample, routing):
        return sample
'''
    files = _super_project(("finisher.py", base), _NOT_THROUGH_SUPER[kind])
    assert _lint(tmp_path, files) == []
