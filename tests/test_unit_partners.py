"""Two builds of one packed layout that meet in their caller across modules (LC122, issue 28).

verl 9bda8b9ac: the router replay packed its top-k indices with the packer the model's forward uses, but
without the FP8 unit switch the forward sets; the two meet only in the actor's step, which hands both the
same ``attention_mask``, and the forward is reached through a local picked by a registry getter that
returns a factory's nested ``def``. Each case is a small project of real files linted as a new user would
(no configuration, `--preview`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from linttree import lint_files

_PACK = '''
import math

import torch


def pack_rows(rows, keep, tp, fp8_units=False):
    unit = tp
    if fp8_units:
        unit = math.lcm(16, unit)
    sizes = keep.sum(-1)
    rounded = sizes + (unit - sizes % unit) % unit
    edges = torch.zeros(rows.shape[0] + 1, dtype=torch.long)
    edges[1:] = torch.cumsum(rounded, dim=0)
    return rows.new_zeros((int(edges[-1]), *rows.shape[2:])), edges
'''

_FORWARD = '''
from pack import pack_rows


def make_forward(vision: bool = False):
    def forward(model, ids, keep, tp):
        fp8 = model.config.fp8 in ("e4m3", "hybrid")
        packed, edges = pack_rows(ids, keep, tp, fp8_units=fp8)
        return model(packed, edges)

    return forward
'''

_REGISTRY = '''
from forwards import make_forward


def get_forward(cfg):
    if cfg.vision:
        return make_forward(True)
    return make_forward(False)
'''

_REPLAY = '''
from pack import pack_rows


def set_replay(choices, keep, cfg, tp):
    packed, _ = pack_rows(choices, keep, tp{fix})
    cfg.router.targets = packed.contiguous()
'''

_ACTOR = '''
from replay import set_replay


class Actor:
    def step(self, model, batch, tp):
        from registry import get_forward

        keep = batch["attention_mask"].bool()
        set_replay(batch["routes"], {replay_keep}, self.cfg, tp)
        forward_fn = get_forward(self.cfg)
        return forward_fn(model, batch["ids"], keep, tp)
'''


def _lint(tmp_path: Path, replay_keep: str = "keep", fix: str = "") -> list[tuple[str, int]]:
    files = {"pack.py": _PACK, "forwards.py": _FORWARD, "registry.py": _REGISTRY,
             "replay.py": _REPLAY.format(fix=fix), "actor.py": _ACTOR.format(replay_keep=replay_keep)}
    return sorted((Path(f.path).name, f.line) for f in lint_files(tmp_path, files) if f.rule == "stream-units-disagree")


_REPLAY_LINE = next(i for i, text in enumerate(_REPLAY.splitlines(), 1) if "pack_rows(" in text)


def test_a_build_without_the_switch_meets_one_with_it_through_their_caller(tmp_path: Path) -> None:
    """The replay packs without ``fp8_units``; the forward, reached through a local bound to a getter's
    result (the getter returns a factory's call, the factory its nested ``def``), packs with it; the actor
    hands both the same ``keep``: flagged at the replay's call."""
    assert _lint(tmp_path) == [("replay.py", _REPLAY_LINE)]


def test_the_fix_passes_the_switch_and_is_silent(tmp_path: Path) -> None:
    """verl 9bda8b9ac's fix: the replay passes the same switch, read from the configuration it is given."""
    fix = ', fp8_units=cfg.fp8 in ("e4m3", "hybrid")'
    assert _lint(tmp_path, fix=fix) == []


@pytest.mark.parametrize("replay_keep", ['batch["route_mask"]', "keep.clone()"],
                         ids=["another field", "a value derived from it"])
def test_builds_handed_different_values_are_not_partners(tmp_path: Path, replay_keep: str) -> None:
    """The replay handed another mask, or a value computed from the forward's (no longer the same local):
    nothing says the two streams are one batch's, as a backend path that never takes the switch may
    build its own; silent."""
    assert _lint(tmp_path, replay_keep=replay_keep) == []


def test_the_factorys_nested_def_is_what_a_local_holds() -> None:
    """The flow step alone: a local bound to a getter's call holds what the getter returns, followed
    through the factory it calls to the ``def`` the factory returns (and a function named, not called)."""
    import ast

    from layoutcheck.model.origins import NAMED, value_origins

    returns, _, passes = value_origins(ast.parse(_FORWARD))
    assert ("make_forward", -1, ("make_forward.forward", NAMED, ())) in returns
    _, _, passes = value_origins(ast.parse("from m import fused\n\ndef f(x):\n    fn = fused\n    return fn(x)\n"))
    assert [(p[1], p[3]) for p in passes] == [("fn", (("m.fused", NAMED, ()),))]


_FORWARD_GIVEN = '''
from pack import pack_rows


def forward(model, ids, keep, tp, fp8_units=False):
    packed, edges = pack_rows(ids, keep, tp, fp8_units=fp8_units)
    return model(packed, edges)
'''

_ACTOR_GIVEN = '''
from forwards import forward
from replay import set_replay


class Actor:
    def step(self, model, batch, tp):
        keep = batch["attention_mask"].bool()
        fp8 = self.cfg.fp8 if self.cfg.quantized else None
        {guard}
        set_replay(batch["routes"], keep, self.cfg, tp)
        return forward(model, batch["ids"], keep, tp, fp8_units=fp8)
'''


@pytest.mark.parametrize(("guard", "flagged"), [
    ("pass", True),
    ('if fp8 is not None and self.cfg.replay:\n            raise RuntimeError("fp8 units are not supported with replay")',
     False),
], ids=["the caller gives the switch", "the caller refuses the switch with the replay"])
def test_a_switch_the_caller_refuses_with_the_other_build_is_its_decision(
        tmp_path: Path, guard: str, flagged: bool) -> None:
    """The caller passes the switch on to the forward (a local of its own): flagged as above. Where it
    refuses that local set under some condition (``if fp8 is not None and replay: raise``, verl's guard
    against a bucket with the router replay), the combination is decided at run time: silent."""
    files = {"pack.py": _PACK, "forwards.py": _FORWARD_GIVEN, "replay.py": _REPLAY.format(fix=""),
             "actor.py": _ACTOR_GIVEN.format(guard=guard)}
    found = sorted((Path(f.path).name, f.line) for f in lint_files(tmp_path, files)
                   if f.rule == "stream-units-disagree")
    assert found == ([("replay.py", _REPLAY_LINE)] if flagged else [])
