"""Labels rolled in a callback after the forward cut them for context parallelism (LC109, issue 28).

verl-project/verl f19c1162a: the engine hands its labels whole, in a dict beside a nested ``def``
(``logits_processor``), to a packed forward picked from a module's dict of forwards; the forward cuts
every entry of the dict into this rank's two zigzag chunks of each sample (a buffer filled row by row)
and calls the callback with them spread (``**args``); the callback rolls the labels by one: a roll of
a piece, whose last target wraps from the next chunk. Each case is a small project of real files
linted as a new user would (no configuration, ``--preview``), one link at a time:

1. a splitter that cuts a window ``k * w : (k + 1) * w`` of each row of a parameter and packs the
   windows (into a buffer's slices, or appended to a list then concatenated) returns a piece;
2. a function passed as an argument, called in the callee with ``**`` of a dict whose entries the
   callee cut, rolls a piece when it rolls one of the dict's keys;
3. a function looked up in a module's dict of functions (``return REGISTRY[kind]``) is each of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from linttree import lint_files

_UTIL = '''
import torch


def preprocess_packed_seqs_no_padding(input_ids, cp_size, cp_rank, seqlens, need_roll=False):
    batch_size = input_ids.shape[0]
    input_ids_rmpad = torch.zeros(sum(seqlens) // cp_size, dtype=input_ids.dtype)
    start_idx = 0
    for i in range(batch_size):
        d = input_ids[i]
        if need_roll:
            d = torch.roll(d, shifts=-1, dims=0)
        half_seqlen = seqlens[i] // cp_size // 2
        input_ids_rmpad[start_idx : start_idx + half_seqlen] = d[half_seqlen * cp_rank : half_seqlen * (cp_rank + 1)]
        remain_start = seqlens[i] - half_seqlen * (cp_rank + 1)
        tail = d[remain_start : remain_start + half_seqlen]
        input_ids_rmpad[start_idx + half_seqlen : start_idx + 2 * half_seqlen] = tail
        start_idx += 2 * half_seqlen
    return input_ids_rmpad.unsqueeze(0), seqlens
'''

_FORWARD = '''
from util import preprocess_packed_seqs_no_padding


def gptmodel_forward_no_padding(model, input_ids, cp_size, cp_rank, seqlens, logits_processor=None,
                                logits_processor_args=None):
    input_ids_rmpad, _ = preprocess_packed_seqs_no_padding(input_ids, cp_size, cp_rank, seqlens)
    output = model(input_ids_rmpad)
    if logits_processor is None:
        return output
    args = {{k: {cut} for k, v in logits_processor_args.items()}}
    return logits_processor(output, **args)
'''
_CUT = "preprocess_packed_seqs_no_padding(v, cp_size, cp_rank, seqlens)[0]"

_REGISTRY = '''
from model_forward import gptmodel_forward_no_padding

MODEL_FORWARD_NOPAD_REGISTRY = {"llama": gptmodel_forward_no_padding, "qwen2": gptmodel_forward_no_padding}


def get_mcore_forward_no_padding_fn(arch):
    return MODEL_FORWARD_NOPAD_REGISTRY[arch]
'''

_ENGINE = '''
import torch

from registry import get_mcore_forward_no_padding_fn


class MegatronEngineWithLMHead:
    def forward_step(self, model, input_ids, seqlens, arch):
        label = input_ids.clone()
        forward_fn = get_mcore_forward_no_padding_fn(arch)

        def logits_processor(logits, label):
            label = torch.roll(label, shifts=-1, dims=1)
            return torch.log_softmax(logits, -1).gather(-1, label.unsqueeze(-1)).squeeze(-1)

        logits_processor_args = {"label": label}
        return forward_fn(model, input_ids, self.cp_size, self.cp_rank, seqlens,
                          logits_processor=logits_processor, logits_processor_args=logits_processor_args)
'''

_RENAMES = {
    "preprocess_packed_seqs_no_padding": "chunk_rows", "input_ids_rmpad": "local", "half_seqlen": "w",
    "gptmodel_forward_no_padding": "run_packed", "logits_processor_args": "hook_inputs",
    "logits_processor": "hook", "label": "want", "MODEL_FORWARD_NOPAD_REGISTRY": "TABLE",
    "get_mcore_forward_no_padding_fn": "pick", "MegatronEngineWithLMHead": "Worker", "forward_step": "go",
    "cp_size": "n", "cp_rank": "r", "seqlens": "lens",
}


def _renamed(text: str) -> str:
    for old, new in _RENAMES.items():  # longest names first where one holds another (`label` after `..._args`)
        text = text.replace(old, new)
    return text


def _project(util: str = _UTIL, cut: str = _CUT, engine: str = _ENGINE, registry: str = _REGISTRY,
             renamed: bool = False) -> dict[str, str]:
    files = {"util.py": util, "model_forward.py": _FORWARD.format(cut=cut), "registry.py": registry,
             "engine.py": engine}
    return {name: _renamed(text) if renamed else text for name, text in files.items()}


def _lint(tmp_path: Path, files: dict[str, str]) -> list[tuple[str, int]]:
    return sorted((Path(f.path).name, f.line) for f in lint_files(tmp_path, files) if f.rule == "disagreeing-shifts")


def _roll_line(engine: str) -> int:
    return next(i for i, text in enumerate(engine.splitlines(), 1) if "torch.roll(" in text)


@pytest.mark.parametrize("renamed", [False, True], ids=["as verl names it", "renamed"])
def test_a_callback_rolling_what_a_splitting_forward_hands_it_is_flagged_at_its_roll(tmp_path: Path,
                                                                                    renamed: bool) -> None:
    assert _lint(tmp_path, _project(renamed=renamed)) == [("engine.py", _roll_line(_ENGINE))]


def test_the_fix_rolls_the_rows_before_the_cut_and_is_silent(tmp_path: Path) -> None:
    """verl's fix: the forward asks the splitter to roll the labels' rows before cutting them, and the
    callback no longer rolls."""
    cut = "preprocess_packed_seqs_no_padding(v, cp_size, cp_rank, seqlens, need_roll=(k == 'label'))[0]"
    engine = _ENGINE.replace("            label = torch.roll(label, shifts=-1, dims=1)\n", "")
    assert _lint(tmp_path, _project(cut=cut, engine=engine)) == []


@pytest.mark.parametrize("cut", ["v.contiguous()",
                                 "preprocess_packed_seqs_no_padding(v, cp_size, cp_rank, seqlens)[1]"],
                         ids=["entries handed whole", "another element of the splitter's result"])
def test_entries_the_forward_does_not_cut_are_whole_and_rolling_them_is_silent(tmp_path: Path, cut: str) -> None:
    assert _lint(tmp_path, _project(cut=cut)) == []


def test_a_packer_that_keeps_each_row_whole_is_no_splitter(tmp_path: Path) -> None:
    """Rows packed whole (no CP: ``buf[s : s + n] = row``): the stream's rows each keep their sequence,
    so a roll wraps only at a sample's end, as for any packed batch; silent here."""
    util = '''
import torch


def preprocess_packed_seqs_no_padding(input_ids, cp_size, cp_rank, seqlens):
    input_ids_rmpad = torch.zeros(sum(seqlens), dtype=input_ids.dtype)
    start_idx = 0
    for i in range(input_ids.shape[0]):
        d = input_ids[i]
        input_ids_rmpad[start_idx : start_idx + seqlens[i]] = d[: seqlens[i]]
        start_idx += seqlens[i]
    return input_ids_rmpad.unsqueeze(0), seqlens
'''
    assert _lint(tmp_path, _project(util=util)) == []


