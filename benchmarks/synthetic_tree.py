"""Generates a trainer-shaped Python tree for the lint speed benchmark.

The tree imitates an RL/LLM training codebase: trainer and actor modules,
model code (attention, MLP, norms, embeddings), kernels (Triton-style grid
math with ``cdiv``), data pipelines, and utilities (config, logging, I/O,
distributed helpers, metrics). A few percent of the files mention padding or
sequence lengths (a rollout producer that owns ``max_seq_lens``, consumers
that read it, a second owner that re-derives a global pad); kernels and
metrics carry the look-alike idioms (ceil divisions, maxima) that the rules
must not be fooled by. Output is deterministic for a given seed.

`generate_dense_tree` writes the other extreme: every module a trainer
data-path module (producers, batch builders, replay fillers, CP helpers,
loss helpers), so the text prefilter skips nothing.

Used by ``benchmarks/lint_speed.py``; also runnable alone:
``python benchmarks/synthetic_tree.py OUT_DIR [--files N] [--seed S] [--dense]``.
"""

from __future__ import annotations

import argparse
import random
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

WORDS = (
    "actor critic rollout reward policy value buffer sample batch step grad optim sched "
    "shard rank group stage layer block head expert router cache state token logit score "
    "metric timer writer reader loader config checkpoint weight bias scale norm proj gate "
    "update merge split gather reduce flush sync queue worker engine driver runner"
).split()

PACKAGES = ("trainer", "models", "kernels", "data", "utils", "distributed", "eval", "rollout")


@dataclass(frozen=True)
class TreeStats:
    """What was generated: file count, line count, files that mention padding or lengths."""

    files: int
    lines: int
    padding_files: int


