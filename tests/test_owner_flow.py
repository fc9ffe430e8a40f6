"""Owners found by the flow of values (issue 28): the function that first computes a layout from data.

Each project below is shaped like a case read on a real trainer (written in this project's own
names): a function that converts and stores a packer's cumulative lengths (the message named the
converter and flagged the packer's peers), running sums of counts that are not sequence lengths
(verl's environment bins and resource-pool splits), a profiling script that makes up its lengths
(AReaL's `tools/`), an optimizer's element counts rounded up (DeepSpeed), and the words
`layoutcheck model` gives for how a length was used.
"""

from __future__ import annotations

import textwrap

from layoutcheck.init.findings import find
from layoutcheck.lint.engine import ProjectFile, analyse_project, lint_source, module_name_of
from layoutcheck.lint.registry import all_rules, rule_by_name
from layoutcheck.lint.settings import LintSettings


def project_of(files: dict[str, str]):
    entries = [
        ProjectFile(name, name, module_name_of(name), textwrap.dedent(text).lstrip("\n"), checked=True,
                    rules=tuple(all_rules()), is_package=name.endswith("__init__.py"))
        for name, text in files.items()
    ]
    _, project = analyse_project(entries, LintSettings(), all_rules=list(all_rules()))
    return project


def owners_of(project) -> dict[str, tuple[tuple[str, ...], str]]:
    return {project.function(r).qualname: (o.layouts, o.why) for r, o in project.owners.items()}


PACKER = '''
    import torch
    import torch.nn.functional as F


    def pack(tokens, args):
        unit = args.tp_size * args.data_pad_size_multiplier
        stream = torch.cat(tokens)
        pad = (unit - stream.size(0) % unit) % unit
        bounds = [0]
        for t in tokens:
            bounds.append(bounds[-1] + t.size(0))
        bounds.append(bounds[-1] + pad)
        return F.pad(stream, (0, pad)), bounds


    def to_batch(batch, args):
        stream, bounds = pack(batch["tokens"], args)
        out = {}
        out["tokens"] = stream
        out["cu_seqlens"] = torch.tensor(bounds, dtype=torch.int32)
        return out
'''


def test_the_owner_is_the_packer_not_the_function_that_converts_and_stores_its_result() -> None:
    project = project_of({"trainer/data.py": PACKER})
    assert owners_of(project) == {
        "pack": (("thd",), "computes the cumulative lengths that `to_batch` stores in `cu_seqlens`"),
    }
    proposed = [(f.target, f.kind) for f in find(project)]
    assert proposed == [("trainer.data:pack", "packer")]


def test_a_second_owner_of_the_stream_pad_names_the_packer_and_where_its_result_lives() -> None:
    replay = textwrap.dedent('''
        def replay_pad(replay, args):
            unit = args.tp_size * args.data_pad_size_multiplier
            return (unit - replay.size(0) % unit) % unit
    ''').lstrip("\n")
    result = lint_source(replay, "trainer/replay.py", [rule_by_name("padding-outside-owner")], LintSettings(),
                         files={"trainer/data.py": textwrap.dedent(PACKER).lstrip("\n")})
    found = result.findings
    assert [f.code for f in found] == ["LC102"]
    assert "the padding that `pack` (trainer/data.py:5) owns" in found[0].message
    assert "its `cu_seqlens`" in found[0].message


def test_running_sums_of_counts_that_are_not_sequence_lengths_build_no_packed_batch() -> None:
    project = project_of({
        "envs/bins.py": '''
            import numpy as np


            class TaskEnv:
                def _count_envs(self):
                    # trial bins of a task suite: a running sum of counts of initial states
                    self.trial_bins = []
                    for task in range(self.suite.num_tasks()):
                        self.trial_bins.append(len(self.suite.init_states(task)))
                    self.cumsum_trial_bins = np.cumsum(self.trial_bins)
        ''',
        "workers/pool.py": '''
            import numpy as np


            def split_pool(pool, split_size):
                sizes = [split_size] * (pool.world_size // split_size)
                starts = np.cumsum([0] + sizes[:-1])
                return [SubPool(start_index=starts[i], size=sizes[i]) for i in range(len(sizes))]
        ''',
        "tools/profile.py": '''
            import itertools

            import torch


            def create_packed_input(seq_lens, vocab_size):
                # a profiling script's made-up lengths and random tokens
                input_ids = torch.randint(100, vocab_size, (1, sum(seq_lens)))
                cu_seqlens = torch.tensor([0] + list(itertools.accumulate(seq_lens)), dtype=torch.int32)
                return {"input_ids": input_ids, "cu_seqlens": cu_seqlens, "max_seqlen": max(seq_lens)}
        ''',
        "utils/data.py": '''
            import torch
            import torch.nn.functional as F


            def pack_tensor_dict(data):
                # the lengths are the attention mask's row sums: measured from the batch
                attention_mask = data["attention_mask"]
                lens = attention_mask.sum(dim=1, dtype=torch.int32)
                cu_seqlens = F.pad(torch.cumsum(lens, dim=0, dtype=torch.int32), (1, 0))
                packed = {}
                packed["cu_seqlens"] = cu_seqlens
                packed["max_seqlen"] = int(lens.max())
                return packed
        ''',
    })
    assert owners_of(project) == {
        "pack_tensor_dict": (("thd",), "builds `cu_seqlens` (cumulative lengths of the packed batch)"),
    }


