"""A piece of a split sequence rolled in another module (LC109 across modules, issue 28).

volcengine/verl 575d5a8ab: the engine slices the packed ids per sequence-parallel rank, puts the
slice in a dict of model inputs built in one method, and calls its module with ``**inputs`` in
another; the module's forward was replaced, through a local picked among imported functions, by a
fused forward that rolls ``input_ids`` to make its labels. Each case is a small project of real
files linted as a new user would (no configuration, `--preview`), one link of that chain at a time:

1. a function assigned onto a class through a local (``model.__class__.forward = fn``, ``fn`` one of
   several imported functions) is that class's forward;
2. calling a module object reaches its ``forward``;
3. a dict's entries keep where they came from when the dict is returned and spread with ``**``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from linttree import lint_files

_SPLIT = '''
import torch.nn.functional as F


def rank_slice(x, dim, world, rank):
    parts = x.size(dim) // world
    index = [slice(None)] * x.dim()
    index[dim] = slice(rank * parts, (rank + 1) * parts)
    return x[tuple(index)].contiguous()


def pad_and_slice(ids, world, rank):
    pad = (world - ids.size(1) % world) % world
    ids = F.pad(ids, (0, pad))
    ids = rank_slice(ids, dim=1, world=world, rank=rank)
    return ids, pad
'''

_FUSED = '''
import torch


def fused_forward(self, input_ids=None, labels=None, shift_labels=None):
    if shift_labels is not None:
        targets = shift_labels
    elif labels is not None:
        targets = torch.roll(labels, shifts=-1, dims=-1)
    else:
        targets = torch.roll(input_ids, shifts=-1, dims=-1)
    return self.head(input_ids).log_softmax(-1).gather(-1, targets.unsqueeze(-1))
'''

_PLAIN = '''
def plain_forward(self, input_ids=None, labels=None, shift_labels=None):
    return self.head(input_ids)
'''

_PATCH = '''
def use_fused(model, kind, enabled=False):
    if not enabled:
        return
    forward_fn = model.__class__.forward
    if kind == "plain":
        from plain import plain_forward

        forward_fn = plain_forward
    else:
        from fused import fused_forward

        forward_fn = fused_forward
    {assign}
'''

_ENGINE = '''
import torch
from parallel import pad_and_slice
from patch import use_fused


class Base:
    def __init__(self, module, world, rank, kind, fused):
        {apply}
        self.module, self.world, self.rank = module, world, rank


class Engine(Base):
    def prepare_inputs(self, ids):
        local, _ = pad_and_slice(ids, self.world, self.rank)
        inputs = {{"input_ids": local, "attention_mask": None}}
        extra = {{}}
        {fix}
        inputs.update(extra)
        return inputs, {{}}

    def forward_step(self, ids):
        inputs, _ = self.prepare_inputs(ids)
        return {call}(**inputs, use_cache=False)
'''
_FIX = 'extra["shift_labels"] = pad_and_slice(torch.roll(ids, shifts=-1, dims=-1), self.world, self.rank)[0]'


def _lint(tmp_path: Path, files: dict[str, str]) -> list[tuple[str, int]]:
    return sorted((Path(f.path).name, f.line) for f in lint_files(tmp_path, files) if f.rule == "disagreeing-shifts")


def _entry_line(engine: str) -> int:
    return next(i for i, text in enumerate(engine.splitlines(), 1) if '"input_ids": local' in text)


_APPLY = "use_fused(module, kind, enabled=fused)"


def _project(assign: str = "model.__class__.forward = forward_fn", fix: str = "pass",
             apply: str = _APPLY) -> dict[str, str]:
    return {
        "parallel.py": _SPLIT,
        "fused.py": _FUSED,
        "plain.py": _PLAIN,
        "patch.py": _PATCH.format(assign=assign),
        "engine.py": _ENGINE.format(fix=fix, call="self.module", apply=apply),
    }


@pytest.mark.parametrize(("assign", "flagged"), [
    ("model.__class__.forward = forward_fn", True),
    ("type(model).forward = forward_fn", False),
    ("model.forward_fn = forward_fn", False),
    ("pass", False),
], ids=["onto the instance's class", "onto a call's result: not followed", "onto the instance", "not assigned"])
def test_a_forward_assigned_through_a_local_onto_an_instances_class_is_reached(
        tmp_path: Path, assign: str, flagged: bool) -> None:
    """Link 1: ``model.__class__.forward = forward_fn``, the local bound to one of two functions each
    imported in its own arm (only the second rolls): each candidate counts, so the module call (link 2:
    ``self.module(...)`` in a subclass of the class that applies the patch) reaches the rolling one and
    the piece placed in the inputs is flagged at the dict's entry. Assigned onto the instance itself, or
    not at all, the call reaches nothing."""
    files = _project(assign=assign)
    expected = [("engine.py", _entry_line(files["engine.py"]))] if flagged else []
    assert _lint(tmp_path, files) == expected


@pytest.mark.parametrize("apply", ["use_fused(module, kind)", "use_fused(module, kind, enabled=False)", "pass"],
                         ids=["the gate left at its default", "the gate given False", "no patch applied"])
def test_a_module_of_a_class_that_does_not_apply_the_patch_reaches_nothing(tmp_path: Path, apply: str) -> None:
    """Link 2 with the class not known: ``self.module(...)`` reaches a forward assigned onto an instance's
    class only in a class that applies that patch with its gate given (``use_fused(..., enabled=...)``,
    whose early ``if not enabled: return`` skips it otherwise): a critic that calls the patch without the
    gate, or no patch at all, runs its model's own forward. Silent."""
    assert _lint(tmp_path, _project(apply=apply)) == []