class _Names:
    """Random but readable identifiers."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def ident(self, parts: int = 2) -> str:
        return "_".join(self.rng.choice(WORDS) for _ in range(parts))

    def cls(self) -> str:
        return "".join(w.capitalize() for w in (self.rng.choice(WORDS) for _ in range(2)))

    def num(self, lo: int = 2, hi: int = 64) -> int:
        return self.rng.randint(lo, hi)


# Each block returns module-level source (a function or class), 10-45 lines.


def _config_dataclass(n: _Names) -> str:
    fields = "\n".join(f"    {n.ident()}_{i}: int = {n.num()}" for i in range(n.num(4, 12)))
    return f'''
@dataclass
class {n.cls()}Config:
    """Options for the {n.ident()} component."""

{fields}
    name: str = "{n.ident()}"
    enabled: bool = True

    def validate(self) -> None:
        for key, value in vars(self).items():
            if isinstance(value, int) and value < 0:
                raise ValueError(f"{{key}} must be non-negative, got {{value}}")
'''


def _train_step(n: _Names) -> str:
    fn, loss = n.ident(), n.ident()
    return f'''
def {fn}_step(model, optimizer, batch, scaler=None, grad_clip={n.num(1, 5)}.0):
    """One optimisation step over ``batch``; returns the loss as a float."""
    model.train()
    optimizer.zero_grad(set_to_none=True)
    outputs = model(**batch)
    {loss} = outputs["loss"] if isinstance(outputs, dict) else outputs[0]
    if scaler is not None:
        scaler.scale({loss}).backward()
        scaler.unscale_(optimizer)
    else:
        {loss}.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    logger.debug("step done: loss=%.4f grad_norm=%.3f", {loss}.item(), float(norm))
    return float({loss}.detach())
'''


def _trainer_class(n: _Names) -> str:
    name = n.cls()
    return f'''
class {name}Trainer:
    """Drives training of one model replica."""

    def __init__(self, model, optimizer, scheduler, args):
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.args = args
        self.global_step = 0
        self.history = []

    def train_epoch(self, loader):
        for batch in loader:
            batch = {{k: v.to(self.args.device) for k, v in batch.items()}}
            loss = self.model(**batch)["loss"]
            loss.backward()
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad()
            self.global_step += 1
            self.history.append(loss.item())
            if self.global_step % self.args.log_interval == 0:
                self.log()

    def log(self):
        recent = self.history[-self.args.log_interval:]
        logger.info("step %d mean loss %.4f", self.global_step, sum(recent) / len(recent))

    def state_dict(self):
        return {{
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "step": self.global_step,
        }}
'''


def _attention(n: _Names) -> str:
    name = n.cls()
    return f'''
class {name}Attention(nn.Module):
    """Multi-head self-attention with rotary embeddings."""

    def __init__(self, hidden_size, num_heads, dropout=0.0):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size, bias=False)
        self.out = nn.Linear(hidden_size, hidden_size, bias=False)
        self.dropout = dropout

    def forward(self, x, rotary=None, mask=None):
        bsz, q_len, _ = x.shape
        qkv = self.qkv(x).view(bsz, q_len, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.unbind(dim=2)
        if rotary is not None:
            q, k = rotary(q), rotary(k)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout)
        attn = attn.transpose(1, 2).reshape(bsz, q_len, -1)
        return self.out(attn)
'''


def _mlp(n: _Names) -> str:
    name = n.cls()
    mult = n.rng.choice((2, 4, 8))
    return f'''
class {name}MLP(nn.Module):
    """Gated feed-forward block."""

    def __init__(self, hidden_size, intermediate_size=None):
        super().__init__()
        intermediate_size = intermediate_size or {mult} * hidden_size
        self.gate = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))
'''


def _norm(n: _Names) -> str:
    return f'''
class {n.cls()}RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-{n.num(5, 8)}):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        variance = x.float().pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(self.weight.dtype)
'''


def _kernel(n: _Names) -> str:
    fn = n.ident()
    block = n.rng.choice((64, 128, 256, 512, 1024))
    return f'''
@triton.jit
def _{fn}_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, x * {n.num()}, mask=mask)


def {fn}(x):
    """Launches the kernel over every element of ``x``."""
    y = torch.empty_like(x)
    n_elements = x.numel()
    grid = (triton.cdiv(n_elements, {block}),)
    _{fn}_kernel[grid](x, y, n_elements, BLOCK={block})
    return y
'''


def _quant(n: _Names) -> str:
    fn = n.ident()
    return f'''
def quantize_{fn}(weight, group_size={n.rng.choice((32, 64, 128))}):
    """Per-group int8 quantisation; rows are padded to a whole group."""
    rows, cols = weight.shape
    pad = (group_size - cols % group_size) % group_size
    if pad:
        weight = torch.cat([weight, weight.new_zeros(rows, pad)], dim=1)
    groups = weight.view(rows, -1, group_size)
    scale = groups.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / 127.0
    q = torch.round(groups / scale).to(torch.int8)
    return q.view(rows, -1)[:, :cols], scale.squeeze(-1)
'''


def _io_util(n: _Names) -> str:
    fn = n.ident()
    return f'''
def load_{fn}(path, default=None):
    """Reads a JSON or YAML file; returns ``default`` when it does not exist."""
    path = Path(path)
    if not path.exists():
        return default
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        import yaml

        return yaml.safe_load(text)
    return json.loads(text)


def save_{fn}(path, payload):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
'''


def _metrics(n: _Names) -> str:
    name = n.cls()
    return f'''
class {name}Meter:
    """Running statistics of a scalar metric."""

    def __init__(self, window={n.num(10, 200)}):
        self.window = window
        self.values = collections.deque(maxlen=window)
        self.best = None

    def update(self, value):
        self.values.append(float(value))
        self.best = value if self.best is None else max(self.best, value)

    @property
    def mean(self):
        return sum(self.values) / max(len(self.values), 1)

    def summary(self):
        return {{"mean": self.mean, "best": self.best, "peak": max(self.values, default=0.0)}}
'''


def _distributed(n: _Names) -> str:
    fn = n.ident()
    return f'''
def all_reduce_{fn}(tensor, group=None, op="mean"):
    """All-reduces ``tensor`` over ``group``; a no-op without torch.distributed."""
    if not dist.is_available() or not dist.is_initialized():
        return tensor
    world = dist.get_world_size(group=group)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    if op == "mean":
        tensor /= world
    return tensor


def shard_{fn}(items, rank, world_size):
    per_rank = (len(items) + world_size - 1) // world_size
    return items[rank * per_rank:(rank + 1) * per_rank]
'''


def _scheduler(n: _Names) -> str:
    fn = n.ident()
    return f'''
def {fn}_lr(step, warmup={n.num(100, 2000)}, total={n.num(10000, 90000)}, base_lr=3e-4, min_lr=3e-5):
    """Linear warm-up, then cosine decay to ``min_lr``."""
    if step < warmup:
        return base_lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_lr + 0.5 * (base_lr - min_lr) * (1 + math.cos(math.pi * progress))
'''


def _cli(n: _Names) -> str:
    return f'''
def parse_{n.ident()}_args(argv=None):
    parser = argparse.ArgumentParser(description="{n.ident(3)}")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--micro-batch-size", type=int, default={n.num(1, 16)})
    parser.add_argument("--global-batch-size", type=int, default={n.num(64, 1024)})
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    parser.add_argument("--context-parallel-size", type=int, default=1)
    parser.add_argument("--save", type=str, default=None)
    parser.add_argument("--seed", type=int, default={n.num(0, 9999)})
    args = parser.parse_args(argv)
    args.num_microbatches = args.global_batch_size // args.micro_batch_size
    return args
'''


def _reward(n: _Names) -> str:
    fn = n.ident()
    return f'''
async def {fn}_reward(session, sample, url, timeout={n.num(5, 60)}):
    """Scores one rollout sample with a remote reward model."""
    payload = {{"prompt": sample["prompt"], "response": sample["response"]}}
    for attempt in range(3):
        try:
            async with session.post(url, json=payload, timeout=timeout) as response:
                response.raise_for_status()
                result = await response.json()
                return float(result["score"])
        except Exception as exc:  # network errors are retried
            logger.warning("reward attempt %d failed: %s", attempt, exc)
            await asyncio.sleep(2 ** attempt)
    return 0.0
'''


# Padding-related blocks: what the rules are about. Only padding files get them.


def _owner(n: _Names) -> str:
    return '''
def get_rollout_data(args, rollout_data_ref):
    """Producer: the one place that decides each sample's padded length."""
    rollout_data = dict(rollout_data_ref)
    unit = args.tensor_model_parallel_size * args.data_pad_size_multiplier
    total_lengths = rollout_data["total_lengths"]
    rollout_data["max_seq_lens"] = [(t + unit - 1) // unit * unit for t in total_lengths]
    return rollout_data
'''


def _consumer(n: _Names) -> str:
    return f'''
def get_{n.ident()}_batch(data_iterator, keys, qkv_format="bshd"):
    """Batch builder: reads the padded length the producer wrote."""
    batch = data_iterator.get_next(keys)
    if qkv_format == "bshd":
        lengths = batch["max_seq_lens"]
        assert len(set(lengths)) == 1, "micro-batch mixes padded lengths"
        padded = lengths[0]
        tokens = [F.pad(t, (0, padded - t.numel())) for t in batch["tokens"]]
        batch["tokens"] = torch.stack(tokens)
    return batch
'''


def _second_owner(n: _Names) -> str:
    return f'''
def fill_{n.ident()}_replay(rollout_data, replay_list):
    """Replay filler that re-derives the pad: the rollout-global maximum."""
    total_lengths = rollout_data["total_lengths"]
    max_seq_lens = [round_up(max(total_lengths), 128)] * len(total_lengths)
    for sample, padded in zip(replay_list, max_seq_lens):
        sample.resize_(padded)
    return replay_list
'''


HEADER_IMPORTS = {
    "trainer": "import logging\nfrom dataclasses import dataclass\n\nimport torch\n\nlogger = logging.getLogger(__name__)\n",
    "models": "import math\n\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n",
    "kernels": "import torch\nimport triton\nimport triton.language as tl\n",
    "data": "import json\nimport os\nfrom pathlib import Path\n\nimport torch\n",
    "utils": "import collections\nimport json\nimport logging\nimport math\nimport os\nfrom pathlib import Path\n\nlogger = logging.getLogger(__name__)\n",
    "distributed": "import torch\nimport torch.distributed as dist\n",
    "eval": "import asyncio\nimport collections\nimport logging\n\nlogger = logging.getLogger(__name__)\n",
    "rollout": "import argparse\nimport asyncio\nimport logging\nfrom dataclasses import dataclass\n\nlogger = logging.getLogger(__name__)\n",
}

BLOCKS: dict[str, tuple[Callable[[_Names], str], ...]] = {
    "trainer": (_train_step, _trainer_class, _config_dataclass, _scheduler, _cli),
    "models": (_attention, _mlp, _norm, _config_dataclass),
    "kernels": (_kernel, _quant),
    "data": (_io_util, _config_dataclass, _metrics),
    "utils": (_io_util, _metrics, _scheduler, _config_dataclass),
    "distributed": (_distributed, _config_dataclass),
    "eval": (_metrics, _reward, _config_dataclass),
    "rollout": (_reward, _cli, _config_dataclass, _metrics),
}
PADDING_BLOCKS = (_owner, _consumer, _second_owner)
HELPERS = '''

def round_up(n, m):
    return (n + m - 1) // m * m
'''


def _module(rng: random.Random, package: str, target_lines: int, padding: bool) -> str:
    names = _Names(rng)
    imports = HEADER_IMPORTS[package]
    if padding and "functional as F" not in imports:
        imports = "import torch.nn.functional as F\n" + imports
    parts = [f'"""{names.ident(3).replace("_", " ").capitalize()} for the {package} package."""\n\n', imports]
    if padding:
        parts.append(HELPERS)
        parts.append("\n" + textwrap.dedent(rng.choice(PADDING_BLOCKS)(names)))
    lines = sum(p.count("\n") for p in parts)
    while lines < target_lines:
        block = rng.choice(BLOCKS[package])(names)
        parts.append("\n" + block)
        lines += block.count("\n") + 1
    return "".join(parts)


def generate_tree(root: Path, *, files: int = 300, seed: int = 0, mean_lines: int = 235,
                  padding_fraction: float = 0.04) -> TreeStats:
    """Writes ``files`` modules under ``root``; returns what was written."""
    rng = random.Random(seed)
    total_lines = 0
    padding_files = 0
    for index in range(files):
        package = PACKAGES[index % len(PACKAGES)]
        sub = root / "rltrainer" / package / rng.choice(("", "core", "impl", "legacy"))
        sub.mkdir(parents=True, exist_ok=True)
        (sub / "__init__.py").touch()
        padding = rng.random() < padding_fraction
        padding_files += padding
        target = max(40, int(rng.lognormvariate(0, 0.5) * mean_lines * 0.89))
        source = _module(rng, package, target, padding)
        (sub / f"{_Names(rng).ident()}_{index:03d}.py").write_text(source, encoding="utf-8")
        total_lines += source.count("\n")
    py_files = list(root.rglob("*.py"))
    return TreeStats(files=len(py_files), lines=total_lines, padding_files=padding_files)


# ---------------------------------------------------------------- the padding-dense tree
#
# Every module is a trainer data-path module: producers, batch builders, replay fillers, CP
# helpers, loss helpers, multimodal expansion, schedulers and metrics over lengths. The text
# prefilter cannot skip any of them, and every function exercises the flow analysis: the
# worst case for the per-file phase (issue 11's "padding-dense tree").


def _dense_producer(n: _Names) -> str:
    name = n.ident()
    return f'''
def get_{name}_rollout_data(args, rollout_data_ref, witness_info=None):
    """Producer: decides each sample's padded length and slices response fields for CP."""
    parallel_state = get_parallel_state()
    rollout_data = dict(rollout_data_ref)
    rollout_data["tokens"] = [torch.as_tensor(t) for t in rollout_data["tokens"]]
    unit = parallel_state.tp.size * args.data_pad_size_multiplier
    if args.compress_ratios:
        unit = math.lcm(unit, max(args.compress_ratios) * 2 * parallel_state.cp.size)
    total_lengths = rollout_data["total_lengths"]
    rollout_data["max_seq_lens"] = [(t + unit - 1) // unit * unit for t in total_lengths]
    for key in ("rollout_log_probs", "teacher_log_probs"):
        if key not in rollout_data:
            continue
        rollout_data[key] = [
            slice_log_prob_with_cp(value, total_length, response_length, args.qkv_format,
                                   rollout_data["max_seq_lens"][i] if args.qkv_format == "bshd" else None)
            for i, (value, total_length, response_length) in enumerate(
                zip(rollout_data[key], total_lengths, rollout_data["response_lengths"])
            )
        ]
    return rollout_data, None
'''


def _dense_batch(n: _Names) -> str:
    name = n.ident()
    return f'''
def get_{name}_batch(data_iterator, keys, pad_multiplier=128, qkv_format="thd", get_position_ids=False,
                     allgather_cp=False):
    """Batch builder: BSHD reads the producer's padded length; THD packs and pads the stream."""
    parallel_state = get_parallel_state()
    batch = data_iterator.get_next(keys)
    tokens = batch["tokens"]
    batch["unconcat_tokens"] = tokens
    pad_size = parallel_state.tp.size * pad_multiplier
    if qkv_format == "bshd":
        max_seq_lens = batch["max_seq_lens"]
        if len(set(max_seq_lens)) != 1:
            raise ValueError(f"mixed padded lengths {{max_seq_lens}}")
        max_seqlen = max_seq_lens[0]
        assert max(t.size(0) for t in tokens) <= max_seqlen
        tokens = [slice_with_cp(t, 0, qkv_format, max_seqlen) for t in tokens]
        batch["tokens"] = torch.stack(tokens)
    elif qkv_format == "thd":
        tokens = [slice_with_cp(t, 0, qkv_format) for t in tokens]
        cu_seqlens = [0]
        for t in tokens:
            cu_seqlens.append(cu_seqlens[-1] + t.size(0))
        stream = torch.cat(tokens)
        pad = (pad_size - stream.size(0) % pad_size) % pad_size
        if pad:
            stream = F.pad(stream, (0, pad), value=0)
            cu_seqlens.append(cu_seqlens[-1] + pad)
        batch["cu_seqlens"] = torch.tensor(cu_seqlens, dtype=torch.int) * parallel_state.cp.size
        batch["tokens"] = stream.unsqueeze(0)
    else:
        raise ValueError(qkv_format)
    loss_masks = []
    for loss_mask, total_length, response_length in zip(batch["loss_masks"], batch["total_lengths"],
                                                        batch["response_lengths"]):
        prompt_length = total_length - response_length
        loss_mask = F.pad(loss_mask, (prompt_length - 1, 1), value=0)
        loss_masks.append(loss_mask)
    batch["full_loss_masks"] = loss_masks
    return batch
'''


def _dense_replay(n: _Names) -> str:
    name = n.ident()
    return f'''
def fill_{name}_replay_data(*, args, models, data_iterator, num_microbatches, rollout_data, data_key,
                           replay_list, register_replay_list_func, if_sp_region=True,
                           indices_are_token_positions=False):
    """Replay filler: lays replay rows out like the tokens of each micro-batch."""
    for iterator in data_iterator:
        iterator.reset()
    for _ in range(sum(num_microbatches)):
        batch = data_iterator[0].get_next([data_key, "tokens", "max_seq_lens", "cu_seqlens"])
        rows = [F.pad(r, (0, 0, 0, 1)) for r in batch[data_key]]
        if args.qkv_format == "bshd":
            lens = batch["max_seq_lens"]
            assert all(p == lens[0] for p in lens), lens
            rows = [slice_with_cp(r, 0, args.qkv_format, lens[0]) for r in rows]
            replay = torch.cat(rows)
        else:
            rows = [slice_with_cp(r, 0, args.qkv_format) for r in rows]
            replay = torch.cat(rows)
            stream_length = int(batch["cu_seqlens"][-1])
            replay = F.pad(replay, (0, 0, 0, stream_length - replay.size(0)))
        if if_sp_region and args.sequence_parallel:
            replay = replay.chunk(get_parallel_state().tp.size)[get_parallel_state().tp.rank]
        register_replay_list_func(replay_list, replay, models=models)
    del rollout_data[data_key]
'''


def _dense_cp_helper(n: _Names) -> str:
    name = n.ident()
    return f'''
def {name}_offsets_with_cp(total_length, response_length, qkv_format="thd", max_seq_len=None,
                           cp_rank=None, cp_size=None):
    """Zigzag offsets of one sample on one CP rank, from its padded length under BSHD."""
    if cp_rank is None or cp_size is None:
        parallel_state = get_parallel_state()
        cp_rank, cp_size = parallel_state.cp.rank, parallel_state.cp.size
    prompt_length = total_length - response_length
    if qkv_format == "thd":
        chunk_size = (total_length + 2 * cp_size - 1) // (2 * cp_size)
    else:
        assert max_seq_len is not None
        chunk_size = (max_seq_len + 2 * cp_size - 1) // (2 * cp_size)
    chunk_0 = (cp_rank * chunk_size, (cp_rank + 1) * chunk_size)
    chunk_1 = ((2 * cp_size - cp_rank - 1) * chunk_size, (2 * cp_size - cp_rank) * chunk_size)
    logits_0 = (max(chunk_0[0], prompt_length - 1), min(chunk_0[1], total_length - 1))
    logits_1 = (max(chunk_1[0], prompt_length - 1), min(chunk_1[1], total_length - 1))
    token_0 = (logits_0[0] + 1, logits_0[1] + 1) if logits_0[0] < logits_0[1] else (0, 0)
    token_1 = (logits_1[0] + 1, logits_1[1] + 1) if logits_1[0] < logits_1[1] else (0, 0)
    return chunk_size, (chunk_0, chunk_1), (logits_0, logits_1), (token_0, token_1)
'''


def _dense_loss(n: _Names) -> str:
    name = n.ident()
    return f'''
def {name}_local_masks(total_lengths, response_lengths, loss_masks, qkv_format="thd", max_seq_lens=None):
    """Per-sample loss masks of this CP rank's chunks."""
    cp_size = get_parallel_state().cp.size
    if cp_size == 1:
        return loss_masks
    local = []
    for i, (total_length, response_length, loss_mask) in enumerate(
        zip(total_lengths, response_lengths, loss_masks)
    ):
        max_seq_len = max_seq_lens[i] if max_seq_lens is not None else None
        prompt_length = total_length - response_length
        _, _, _, token_offsets = get_logits_and_tokens_offset_with_cp(
            total_length, response_length, qkv_format, max_seq_len
        )
        first = loss_mask[token_offsets[0][0] - prompt_length: token_offsets[0][1] - prompt_length]
        second = loss_mask[token_offsets[1][0] - prompt_length: token_offsets[1][1] - prompt_length]
        local.append(torch.cat([first, second]))
    return local
'''


def _dense_expand(n: _Names) -> str:
    name = n.ident()
    return f'''
def expand_{name}_in_place(rollout_data, media_counts, unit):
    """Multimodal expansion that recomputes the padded lengths afterwards."""
    expanded_tokens, expanded_lengths = [], []
    for tokens, count in zip(rollout_data["tokens"], media_counts):
        if count:
            tokens = tokens.repeat_interleave(1 + count % 3)
        expanded_tokens.append(tokens)
        expanded_lengths.append(tokens.numel())
    rollout_data["tokens"] = expanded_tokens
    rollout_data["total_lengths"] = expanded_lengths
    rollout_data["max_seq_lens"] = [(t + unit - 1) // unit * unit for t in expanded_lengths]
    return rollout_data
'''


def _dense_schedule(n: _Names) -> str:
    name = n.ident()
    return f'''
def {name}_micro_batch_indices(total_lengths, max_tokens_per_gpu, dp_size):
    """Balanced micro-batches under a token budget: counts, not padded lengths."""
    order = sorted(range(len(total_lengths)), key=lambda i: -total_lengths[i])
    num_micro_batches = max(1, -(-sum(total_lengths) // max_tokens_per_gpu))
    num_micro_batches = (num_micro_batches + dp_size - 1) // dp_size * dp_size
    bins = [[] for _ in range(num_micro_batches)]
    loads = [0] * num_micro_batches
    for index in order:
        target = min(range(num_micro_batches), key=loads.__getitem__)
        bins[target].append(index)
        loads[target] += total_lengths[index]
    return bins, loads
'''


def _dense_metrics(n: _Names) -> str:
    name = n.ident()
    return f'''
def log_{name}_padding(rollout_data, step, pad_multiplier=128):
    """Padding waste, as metrics: sums and maxima, logged."""
    total_lengths = rollout_data["total_lengths"]
    padded = sum((t + pad_multiplier - 1) // pad_multiplier * pad_multiplier for t in total_lengths)
    metrics = {{
        "rollout/max_total_length": max(total_lengths),
        "rollout/padded_tokens": padded,
        "rollout/waste": padded / max(1, sum(total_lengths)),
        "rollout/max_seq_len": max(rollout_data.get("max_seq_lens") or [0]),
    }}
    logger.info("step %d: %s", step, metrics)
    return metrics
'''


DENSE_BLOCKS = (_dense_producer, _dense_batch, _dense_replay, _dense_cp_helper, _dense_loss, _dense_expand,
                _dense_schedule, _dense_metrics)
DENSE_HEADER = '''import logging
import math

import torch
import torch.nn.functional as F

from rltrainer.parallel import get_parallel_state
from rltrainer.cp_utils import get_logits_and_tokens_offset_with_cp, slice_log_prob_with_cp, slice_with_cp

logger = logging.getLogger(__name__)
'''


def generate_dense_tree(root: Path, *, files: int = 300, seed: int = 0, mean_lines: int = 235) -> TreeStats:
    """Writes ``files`` padding-dense modules under ``root`` (every one a data-path module)."""
    rng = random.Random(seed)
    total_lines = 0
    for index in range(files):
        names = _Names(rng)
        sub = root / "rltrainer" / rng.choice(("data", "backends", "rollout", "replay", "loss"))
        sub.mkdir(parents=True, exist_ok=True)
        (sub.parent / "__init__.py").touch()
        (sub / "__init__.py").touch()
        target = max(60, int(rng.lognormvariate(0, 0.4) * mean_lines))
        parts = [f'"""Data-path module {index}: {names.ident(3).replace("_", " ")}."""\n\n', DENSE_HEADER]
        lines = sum(p.count("\n") for p in parts)
        while lines < target:
            block = textwrap.dedent(rng.choice(DENSE_BLOCKS)(names))
            parts.append("\n" + block)
            lines += block.count("\n") + 1
        source = "".join(parts)
        (sub / f"{names.ident()}_{index:03d}.py").write_text(source, encoding="utf-8")
        total_lines += source.count("\n")
    py_files = list(root.rglob("*.py"))
    return TreeStats(files=len(py_files), lines=total_lines, padding_files=files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dense", action="store_true", help="every module a padding-dense data-path module")
    args = parser.parse_args()
    make = generate_dense_tree if args.dense else generate_tree
    stats = make(args.out, files=args.files, seed=args.seed)
    print(f"{stats.files} files ({stats.padding_files} mention padding), {stats.lines} lines in {args.out}")


if __name__ == "__main__":
    main()