def test_an_optimizers_element_counts_rounded_up_are_no_samples_padded_lengths() -> None:
    project = project_of({
        "optim/adam.py": '''
            import torch


            class OnebitAdam:
                def step(self):
                    for group in self.param_groups:
                        for p in group["params"]:
                            state = self.state[p]
                            state["tensor_size"] = torch.numel(p.data)
                            state["corrected_tensor_size"] = state["tensor_size"]
                            if state["tensor_size"] % (self.size * self.divider) != 0:
                                state["corrected_tensor_size"] += (self.size * self.divider) - (
                                    state["tensor_size"] % (self.size * self.divider))
                            state["worker_error"] = torch.zeros(state["corrected_tensor_size"], device=p.device)
        ''',
        "optim/lamb.py": '''
            import torch


            class OnebitLamb:
                def step(self):
                    tensor_size = 0
                    for group in self.param_groups:
                        for p in group["params"]:
                            tensor_size += torch.numel(p.data)
                    corrected = tensor_size
                    if tensor_size % (self.size * self.divider) != 0:
                        corrected += (self.size * self.divider) - (tensor_size % (self.size * self.divider))
                    self.corrected_tensor_sizes.append(corrected)
        ''',
    })
    assert owners_of(project) == {}


def test_the_model_says_which_use_showed_a_length() -> None:
    project = project_of({
        "sp/pad.py": '''
            def sp_pad(seqlens_in_batch, sp_world_size):
                max_seqlen = seqlens_in_batch.max().item()
                pad_size = (sp_world_size - max_seqlen % sp_world_size) % sp_world_size
                return max_seqlen + pad_size
        ''',
    })
    (ref, function), = [(r, f) for r, f in project.functions() if f.qualname == "sp_pad"]
    whys = {(subject, word): why for subject, word, _, why in function.spaces}
    assert whys[("max_seqlen", "true length T")] == "rounded up to a multiple or divided into chunks"


def _lc102(source: str, files: dict[str, str]) -> list[str]:
    result = lint_source(textwrap.dedent(source).lstrip("\n"), "trainer/example.py",
                         [rule_by_name("padding-outside-owner")], LintSettings(),
                         files={k: textwrap.dedent(v).lstrip("\n") for k, v in files.items()})
    assert not result.errors, result.errors
    return [f"{f.line}: {f.message}" for f in result.findings]


def test_the_common_width_of_two_padded_batches_is_no_true_length() -> None:
    # open-instruct's DPO concatenation: chosen and rejected padded to the wider of the two batches
    found = _lc102('''
        import torch.nn.functional as F


        def pad_to_length(tensor, length, pad_value):
            if tensor.size(-1) >= length:
                return tensor
            return F.pad(tensor, (0, length - tensor.size(-1)), value=pad_value)


        def concatenated_inputs(batch):
            width = max(batch["chosen_input_ids"].shape[1], batch["rejected_input_ids"].shape[1])
            return pad_to_length(batch["chosen_input_ids"], width, 0), pad_to_length(batch["rejected_input_ids"], width, 0)


        def one_row(tokens):
            # one sample's own length taken for the padded width: still flagged
            return pad_to_length(tokens, len(tokens), 0)
    ''', {"trainer/data.py": PACKER})
    assert len(found) == 1 and found[0].startswith("17: `pad_to_length` gets `len(tokens)`, a true length"), found


def test_zero_s_parameter_count_alignment_is_no_second_owner_of_a_token_layout() -> None:
    # DeepSpeed: a flat buffer of a parameter group rounded up; an optimizer elsewhere rounds its own counts
    found = _lc102('''
        import math


        def group_buffers(groups, nccl_alignment, world_size):
            for params in groups:
                numel = sum(p.numel() for p in params)
                alignment = nccl_alignment * world_size
                yield int(math.ceil(numel / alignment)) * alignment
    ''', {"optim/adam.py": '''
        import torch


        class OnebitAdam:
            def step(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        state = self.state[p]
                        state["tensor_size"] = torch.numel(p.data)
                        state["corrected_tensor_size"] = state["tensor_size"]
                        if state["tensor_size"] % (self.size * self.divider) != 0:
                            state["corrected_tensor_size"] += (self.size * self.divider) - (
                                state["tensor_size"] % (self.size * self.divider))
                        state["worker_error"] = torch.zeros(state["corrected_tensor_size"], device=p.device)
    '''})
    assert found == []