def test_the_fix_passes_the_rolled_piece_and_is_silent(tmp_path: Path) -> None:
    """verl 575d5a8ab's fix: the engine also puts the globally rolled, then sliced, labels under the key
    whose presence skips the forward's roll (merged in by ``inputs.update(extra)``): silent."""
    assert _lint(tmp_path, _project(fix=_FIX)) == []


_NET = '''
import torch
from torch import nn


class FusedNet(nn.Module):
    def forward(self, input_ids=None, labels=None):
        return torch.roll(labels if labels is not None else input_ids, shifts=-1, dims=-1)


class PlainNet(nn.Module):
    def forward(self, input_ids=None, labels=None):
        return input_ids
'''

_CALLER = '''
from nets import FusedNet, PlainNet
from parallel import pad_and_slice


def step(ids, world, rank, labels):
    net = {net}()
    local, _ = pad_and_slice(ids, world, rank)
    return net(input_ids=local{labels})
'''


@pytest.mark.parametrize(("net", "labels", "flagged"), [
    ("FusedNet", "", True),
    ("FusedNet", ", labels=labels", False),
    ("PlainNet", "", False),
], ids=["a rolling forward", "given what skips the roll", "a forward that does not roll"])
def test_calling_a_module_whose_class_is_known_reaches_its_forward(
        tmp_path: Path, net: str, labels: str, flagged: bool) -> None:
    """Link 2: ``net = FusedNet(); net(input_ids=piece)`` runs ``FusedNet.forward``
    (``nn.Module.__call__``), which rolls ``input_ids`` unless ``labels`` is given: the piece is flagged
    at the argument. Given ``labels``, or a class whose forward does not roll, silent."""
    caller = _CALLER.format(net=net, labels=labels)
    files = {"parallel.py": _SPLIT, "nets.py": _NET, "caller.py": caller}
    line = next(i for i, text in enumerate(caller.splitlines(), 1) if "input_ids=local" in text)
    assert _lint(tmp_path, files) == ([("caller.py", line)] if flagged else [])


_DIRECT = '''
import torch
from fused import fused_forward
from parallel import pad_and_slice


class Engine:
    def prepare_inputs(self, ids, world, rank):
        local, _ = pad_and_slice(ids, world, rank)
        inputs = {{}}
        inputs["input_ids"] = local
        {fix}
        return inputs

    def forward_step(self, model, ids, world, rank):
        inputs = self.prepare_inputs(ids, world, rank)
        return fused_forward(model, **inputs)
'''


