"""Boundary contracts: parsed from configuration, installed around any function, checked on its calls.

The functions here are small and written for each invariant, with names
that are nobody's trainer's (a contract reads the names it is given, never
Miles's); the whole trainer with planted bugs is ``tests/test_boundary_runs.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from layoutcheck import LayoutChecker, LayoutError, LayoutSpecError
from layoutcheck.errors import ConfigError
from layoutcheck.runtime.checker.boundaries import Coordinates, read_field
from layoutcheck.runtime.checker.values import Deferred, Request, Snapshot, on_host
from layoutcheck.runtime.contract.boundary import parse_boundary, parse_field, parse_source
from layoutcheck.runtime.contract.expressions import MISSING, parse_expr, parse_path

# --- parsing ---------------------------------------------------------------------------------------


def test_a_field_is_a_space_with_what_it_holds():
    f = parse_field("ids", "P packed cp", root="returns")
    assert (f.key, f.holds, f.run_scheme, f.space.packed, f.space.basis) == ("returns.ids", "data", True, True, "P")
    assert f.resolved("allgather").cp.scheme == "allgather"
    assert f.binds is None  # a CP-local stream measures no sample by itself
    assert parse_field("cu", "cu P packed", root="returns").binds == "P"
    assert parse_field("m", "mask T", root="args").binds == "T"
    assert parse_field("x", "T-1", root="args").binds == "T-1"
    assert parse_field("s", "schedule", root="returns").space is None


@pytest.mark.parametrize(("value", "message"), [
    ("P pakced", r"returns.x: space 'P pakced': unknown word 'pakced'"),
    ("cu P", r"returns.x: cumulative lengths belong to a packed stream"),
    ("mask T zigzag", r"returns.x: a mask selects one sample's positions"),
    ("P cp zigzag", r"either `cp` .* or a scheme"),
    ({"spce": "P"}, r"returns.x: unknown key `spce`"),
    ({"space": "len P", "from": "args.y"}, r"only data is compared with its source"),
    ("rows T", r'returns.x: say on which side the rows are padded: "rows T left"'),
    ("rows T packed left", r'a row-padded batch holds each sample.s positions whole in its row; write "rows T left"'),
    ({"space": "T", "lengths": "args.n"}, r"returns.x.lengths: only a row-padded batch"),
])
def test_a_bad_field_names_its_key(value, message):
    with pytest.raises(LayoutSpecError, match=message):
        parse_field("x", value, root="returns")


def test_a_boundary_refuses_keys_and_references_it_does_not_know():
    with pytest.raises(LayoutSpecError, match=r"unknown key `unti`"):
        parse_boundary("m:f", {"args": {"x": "T"}, "unti": 8})
    with pytest.raises(LayoutSpecError, match=r"returns.0.from: `args.z` is not one of this boundary's fields"):
        parse_boundary("m:f", {"args": {"x": "T"}, "returns": {"0": {"space": "P cp", "from": "args.z"}}})
    with pytest.raises(LayoutSpecError, match=r'args.ids.mask: `args.n` holds len; the rows. mask is a `mask` field'):
        parse_boundary("m:f", {"args": {"ids": {"space": "rows T left", "mask": "args.n"}, "n": "len T"}})
    with pytest.raises(LayoutSpecError, match=r'args.ids.lengths: `args.m` holds mask; the rows. lengths are a `len`'):
        parse_boundary("m:f", {"args": {"ids": {"space": "rows T left", "lengths": "args.m"}, "m": "mask T"}})
    with pytest.raises(LayoutSpecError, match=r"says nothing"):
        parse_boundary("m:f", {"unit": 8})
    with pytest.raises(LayoutSpecError, match=r"inputs.qkv: the batch-builder role reads no `qkv`"):
        parse_boundary("m:f", {"role": "batch-builder", "inputs": {"qkv": "thd"}})
    with pytest.raises(LayoutSpecError, match=r"`unit\[1\]` .*: only lcm\(...\), max\(...\) and min\(...\) may be called"):
        parse_boundary("m:f", {"args": {"x": "T"}, "unit": [8, "(lambda: 3)()"]})


def test_nested_tables_and_quoted_dotted_keys_name_the_same_path():
    nested = parse_boundary("m:f", {"returns": {"1": {"cu_seqlens": "cu P packed"}}})
    quoted = parse_boundary("m:f", {"returns": {"1.cu_seqlens": "cu P packed"}})
    assert [f.key for f in nested.fields] == [f.key for f in quoted.fields] == ["returns.1.cu_seqlens"]


def test_paths_read_keys_attributes_indices_and_each_entry():
    @dataclass
    class Item:
        ids: object

    call = {"batch": {"tokens": [1, 2]}, "items": [Item("a"), Item("b")]}
    assert parse_path("args.batch.tokens.1").read(call) == 2
    assert parse_path("args.items.*.ids").read(call) == ["a", "b"]
    assert parse_path("returns.0.x").read(call, ({"x": 5},)) == 5
    assert parse_path("args.nothing").read(call) is MISSING
    with pytest.raises(LayoutSpecError, match=r"must start with `args.`"):
        parse_path("batch.tokens")


def test_expressions_read_parameters_and_coordinates_only():
    unit = parse_expr("tp * cp * 2 if cp > 1 else tp")
    assert unit.parameters == frozenset()
    assert [unit.evaluate({}, {"tp": 2, "cp": c, "rank": 0}) for c in (1, 2, 4)] == [2, 8, 16]
    ns = type("Args", (), {"data_pad_size_multiplier": 64})()
    assert parse_expr("args.data_pad_size_multiplier * tp").evaluate({"args": ns}, {"tp": 2}) == 128
    assert parse_expr("lcm(16, tp * 8)").evaluate({}, {"tp": 3}) == 48
    assert parse_expr("allgather if flag else zigzag").evaluate({"flag": True}) == "allgather"
    with pytest.raises(LayoutSpecError, match=r"is a tensor"):
        parse_expr("x").evaluate({"x": torch.ones(2)})
    with pytest.raises(LayoutSpecError, match=r"private attribute"):
        parse_expr("x.__class__")
    assert parse_source("megatron.core.parallel_state:get_context_parallel_world_size").target
    assert parse_source("mod:state().cp.size").attrs == ("cp", "size")
    assert parse_source(4).expr.value == 4


def test_the_configuration_names_the_key_and_the_file(tmp_path):
    from layoutcheck.configfile import load_config

    config = tmp_path / "layoutcheck.toml"
    config.write_text('[runtime.boundaries."pkg.mod:pack"]\nargs.ids = "T"\nreturns.0 = "P pakced"\n')
    with pytest.raises(ConfigError) as err:
        load_config(config).config
    text = str(err.value)
    assert str(config) in text and 'runtime.boundaries."pkg.mod:pack"' in text
    assert "returns.0: space 'P pakced': unknown word 'pakced'" in text
    config.write_text('[runtime.boundaries."not a target"]\nargs.ids = "T"\n')
    with pytest.raises(ConfigError, match=r"is not a function; write `package.module:function`"):
        load_config(config).config
    config.write_text('[runtime]\ncp-size = "1 +"\n')
    with pytest.raises(ConfigError, match=r"runtime.cp-size"):
        load_config(config).config


# --- the invariants on real calls ----------------------------------------------------------------


class Ranks:
    """A trainer's coordinates: a context-parallel size and rank, a tensor-parallel size."""

    def __init__(self, cp: int = 1, rank: int = 0, tp: int = 1) -> None:
        self.cp, self.rank, self.tp = cp, rank, tp