def test_a_roll_of_a_key_the_dict_does_not_hold_is_silent(tmp_path: Path) -> None:
    engine = _ENGINE.replace('{"label": label}', '{"mask": label}').replace(
        "def logits_processor(logits, label):", "def logits_processor(logits, label=None, mask=None):")
    assert _lint(tmp_path, _project(engine=engine)) == []


def test_a_forward_picked_from_a_dict_of_forwards_that_do_not_cut_is_silent(tmp_path: Path) -> None:
    """The registry's forwards are each followed: here the only one hands the labels whole."""
    registry = _REGISTRY.replace("from model_forward import gptmodel_forward_no_padding",
                                 "from plain import gptmodel_forward_no_padding")
    files = _project(registry=registry)
    files["plain.py"] = '''
def gptmodel_forward_no_padding(model, input_ids, cp_size, cp_rank, seqlens, logits_processor=None,
                                logits_processor_args=None):
    return logits_processor(model(input_ids), **logits_processor_args)
'''
    assert _lint(tmp_path, files) == []


_PACK = '''
import torch


def zigzag_pack(rows, rank, ranks):
    parts = []
    for row in rows:
        half = row.shape[0] // (2 * ranks)
        parts.append(row[half * rank : half * (rank + 1)])
        parts.append(row[row.shape[0] - half * (rank + 1) : row.shape[0] - half * rank])
    return torch.cat(parts)


def step(ids, rank, ranks):
    local = zigzag_pack(ids, rank, ranks)
    return torch.roll(local, -1, dims=-1)
'''


@pytest.mark.parametrize("renamed", [False, True], ids=["as written", "renamed"])
def test_windows_of_each_row_appended_and_concatenated_are_a_piece(tmp_path: Path, renamed: bool) -> None:
    text = _PACK
    if renamed:
        for old, new in {"zigzag_pack": "take", "parts": "acc", "row": "sample", "half": "h", "rank": "me",
                         "local": "mine"}.items():
            text = text.replace(old, new)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "torch.roll(" in t)
    assert _lint(tmp_path, {"pack.py": text}) == [("pack.py", line)]


def test_rows_rolled_before_the_windows_are_cut_are_silent(tmp_path: Path) -> None:
    text = _PACK.replace("    local = zigzag_pack(ids, rank, ranks)\n    return torch.roll(local, -1, dims=-1)",
                         "    return zigzag_pack([torch.roll(r, -1, dims=-1) for r in ids], rank, ranks)")
    assert _lint(tmp_path, {"pack.py": text}) == []


def test_the_forward_called_by_name_is_reached_without_the_dict_of_forwards(tmp_path: Path) -> None:
    engine = _ENGINE.replace("from registry import get_mcore_forward_no_padding_fn",
                             "from model_forward import gptmodel_forward_no_padding").replace(
        "forward_fn = get_mcore_forward_no_padding_fn(arch)", "forward_fn = None").replace(
        "return forward_fn(", "return gptmodel_forward_no_padding(")
    assert _lint(tmp_path, _project(engine=engine)) == [("engine.py", _roll_line(engine))]