@pytest.mark.parametrize(("fix", "flagged"), [
    ("pass", True),
    ('inputs["shift_labels"] = pad_and_slice(torch.roll(ids, shifts=-1, dims=-1), world, rank)[0]', False),
], ids=["the piece alone", "with the rolled piece"])
def test_a_dict_built_in_one_method_and_spread_in_another_binds_its_entries_by_key(
        tmp_path: Path, fix: str, flagged: bool) -> None:
    """Link 3: the piece stored as ``inputs["input_ids"]`` in a dict one method returns, spread with
    ``**inputs`` into an imported function in another method, binds to its ``input_ids`` parameter,
    which it rolls: flagged at the store. With ``inputs["shift_labels"]`` set, the roll is skipped."""
    engine = _DIRECT.format(fix=fix)
    files = {"parallel.py": _SPLIT, "fused.py": _FUSED, "engine.py": engine}
    line = next(i for i, text in enumerate(engine.splitlines(), 1) if 'inputs["input_ids"] = local' in text)
    assert _lint(tmp_path, files) == ([("engine.py", line)] if flagged else [])


def test_a_split_of_the_rows_is_not_a_piece(tmp_path: Path) -> None:
    """The same chain with the slice taken along axis 0 (the batch's rows, ``dim=0``): each row keeps its
    whole sequence, so rolling it is right; silent."""
    files = _project()
    files["parallel.py"] = _SPLIT.replace("rank_slice(ids, dim=1,", "rank_slice(ids, dim=0,")
    assert _lint(tmp_path, files) == []


def test_defs_under_a_modules_branches_are_read_with_the_extractors_qualnames():
    # `if flash_available:` / `try:` arms define functions like any other place: the per-module readers of this
    # flow (returned dicts, splitters and rollers, forwards assigned onto classes) find them under the names the
    # extractor gives them, so the project joins the two.
    import ast

    from layoutcheck.model.extract import extract
    from layoutcheck.model.origins import value_origins
    from layoutcheck.model.settings import LintSettings
    from layoutcheck.model.syntax import defs_with_qualnames

    source = (
        "import torch\n"
        "if torch.cuda.is_available():\n"
        "    def inputs(x):\n"
        "        d = {'input_ids': x}\n"
        "        return d\n"
        "class Engine:\n"
        "    try:\n"
        "        def step(self):\n"
        "            def inner(y):\n"
        "                return y\n"
        "            return inner\n"
        "    except ImportError:\n"
        "        pass\n"
    )
    tree = ast.parse(source)
    named = sorted(name for name, _ in defs_with_qualnames(tree))
    assert named == sorted(f.qualname for f in extract(source, LintSettings()).functions if f.qualname != "<module>")
    assert named == ["Engine.step", "Engine.step.inner", "inputs"]
    _, dicts, _ = value_origins(tree)
    assert [(d[0], d[2]) for d in dicts] == [("inputs", "input_ids")]


_ACTOR = '''
from parallel import pad_and_slice


class Actor:
    def __init__(self, config, module, optimizer=None):
        self.config = config
        self.module = module
        self.optimizer = optimizer

    def forward_micro_batch(self, ids, world, rank):
        local, _ = pad_and_slice(ids, world, rank)
        return self.module(input_ids=local, use_cache=False)
'''

_ACTORS = "from .dp_actor import Actor\n\n__all__ = [\"Actor\"]\n"
"""The package re-exports the actor: the worker's ``from actors import Actor`` names ``actors.dp_actor.Actor``."""

_WORKER = '''
from patch import use_fused


class Worker:
    def build_module(self, module, kind, fused=False):
        use_fused(module, kind, enabled=fused)
        return module

    def init_model(self, module, kind):
        from actors import Actor

        fused = self.config.get("fused", False)
        self.module = self.build_module(module, kind, fused={fused})
        self.actor = Actor(config=self.config, module=self.module)
'''


@pytest.mark.parametrize(("fused", "flagged"), [("fused", True), ("False", False)],
                         ids=["the patching class builds the actor", "the patch's gate given False"])