RANKS = Ranks()


def coordinates() -> Coordinates:
    return Coordinates(tp_size=parse_source(f"{__name__}:RANKS.tp", what="tp"),
                       cp_size=parse_source(f"{__name__}:RANKS.cp", what="cp"),
                       cp_rank=parse_source(f"{__name__}:RANKS.rank", what="rank"))


@pytest.fixture
def ranks():
    global RANKS
    saved = RANKS
    RANKS = Ranks(cp=2, rank=1, tp=2)
    yield RANKS
    RANKS = saved


def hook(fn, table, mode="raise"):
    checker = LayoutChecker(mode)
    return checker, checker.wrap_boundary(parse_boundary(f"{__name__}:{fn.__name__}", table, source_file="t.toml"),
                                          fn, coordinates())


def zigzag_part(t, length, cp, r, pad=0):
    t = torch.cat([t, t.new_full((length - t.shape[0],), pad)])
    c = -(-length // (2 * cp))
    t = torch.cat([t, t.new_full((2 * cp * c - t.shape[0],), pad)])
    return torch.cat([t[r * c:(r + 1) * c], t[(2 * cp - 1 - r) * c:(2 * cp - r) * c]])


def sizes_of(seqs, unit):
    return [-(-s.shape[0] // unit) * unit for s in seqs]


PACK = {
    "args": {"seqs": "T", "lengths": "len P"},
    "returns": {"0": {"space": "P packed cp", "from": "args.seqs"}, "1": "cu P packed"},
    "unit": ["2 * cp", "tp * 4"],
}


def good_pack(seqs, lengths):
    parts = [zigzag_part(s, n, RANKS.cp, RANKS.rank) for s, n in zip(seqs, lengths)]
    return torch.cat(parts).unsqueeze(0), [0, *[sum(lengths[:i + 1]) for i in range(len(lengths))]]


def test_a_correct_pack_is_clean(ranks):
    checker, pack = hook(good_pack, PACK)
    seqs = [torch.arange(1, n + 1) for n in (5, 13, 2)]
    out = pack(seqs, sizes_of(seqs, 8))
    assert out[0].shape == (1, (8 + 16 + 8) // 2)
    assert checker.violations == [] and checker.notes == []
    assert checker.checked["boundary calls"] == 1


def test_a_partner_field_left_unsliced_names_the_field_its_space_and_the_lengths(ranks):
    def pack_both(seqs, weights, lengths):
        stream, cu = good_pack(seqs, lengths)
        unsliced = torch.cat([torch.cat([w, w.new_zeros(n - w.shape[0])]) for w, n in zip(weights, lengths)])
        return stream, unsliced.unsqueeze(0), cu

    table = {"args": {"seqs": "T", "weights": "T", "lengths": "len P"},
             "returns": {"0": "P packed cp", "1": "P packed cp", "2": "cu P packed"}}
    _, pack = hook(pack_both, table)
    seqs = [torch.arange(1, n + 1) for n in (5, 13)]
    with pytest.raises(LayoutError) as err:
        pack(seqs, [s.float() for s in seqs], sizes_of(seqs, 8))
    (v,) = err.value.violations
    assert (v.invariant, v.field, v.actual, v.expected) == ("B4", "returns.1", 24, 12)
    assert "space P, packed, CP-local (zigzag)" in str(err.value) and "(call 1)" in v.where


def test_true_length_data_cut_at_padded_offsets_is_caught_by_its_values(ranks):
    def cut_wrong(seqs, lengths):
        flat, parts, start = torch.cat(seqs), [], 0
        for s, n in zip(seqs, lengths):
            parts.append(zigzag_part(flat[start:start + s.shape[0]], n, RANKS.cp, RANKS.rank))
            start += n  # a padded offset into true-length data
        return torch.cat(parts).unsqueeze(0), [0, *[sum(lengths[:i + 1]) for i in range(len(lengths))]]

    _, pack = hook(cut_wrong, PACK)
    seqs = [torch.arange(1, n + 1) * 10 + k for k, n in enumerate((5, 13))]
    with pytest.raises(LayoutError) as err:
        pack(seqs, sizes_of(seqs, 8))
    (v,) = err.value.violations
    assert (v.invariant, v.sample, v.field) == ("B6", 1, "returns.0")
    assert "should hold a true position" in v.problem and v.sizes["T"] == 13 and v.sizes["P"] == 16


def test_padding_is_tight_and_every_unit_divides_it(ranks):
    def one_unit(seqs):
        return [-(-s.shape[0] // 4) * 4 for s in seqs]  # 2 * cp only: tp * 4 = 8 forgotten

    def widest(seqs):
        top = -(-max(s.shape[0] for s in seqs) // 8) * 8
        return [top] * len(seqs)

    table = {"args": {"seqs": "T"}, "returns": "len P", "unit": ["2 * cp", "tp * 4"]}
    seqs = [torch.ones(n) for n in (3, 30, 9)]
    _, plan = hook(one_unit, table)
    with pytest.raises(LayoutError) as err:
        plan(seqs)
    assert {(v.invariant, v.sample) for v in err.value.violations} == {("B3", 0), ("B3", 2)}
    assert "unit `tp * 4` = 8 does not divide the padded length" in str(err.value)
    _, plan = hook(widest, table)
    with pytest.raises(LayoutError) as err:
        plan(seqs)
    assert {(v.invariant, v.sample, v.actual) for v in err.value.violations} == {("B2", 0, 32), ("B2", 2, 32)}
    _, plan = hook(widest, {**table, "tight": False})
    plan(seqs)  # not tight: only T <= P and the units


def test_samples_dropped_or_reordered_are_named(ranks):
    def drop_last(seqs, lengths):
        return list(seqs[:-1])

    def longest_first(seqs, lengths):
        return sorted(seqs, key=lambda s: -s.shape[0])

    table = {"args": {"seqs": "T", "lengths": "len P"}, "returns": "T"}
    seqs = [torch.ones(n) for n in (3, 30, 9)]
    _, f = hook(drop_last, table)
    with pytest.raises(LayoutError, match=r"the return value holds 2 samples, the arguments 3") as err:
        f(seqs, [8, 32, 16])
    assert err.value.violations[0].invariant == "B5"
    _, f = hook(longest_first, table)
    with pytest.raises(LayoutError, match=r"samples come back in another order") as err:
        f(seqs, [8, 32, 16])
    assert [v.invariant for v in err.value.violations] == ["B5"]


def test_a_schedule_holds_every_sample_once():
    def schedule(sizes):
        return [[0, 2], [2, 3]]

    _, f = hook(schedule, {"args": {"sizes": "len T"}, "returns": "schedule"})
    with pytest.raises(LayoutError, match=r"samples \[1\] in no micro-batch; samples \[2\] in more than one"):
        f([5, 6, 7, 8])


def test_masked_rows_and_device_style_lengths(ranks):
    # verl's shape: (B, S) ids whose true tokens a mask selects, packed into one zigzag stream
    def pack_rows(input_ids, attention_mask):
        out, cu = [], [0]
        for i in range(input_ids.shape[0]):
            d = input_ids[i, attention_mask[i]]
            n = -(-d.shape[0] // 8) * 8
            out.append(zigzag_part(d, n, RANKS.cp, RANKS.rank))
            cu.append(cu[-1] + n)
        return torch.cat(out).unsqueeze(0), torch.tensor(cu, dtype=torch.int32)

    table = {"args": {"input_ids": {"space": "T", "mask": "args.attention_mask"}, "attention_mask": "mask T"},
             "returns": {"0": {"space": "P packed cp", "from": "args.input_ids"}, "1": "cu P packed"},
             "unit": ["tp * cp * 2"]}
    checker, f = hook(pack_rows, table)
    ids = torch.arange(1, 25).reshape(2, 12)
    mask = torch.zeros(2, 12, dtype=torch.bool)
    mask[0, 2:9] = True
    mask[1, :12] = True
    f(ids, mask)
    assert checker.violations == [] and checker.notes == []


def test_a_function_that_does_not_fit_its_contract_is_refused_naming_what_is_missing():
    def zigzag(t, length, pad_value):
        return t

    with pytest.raises(LayoutSpecError) as err:
        hook(zigzag, {"samples": 1, "args": {"t": "T", "max_seq_len": "len P"}, "returns": "P cp"})
    text = str(err.value)
    assert f"cannot hook `{__name__}:" in text and "zigzag` under its boundary contract" in text
    assert "`args.max_seq_len` reads the parameter `max_seq_len`, which it does not have" in text
    assert "found (t, length, pad_value)" in text
    with pytest.raises(LayoutSpecError, match=r"`unit\[0\]` reads the parameter `factor`"):
        hook(zigzag, {"samples": 1, "args": {"t": "T"}, "unit": ["factor * 2"]})


def test_a_value_the_contract_cannot_read_is_one_configuration_problem_saying_what_to_write():
    def f(seqs):
        return {"ids": torch.ones(1, 8), "lengths": [8]}

    checker, g = hook(f, {"args": {"seqs": "T"}, "returns": "P packed"}, mode="record")
    for _ in range(3):
        assert g([torch.ones(3)])["lengths"] == [8]  # the call goes through, every time
    (problem,) = checker.problems
    assert checker.notes == [] and problem.key == f'runtime.boundaries."{__name__}:f".returns'
    assert problem.source == "t.toml" and str(problem).startswith(problem.key + " in t.toml: ")
    assert "`returns` should hold per-sample data" in str(problem) and "the call passed a dict" in str(problem)
    assert "it holds 2 array fields: name the one meant, such as `returns.ids`, `returns.lengths`" in str(problem)
    assert "could not be read (configuration problem)" in checker.summary()
    with pytest.warns(UserWarning, match=r"returns should hold|`returns` should hold"):  # raise mode: warned once
        _, g = hook(f, {"args": {"seqs": "T"}, "returns": "P packed"}, mode="raise")
        g([torch.ones(3)])


# --- values: at once on the CPU, later from a device ------------------------------------------------------


def test_device_values_are_never_read_in_the_call():
    from torch._subclasses.fake_tensor import FakeTensorMode

    f = parse_field("cu", "cu P packed", root="returns")
    with FakeTensorMode():
        cu = torch.empty((3,), dtype=torch.int32, device="cuda")
    reading, requests = read_field(f, cu, "zigzag", one=False)
    assert reading.cu is None and [r.kind for r in requests] == ["ints"]
    assert not on_host(requests[0])  # goes to a snapshot (or a note when there is no CUDA runtime), never .tolist()
    assert on_host(Request("cu", "ints", torch.tensor([0, 8])))


def test_deferred_checks_run_in_order_when_their_copies_are_done():
    class Event:
        def __init__(self):
            self.done = False

        def query(self):
            return self.done

        def synchronize(self):
            self.done = True

    ran = []
    queue = Deferred(limit=2)
    events = [Event(), Event()]
    for i, e in enumerate(events):
        queue.add(Snapshot({"x": [i]}, {"x": "ints"}, e), lambda got, i=i: ran.append((i, got["x"])))
    assert queue.poll() == 0 and ran == []  # nothing waits in a step
    events[1].done = True
    assert queue.poll() == 0  # the first copy is still going: order is kept
    events[0].done = True
    assert queue.poll() == 2 and ran == [(0, [0]), (1, [1])]
    assert queue.add(Snapshot({}, {}, Event()), print) and queue.add(Snapshot({}, {}, Event()), print)
    assert not queue.add(Snapshot({}, {}, Event()), print) and queue.dropped == 1


def test_the_contract_module_imports_no_torch():
    import subprocess
    import sys

    code = ("import sys, layoutcheck.runtime.contract.boundary, layoutcheck.runtime.contract.invariants;"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- roles under other names ---------------------------------------------------------------------------


def test_a_role_reads_its_inputs_from_the_functions_own_names(monkeypatch):
    # slime's producer is a method that keeps the trainer's args on `self`; here a renamed producer takes them
    # as `ns`: with `inputs.args = "args.ns.opts"` the producer role reads it there, and judges alike
    from minitrainer.args import make_args
    from minitrainer.data import get_rollout_data
    from minitrainer.parallel import get_parallel_state, parallel_state
    from minitrainer.rollout import make_rollout_ref
    from types import SimpleNamespace

    def fetch(ns, box):
        return get_rollout_data(ns.opts, box)

    args = make_args(bugs={"rollout_global_padding"})
    found = {}
    for name, fn, call, inputs in (
        ("miles", get_rollout_data, lambda f, ref: f(args, ref), None),
        ("renamed", fetch, lambda f, ref: f(SimpleNamespace(opts=args), ref),
         {"args": parse_path("args.ns.opts")}),
    ):
        checker = LayoutChecker("record", parallel_state=get_parallel_state)
        with parallel_state(cp_size=2, cp_rank=1):
            call(checker.wrap("producer", fn, inputs), make_rollout_ref([300, 1000, 129]))
        found[name] = [(v.invariant, v.sample, v.actual, v.expected) for v in checker.violations]
    assert found["renamed"] == found["miles"] and {v[0] for v in found["miles"]} == {"O3"}
    with pytest.raises(LayoutSpecError, match=r"it has no parameter `args`.*say where with `inputs.args`"):
        LayoutChecker("raise").wrap("producer", fetch)
    with pytest.raises(LayoutSpecError, match=r"`inputs.args` = `args.opts` reads the parameter `opts`"):
        LayoutChecker("raise").wrap("producer", fetch, {"args": parse_path("args.opts")})


# --- fields of any array kind -------------------------------------------------------------------------------


def test_numpy_masks_lengths_and_schedules_and_lists_of_numpy_ints_read_as_tensors_do():
    import numpy as np

    def pack_rows(input_ids, attention_mask, lengths):
        out = []
        for i in range(input_ids.shape[0]):
            d = input_ids[i][attention_mask[i]]
            out.append(np.concatenate([d, np.zeros(int(lengths[i]) - d.shape[0], d.dtype)]))
        return np.concatenate(out), [np.arange(0, 2), np.array([2])]

    table = {"args": {"input_ids": {"space": "T", "mask": "args.attention_mask"}, "attention_mask": "mask T",
                      "lengths": "len P"},
             "returns": {"0": {"space": "P packed", "from": "args.input_ids", "axis": 0}, "1": "schedule"},
             "unit": [8]}
    ids = np.arange(1, 37).reshape(3, 12)
    mask = np.zeros((3, 12), dtype=bool)
    for i, (a, b) in enumerate([(2, 9), (0, 12), (5, 6)]):
        mask[i, a:b] = True
    for lengths in (np.array([8, 16, 8]), [np.int64(8), np.int64(16), np.int64(8)], (8, 16, 8)):
        checker, f = hook(pack_rows, table)
        f(ids, mask, lengths)
        assert checker.violations == [] and checker.notes == [] and checker.problems == [], lengths
    checker, f = hook(pack_rows, table, mode="record")
    f(ids, mask, [8, 24, 8])  # sample 1 (12 tokens) padded to 24: more than one unit above its true length
    assert [(v.invariant, v.sample, v.actual) for v in checker.violations] == [("B2", 1, 24)]
    assert checker.problems == [] and checker.notes == []


def test_lists_of_lists_and_numpy_object_arrays_hold_one_entry_per_sample():
    import numpy as np

    def pad(rows, mask):
        return [r + [0] * (8 - len(r)) for r in rows]

    table = {"args": {"rows": "T", "mask": "mask T"}, "returns": {"space": "P", "from": "args.rows"}, "unit": [8]}
    checker, f = hook(pad, table)
    f([[1, 2, 3], [4, 5, 6, 7, 8]], [[1, 1, 1, 0], [1, 1, 1, 1, 1]])  # masks as lists of ints
    assert checker.violations == [] and checker.problems == []
    checker, f = hook(pad, table, mode="record")
    f([[1, 2, 3], [4, 5, 6, 7, 8]], [[1, 1, 1, 0], [1, 1, 1, 1]])  # sample 1's mask says 4 true tokens, not 5
    assert [(v.invariant, v.sample, v.actual, v.expected) for v in checker.violations] == [("B1", 1, 4, 5)]

    def per_sample(routed):
        return routed

    holder = np.empty(2, dtype=object)
    holder[:] = [np.ones((3, 2)), np.ones((5, 2))]
    checker, f = hook(per_sample, {"args": {"routed": "T"}, "returns": "T-1"}, mode="record")
    f(holder)  # numpy object arrays (verl's non_tensor_batch): one entry per sample, each (T_i, k)
    assert [(v.invariant, v.field, v.sample, v.actual, v.expected) for v in checker.violations] == [
        ("B1", "returns", 0, 3, 2), ("B1", "returns", 1, 5, 4)]


def test_a_packed_stream_kept_as_a_python_list_of_numbers_is_one_stream_not_one_sample_per_number():
    # a packer that returns a flat list was read as one sample per number: a false B5 on right data
    def pack(rows, lengths):
        out = [t for r, p in zip(rows, lengths) for t in [*r, *[0] * (p - len(r))]]
        if lengths[-1] == 4:
            out[5] = 9  # a token written where sample 1's padding belongs
        return out

    table = {"args": {"rows": "T", "lengths": "len P"},
             "returns": {"space": "P packed", "from": "args.rows", "pad-value": 0}}
    checker, f = hook(pack, table, mode="record")
    f([[1, 2, 3], [4, 5]], [4, 2])
    assert checker.violations == [] and checker.problems == [] and checker.notes == []
    f([[1, 2, 3], [4, 5]], [4, 4])  # still read position by position (B6)
    assert [(v.invariant, v.sample, v.actual) for v in checker.violations] == [("B6", 1, 9)]


def test_a_path_that_leads_nowhere_is_a_configuration_problem_naming_what_is_there():
    # a typo in a path was a note ("absent from the call") and raise mode ended "no layout violations", status 0
    @dataclass
    class Batch:
        batch: dict
        meta_info: dict

    def collate(data):
        return data.batch["input_ids"]

    checker, f = hook(collate, {"args": {"data.batch.input_idz": "T"}, "returns": "T"}, mode="record")
    f(Batch({"input_ids": [torch.ones(3)], "attention_mask": [torch.ones(3)]}, {}))
    (problem,) = checker.problems
    assert checker.notes == [] and problem.key.endswith('.args.data.batch.input_idz')
    assert ("`args.data.batch.input_idz` leads nowhere in this call: `args.data.batch` (a dict) has no "
            "`input_idz`; it has `input_ids`, `attention_mask`") in str(problem)
    checker, f = hook(collate, {"args": {"data.input_ids": "T"}, "returns": "T"}, mode="record")
    f(Batch({"input_ids": [torch.ones(3)]}, {}))  # a batch class's fields are read through its `batch`
    assert checker.problems == [] and checker.checked["boundary calls"] == 1
    checker, f = hook(collate, {"args": {"data.ids": "T"}, "returns": "T"}, mode="record")
    f(Batch({"input_ids": [torch.ones(3)]}, {}))
    assert "`args.data` (a Batch) has no `ids`; it has `batch`, `meta_info`, `input_ids` (in `batch`)" in str(
        checker.problems[0])


def test_a_row_padded_batch_s_lengths_must_agree_with_its_mask():
    def strip(input_ids, attention_mask, lengths):
        return [input_ids[i, input_ids.shape[1] - n:] for i, n in enumerate(lengths)]

    table = {"args": {"input_ids": {"space": "rows T left", "mask": "args.attention_mask", "lengths": "args.lengths"},
                      "attention_mask": "mask T", "lengths": "len T"},
             "returns": {"space": "T", "from": "args.input_ids"}}
    ids = torch.arange(1, 25).reshape(3, 8)
    mask = torch.zeros(3, 8, dtype=torch.bool)
    for i, n in enumerate([3, 8, 5]):
        mask[i, 8 - n:] = True
    checker, f = hook(strip, table)
    f(ids, mask, [3, 8, 5])
    assert checker.violations == [] and checker.problems == [] and checker.notes == []
    checker, f = hook(strip, table, mode="record")
    f(ids, mask, [3, 8, 4])  # a stale length for sample 2
    assert [(v.invariant, v.field, v.sample, v.actual, v.expected) for v in checker.violations][:1] == [
        ("B1", "args.lengths", 2, 4, 5)]
    assert "T_i disagrees with `args.attention_mask`" in checker.violations[0].problem