def test_a_module_handed_to_a_constructor_by_a_class_that_patches_it_reaches_the_patched_forward(
        tmp_path: Path, fused: str, flagged: bool) -> None:
    """verl b178a3cd5 ``dp_actor.py``: the actor stores its module from a constructor argument
    (``self.module = module`` in ``__init__``, stored nowhere else) and calls it with this rank's piece of the
    packed ids; the worker that builds the actor (``Actor(module=self.module)``, the class imported in the
    method from the package that re-exports it) is the one that applied the patching helper with its gate given. The object's class is not known where it is called, so the module
    arrives through the constructor: the call reaches the forwards assigned onto an instance's class, which
    roll ``input_ids`` with no ``labels``: flagged at the argument. With the gate given ``False`` (nothing in
    the project applies the patch) the module runs its own forward: silent."""
    files = {"parallel.py": _SPLIT, "fused.py": _FUSED, "plain.py": _PLAIN,
             "patch.py": _PATCH.format(assign="model.__class__.forward = forward_fn"),
             "actors/__init__.py": _ACTORS, "actors/dp_actor.py": _ACTOR, "worker.py": _WORKER.format(fused=fused)}
    line = next(i for i, text in enumerate(_ACTOR.splitlines(), 1) if "input_ids=local" in text)
    assert _lint(tmp_path, files) == ([("dp_actor.py", line)] if flagged else [])


def test_a_module_handed_to_a_constructor_by_a_class_that_does_not_patch_it_reaches_nothing(
        tmp_path: Path) -> None:
    """The same actor built by a class that never applies the patch (a critic's worker), while another
    class of the project applies it to its own module: the actor's module runs its own forward; silent."""
    critic = _WORKER.format(fused="fused").replace("use_fused(module, kind, enabled=fused)", "pass")
    files = {"parallel.py": _SPLIT, "fused.py": _FUSED, "plain.py": _PLAIN,
             "patch.py": _PATCH.format(assign="model.__class__.forward = forward_fn"),
             "actors/__init__.py": _ACTORS, "actors/dp_actor.py": _ACTOR, "worker.py": critic,
             "other.py": "from patch import use_fused\n\n\nclass Other:\n    def setup(self, m, kind):\n"
                         "        use_fused(m, kind, enabled=True)\n        self.m = m\n"}
    assert _lint(tmp_path, files) == []


def test_a_library_is_known_by_what_the_module_imports_not_by_an_alias_spelling():
    """``F.pad`` under ``import torch.nn.functional as F`` and ``np.asarray`` under ``import numpy as np``
    are the libraries' (no origin); an ``F`` the module does not import from a library (here the project's,
    through a star import) is a callee like any other, whose result keeps where it came from."""
    import ast
    import textwrap

    from layoutcheck.model.origins import value_origins

    tree = ast.parse(textwrap.dedent('''
        from trainer.kernels import *
        import torch.nn.functional as G
        import numpy as np


        def build(x):
            return F.pack_rows(x)


        def pad(x):
            return G.pad(x, (0, 1))


        def arr(x):
            return np.asarray(x)


        def count(x):
            return len(x)


        def len(x):
            return 0


        def counted(x):
            return len(x)
    '''))
    returns, _, _ = value_origins(tree)
    assert sorted((name, origin[0]) for name, _, origin in returns) == [
        ("build", "F.pack_rows"), ("count", "len"), ("counted", "len")]


_SHIFTER = '''
import torch


class Shifter:
    def shift_tokens(self, input_ids, labels=None):
        if labels is not None:
            targets = labels
        else:
            targets = torch.roll(input_ids, shifts=-1, dims=-1)
        return targets
'''

_HELD = '''
from parallel import pad_and_slice
from shifting import Shifter

SHIFTER = Shifter()


class Trainer:
    def __init__(self):
        self.shifter = Shifter()

    def step(self, ids, world, rank, full):
        local, _ = pad_and_slice(ids, world, rank)
        shifter = Shifter()
        return {call}


def step(ids, world, rank, full):
    local, _ = pad_and_slice(ids, world, rank)
    return {free}
'''


@pytest.mark.parametrize(("call", "flagged"), [
    ("self.shifter.shift_tokens(local)", True),
    ("SHIFTER.shift_tokens(local)", True),
    ("Shifter.shift_tokens(shifter, local)", True),
    ("SHIFTER.shift_tokens(full, local)", False),
    ("Shifter.shift_tokens(shifter, full, local)", False),
], ids=["an instance in an attribute", "an instance in a global", "through the class", "the piece as the labels",
        "the piece as the labels, through the class"])
def test_a_method_reached_through_any_instance_binds_past_its_receiver(
        tmp_path: Path, call: str, flagged: bool) -> None:
    """``SHIFTER.shift_tokens(local)``, ``SHIFTER`` an instance the module holds (not the caller's own receiver;
    in a method and in a plain function alike), binds the piece to ``input_ids`` (the instance fills
    ``self``), which the method rolls: flagged at the argument, as ``self.shifter.shift_tokens(local)`` and
    ``Shifter.shift_tokens(shifter, local)`` (the receiver passed by hand) are. Given as the second argument,
    the piece binds ``labels``, whose presence skips the roll: silent."""
    caller = _HELD.format(call=call, free=call.replace("self.shifter", "SHIFTER").replace("shifter,", "SHIFTER,"))
    files = {"parallel.py": _SPLIT, "shifting.py": _SHIFTER, "caller.py": caller}
    lines = [i for i, text in enumerate(caller.splitlines(), 1) if text.strip().startswith("return")]
    assert _lint(tmp_path, files) == ([("caller.py", line) for line in lines] if flagged else [])


_BUILDER = '''
from parallel import pad_and_slice


def prepare_inputs(ids, world, rank):
    local, _ = pad_and_slice(ids, world, rank)
    inputs = {}
    inputs["input_ids"] = local
    return inputs
'''

_SPREADER = '''
from builder import prepare_inputs
from fused import fused_forward


class Engine:
    def forward_step(self, model, ids, world, rank):
        inputs = prepare_inputs(ids, world, rank)
        return fused_forward(model, **inputs)
'''


def test_a_one_file_run_finds_the_piece_a_call_in_another_module_places_in_its_file(tmp_path: Path) -> None:
    """The dict is built (the piece placed) in ``builder.py`` and spread in ``engine.py``: a run of
    ``builder.py`` alone, which answers for its own file without following the other files' calls
    (`piecereach._Join.run`'s ``only``), still follows the call whose spread dict is built there, and
    every file's pieces asked alone are those of the whole project's run."""
    import contextlib

    from layoutcheck.lint.runner import run
    from layoutcheck.lint.selection import SelectionOverrides
    from layoutcheck.model.piecereach import _Join, passed_pieces

    files = {"parallel.py": _SPLIT, "fused.py": _FUSED, "builder.py": _BUILDER, "engine.py": _SPREADER}
    line = next(i for i, text in enumerate(_BUILDER.splitlines(), 1) if 'inputs["input_ids"] = local' in text)
    assert _lint(tmp_path, files) == [("builder.py", line)]
    with contextlib.chdir(tmp_path):
        project = run(["builder.py"], use_cache=False, keep_project=True).project
        findings = run(["builder.py"], use_cache=False, overrides=SelectionOverrides(preview=True)).findings
    assert [(Path(f.path).name, f.line) for f in findings if f.rule == "disagreeing-shifts"] == [("builder.py", line)]
    assert project is not None
    every = _Join(project).run()
    assert every, "nothing placed: the test checks nothing"
    for index in range(len(project.files)):
        assert _Join(project).run(index).get(index, []) == every.get(index, []), project.files[index].display
    # Asked of one file, then of the others: the first alone, then every file's at once, the same lists.
    for order in (range(len(project.files)), reversed(range(len(project.files)))):
        project = run(["builder.py"], use_cache=False, keep_project=True, cwd=tmp_path).project
        for index in order:
            assert passed_pieces(project, index) == every.get(index, [])
