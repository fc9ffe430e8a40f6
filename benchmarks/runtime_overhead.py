"""What the debug mode costs a training step: the reference data path with the hooks off and on, side by side.

Usage::

    python benchmarks/runtime_overhead.py [--rollouts N] [--samples N] [--repeat N]

The workload is production-shaped (issue 7): rollouts of 64 samples whose
true lengths are log-normal around 1.3k tokens with one 14,010-token
outlier, BSHD, cp=2 (one CP rank), micro-batches of B=1 and B=4, the whole
reference pipeline (`fixtures/minitrainer`: producer, schedule, both replay
fillers, the log-prob pass and the training pass with the loss-side slicing).

Each variant runs in its own fresh process, as a user's run does:

* ``off``: ``LAYOUTCHECK`` unset (the start-up file imports nothing);
* ``on``: ``LAYOUTCHECK=record`` with a configuration naming the pipeline's
  producer, batch builder, replay filler and offset helper: hooks installed
  by the ``.pth`` start-up file, no code change;
* ``bare``: the same hooks with every check taken out (each hooked call
  binds its arguments and calls through): the fixed cost of hooking, which
  no faster check can go under;
* ``reads``: the hooks doing only the reads the checks need, through the
  same adapter and metadata readers (the producer's per-sample lists and
  tensor shapes, each micro-batch's ints and the batch's shapes, the
  replay tensors' rows, the parallel state), judging nothing: the floor
  of any check of these invariants written in Python;
* ``tracer``: the same hooks plus ``LAYOUTCHECK_TRACE=1`` (the tracer's
  roles too: ``cp-slicer``, ``response-slicer``, ``loss-function``);
* ``mode``: the tracer with its function mode passing every op straight
  through (tags at the hooks and the CP helpers' judgement kept): what the
  mechanism costs before any op is traced;
* ``typeguard``: the hooks, with the pipeline imported under
  ``typeguard.install_import_hook(["minitrainer"])`` (its ``Padded``
  annotations checked on every call; tracer off).

How the hooks' cost is measured. Two processes of the same variant differ
by up to 1.8x on a shared machine (allocation and placement luck that lasts
a whole process), far more than the 3% the target allows; two neighbouring
rollouts of one process do not. So each ``bare``, ``reads`` and ``on``
process, after its own timed rollouts, also alternates rollouts with its
hooks removed and installed again (the session's `HookSet`), and reports the
median ratio of neighbouring rollouts. The first table shows those ratios
(``bare/off``, ``reads/off``, ``on/off``: the verdict reads ``on/off``), the
hook-free rollout time, the cost per hook call (all of it, and the checks'
share: on minus bare) and per checked tensor, and, for comparison, the
ratio of the best ``on`` and ``off`` processes (``processes on/off``, each
process's fastest rollout, best over ``--repeat`` alternating processes).

The second table compares the tracer, its mode alone (``mode only``) and
typeguard with the hooks alone (the tracer's target: <= 1.05). The tracer
and mode-only ratios are paired the same way: each such process alternates
rollouts with the tracer on and with the hooks alone (the session rebuilt
without the tracer's roles); typeguard, which cannot be switched off in a
process, is the ratio of the best processes. The tracer's work per rollout
is counted in an untimed rollout: torch calls its mode saw, how many went
through a rule (a tagged tensor), and the CP-helper calls it judged; the cost
per traced op is the difference divided by the rule ops and judged calls
together.

CPU caveat: on this machine a step is only CPU work on small tensors, so the
checks' Python cost weighs far more than on a GPU, where the same host time
overlaps with kernels running on the device.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

CONFIG = """
[runtime]
mode = "record"
summary = false
parallel-state = "minitrainer.parallel:get_parallel_state"
[runtime.hooks]
producer = ["minitrainer.data:get_rollout_data"]
batch-builder = ["minitrainer.data:get_batch"]
replay-filler = ["minitrainer.replay_data:fill_replay_data"]
offset-helper = ["minitrainer.cp_utils:get_logits_and_tokens_offset_with_cp"]
cp-slicer = ["minitrainer.cp_utils:slice_with_cp"]
response-slicer = ["minitrainer.cp_utils:slice_log_prob_with_cp"]
loss-function = ["minitrainer.loss:loss_function"]
"""

WORKER = textwrap.dedent("""
    import json, os, sys, time
    import torch
    torch.set_num_threads(1)
    if os.environ.get("LC_BENCH_TYPEGUARD"):
        from typeguard import install_import_hook
        hook = install_import_hook(["minitrainer"])
    if os.environ.get("LC_BENCH_BARE"):  # before the pipeline's modules are imported, so hooked
        from layoutcheck.runtime.checker import wrappers
        def through(checker, fn, where, binder):
            return lambda args, kwargs, call: fn(*args, **kwargs)
        wrappers._BODIES = {role: through for role in wrappers._BODIES}
    if os.environ.get("LC_BENCH_READS"):  # the checks' reads of the trainer's data, nothing judged
        from layoutcheck.errors import metadata_only
        from layoutcheck.runtime.checker import wrappers
        from layoutcheck.runtime.contract import common, consumers
        from layoutcheck.runtime.contract.meta import count, shape_of
        FIELDS = ("tokens", *common.RESPONSE_FIELDS, *common.UNSLICED_RESPONSE_FIELDS, *common.REPLAY_FIELDS)
        def reads(role):
            def factory(checker, fn, where, binder):
                adapter = checker.adapter
                def producer(args, kwargs, call):
                    result = fn(*args, **kwargs)
                    rollout = result[0]
                    adapter.layout(call["args"], checker._parallel())
                    with metadata_only():
                        lists = [list(rollout[f]) for f in ("total_lengths", "response_lengths", "max_seq_lens") if f in rollout]
                        shapes = [shape_of(v) for f in FIELDS for v in (rollout.get(f) or ())]
                    return result
                def batch_builder(args, kwargs, call):
                    view = adapter.batch_call(call)
                    samples = adapter.micro_batch_samples(view.iterator, adapter.next_micro_batch(view.iterator))
                    checker._parallel()
                    with metadata_only():
                        adapter.sample_lists(adapter.rollout_of(view.iterator), samples, view.qkv_format == "bshd")
                    batch = fn(*args, **kwargs)
                    with metadata_only():
                        consumers.read_batch_layout(batch), adapter.batch_rows(batch)
                    return batch
                def replay_filler(args, kwargs, call):
                    view = adapter.replay_call(call)
                    adapter.layout(view.args, checker._parallel())
                    with metadata_only():
                        for k in range(view.micro_batches):
                            adapter.sample_lists(view.rollout_data, adapter.micro_batch_samples(view.iterator, k), True)
                    register = kwargs[adapter.register_argument]
                    def counted(*a, **kw):
                        with metadata_only():
                            count(adapter.registered_replay(a, kw))
                        return register(*a, **kw)
                    return fn(*args, **{**kwargs, adapter.register_argument: counted})
                def offset_helper(args, kwargs, call):
                    result = fn(*args, **kwargs)  # its ints are in `call` already
                    if call.get("cp_rank") is None:
                        checker._parallel()
                    return result
                return locals()[role]
            return factory
        wrappers._BODIES = {role: reads(role) for role in wrappers._BODIES}
    if os.environ.get("LC_BENCH_MODE_ONLY"):  # the tracer's mode, every op straight through
        from layoutcheck.runtime.tracing import tracer as traced
        def passthrough(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
        traced._Mode.__torch_function__ = passthrough
    from minitrainer.actor import TrainActor
    from minitrainer.args import make_args
    from minitrainer.parallel import parallel_state
    from minitrainer.rollout import long_tailed_lengths, make_rollout_ref

    def count_traced(module, rules, run):
        # one more (untimed) rollout: torch calls the tracer's mode saw, rule ops, judged CP-helper calls
        counts = {"calls": 0, "rule": 0, "judged": 0}
        seen, checked = module._Mode.__torch_function__, module.checked
        def counting(self, func, types, args=(), kwargs=None):
            counts["calls"] += 1
            return seen(self, func, types, args, kwargs)
        def counted(tracer, op, *rest):
            counts["rule" if op in rules else "judged"] += 1
            return checked(tracer, op, *rest)
        module._Mode.__torch_function__, module.checked = counting, counted
        try:
            with parallel_state(cp_size=2, cp_rank=1):
                run()
        finally:
            module._Mode.__torch_function__, module.checked = seen, checked
        return counts

    rollouts, samples, batch = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    refs = [make_rollout_ref(long_tailed_lengths(samples, seed=s), seed=s) for s in range(rollouts + 1)]
    if os.environ.get("LC_BENCH_BEFORE"):  # the tracer before and after, and the hooks alone, in this process
        import importlib
        sys.path.insert(0, os.environ["LC_BENCH_DIR"])
        import baseline
        baseline.load(os.environ["LC_BENCH_BEFORE"])
        from layoutcheck.runtime import activation
        from layoutcheck.runtime.activation.session import TRACER_ROLES
        from layoutcheck.runtime.tracing import op_rules
        old = importlib.import_module(baseline.NAME + ".runtime.activation")
        environ = {"LAYOUTCHECK_TRACE": "1"}
        new = activation.activate(config=os.environ["LC_BENCH_CONFIG"], environ=environ)
        specs = list(new.settings.hook_specs())
        new._hooks.remove()
        base = old.activate(config=os.environ["LC_BENCH_CONFIG"], environ=environ)
        base_specs = list(base.settings.hook_specs())
        assert new.tracing and base.tracing and len(specs) == len(base_specs) == 7
        def use(state):
            new._hooks.remove()
            base._hooks.remove()
            if state == "before":
                base._hooks.add(base_specs)
            else:
                new._tracing = state == "after"
                new._hooks.add(specs if state == "after" else [s for s in specs if s.role not in TRACER_ROLES])
        times = {"hooks": [], "before": [], "after": []}
        order = ("hooks", "before", "after")
        with parallel_state(cp_size=2, cp_rank=1):
            actor = TrainActor(make_args(micro_batch_size=batch))
            for state in order:  # warm-up, each
                use(state)
                actor.train(0, refs[0])
            for i in range(3 * rollouts):
                for state in order[i % 3:] + order[:i % 3]:  # rotate who goes first
                    use(state)
                    start = time.perf_counter()
                    actor.train(1 + i, refs[1 + i % rollouts])
                    times[state].append(time.perf_counter() - start)
        def ratio(a, b):
            values = sorted(x / y for x, y in zip(times[a], times[b]))
            return values[len(values) // 2]
        out = {"best": min(times["after"]), "hooks": min(times["hooks"]),
               "ratios": {"before": ratio("before", "hooks"), "after": ratio("after", "hooks"),
                          "after/before": ratio("after", "before")},
               "violations": {"before": len(base.violations), "after": len(new.violations)},
               "notes": {"before": len(base.notes), "after": len(new.notes)}}
        use("after")
        from layoutcheck.runtime.tracing import tracer as module
        out["traced"] = {"after": count_traced(module, op_rules.RULES, lambda: actor.train(9999, refs[0]))}
        use("before")
        base_tracer = importlib.import_module(baseline.NAME + ".runtime.tracing.tracer")
        out["traced"]["before"] = count_traced(base_tracer, base_tracer._RULES, lambda: actor.train(9998, refs[0]))
        print(json.dumps(out))
        sys.exit(0)
    times = []
    from layoutcheck.runtime.activation.session import TRACER_ROLES, active_session
    session = active_session() if "layoutcheck.runtime.activation.session" in sys.modules else None
    with parallel_state(cp_size=2, cp_rank=1):
        actor = TrainActor(make_args(micro_batch_size=batch))
        for i, ref in enumerate(refs):
            start = time.perf_counter()
            actor.train(i, ref)
            if i:  # the first rollout warms up
                times.append(time.perf_counter() - start)
    out = {"best": min(times)}
    if session is not None:
        checker = session.checker
        out["checked"] = dict(checker.checked)
        out["violations"] = len(checker.violations)
        out["notes"] = len(checker.notes)
        if os.environ.get("LC_BENCH_PAIRED"):  # the same process, with and without, alternating rollouts
            hooks, tracing = session._hooks, session.tracing
            specs = [h.spec for h in hooks.installed]
            plain = [spec for spec in specs if spec.role not in TRACER_ROLES]
            def switch(on):
                # without: no hooks (the hook variants), or the hooks without the tracer (the tracer)
                hooks.remove()
                session._tracing = tracing and on
                if on or tracing:
                    hooks.add(specs if on else plain)
            paired = {"on": [], "off": []}
            with parallel_state(cp_size=2, cp_rank=1):
                for i in range(4 * rollouts):
                    for state in (("on", "off") if i % 2 else ("off", "on")):
                        switch(state == "on")
                        start = time.perf_counter()
                        actor.train(1000 + i, refs[1 + i % rollouts])
                        paired[state].append(time.perf_counter() - start)
            switch(True)
            ratios = sorted(a / b for a, b in zip(paired["on"], paired["off"]))
            out["paired"] = {"on": min(paired["on"]), "off": min(paired["off"]), "ratio": ratios[len(ratios) // 2]}
        if session.tracing:  # the tracer's work in one more (untimed) rollout
            from layoutcheck.runtime.tracing import op_rules, tracer as module
            out["traced"] = count_traced(module, op_rules.RULES, lambda: actor.train(len(refs), refs[0]))
    print(json.dumps(out))
""")


VARIANTS = ("off", "bare", "reads", "on", "mode", "tracer", "typeguard")
BEFORE_AFTER = "before/after"
"""A process that alternates rollouts with the hooks alone, the tracer of ``--before`` and this tracer."""
PAIRED = ("bare", "reads", "on", "mode", "tracer")
"""Variants also timed against their own process with the hooks removed (the tracer: with its roles
removed and the tracer off, the hooks kept): the steady figures."""


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _run(variant: str, config: Path, rollouts: int, samples: int, batch: int, before: str = "") -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    env["PYTHONPATH"] = os.pathsep.join([str(FIXTURES), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if variant == BEFORE_AFTER:
        env.update({"LC_BENCH_BEFORE": before, "LC_BENCH_DIR": str(ROOT / "benchmarks"),
                    "LC_BENCH_CONFIG": str(config)})
    if variant not in ("off", BEFORE_AFTER):  # the before/after worker activates both packages itself
        env.update({"LAYOUTCHECK": "record", "LAYOUTCHECK_CONFIG": str(config)})
    if variant in ("tracer", "mode"):
        env["LAYOUTCHECK_TRACE"] = "1"
    if variant == "mode":
        env["LC_BENCH_MODE_ONLY"] = "1"
    if variant == "typeguard":
        env["LC_BENCH_TYPEGUARD"] = "1"
    if variant == "bare":
        env["LC_BENCH_BARE"] = "1"
    if variant == "reads":
        env["LC_BENCH_READS"] = "1"
    if variant in PAIRED:
        env["LC_BENCH_PAIRED"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", WORKER, str(rollouts), str(samples), str(batch)],
        env=env, capture_output=True, text=True, check=False,
    )
    if proc.returncode:
        raise SystemExit(f"the {variant} worker failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=6, help="timed rollouts per process (default 6)")
    parser.add_argument("--samples", type=int, default=64, help="samples per rollout (default 64)")
    parser.add_argument("--repeat", type=int, default=3, help="processes per variant, alternating (default 3)")
    parser.add_argument("--hooks-only", action="store_true",
                        help="only off, bare, reads and on (leave out the tracer and typeguard table)")
    parser.add_argument("--before", default="",
                        help="only the tracer against the tracer of this commit (e.g. 3edcd00), paired in one process")
    args = parser.parse_args(argv)
    if args.before:
        return _before_after(args)
    variants = VARIANTS[:4] if args.hooks_only else VARIANTS

    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp, "layoutcheck.toml")
        config.write_text(CONFIG)
        print(f"reference data path: {args.samples} samples per rollout (median ~1.3k tokens, one 14,010), "
              f"BSHD, cp=2, best of {args.repeat} processes x {args.rollouts} rollouts")
        print(f"{'B':>2}  {'off s/rollout':>13}  {'bare/off':>8}  {'reads/off':>9}  {'on/off':>7}  {'per hook call':>13}  "
              f"{'checks only':>11}  {'per checked tensor':>18}  {'processes on/off':>16}  target on/off <= 1.03")
        tables = []
        for batch in (1, 4):
            times: dict[str, list[float]] = {v: [] for v in variants}
            info: dict[str, dict] = {}
            paired: dict[str, list[dict]] = {v: [] for v in PAIRED}
            for _ in range(args.repeat):
                for variant in variants:
                    result = _run(variant, config, args.rollouts, args.samples, batch)
                    times[variant].append(float(result["best"]))
                    info[variant] = result
                    if "paired" in result:
                        paired[variant].append(result["paired"])
            best = {v: min(t) for v, t in times.items()}
            steady = {v: _median([p["ratio"] for p in runs]) for v, runs in paired.items() if runs}
            off = _median([p["off"] for p in paired["on"]])  # the on processes' own hook-free rollouts
            checked = info["on"].get("checked", {})
            per_rollout = args.rollouts + 1  # the counts include the warm-up rollout
            calls = sum(checked.values()) / per_rollout
            tensors = (checked.get("micro-batches", 0) * 2 + checked.get("replay tensors", 0)) / per_rollout
            cost = (steady["on"] - 1) * off  # seconds per rollout
            checks = (steady["on"] - steady["bare"]) * off
            verdict = "PASS" if steady["on"] <= 1.03 else "MISS"
            print(f"{batch:>2}  {off:13.4f}  {steady['bare']:8.3f}  {steady['reads']:9.3f}  {steady['on']:7.3f}  "
                  f"{cost / max(calls, 1) * 1e6:10.1f} us  {checks / max(calls, 1) * 1e6:8.1f} us"
                  f"  {cost / max(tensors, 1) * 1e6:15.1f} us  {best['on'] / best['off']:16.3f}  {verdict}")
            print(f"    checked per rollout: {', '.join(f'{v / per_rollout:.0f} {k}' for k, v in checked.items())}; "
                  f"violations {info['on'].get('violations')}, notes {info['on'].get('notes')}")
            tables.append((batch, best, info, steady, _median([p["off"] for p in paired["tracer"]]) if paired["tracer"] else 0.0))
        if args.hooks_only:
            return 0
        print("\nthe tracer and typeguard on top of the hooks (the hooks alone = 1.00; tracer target <= 1.05; mode only "
              "and tracer paired in one process, typeguard from the best processes)")
        print(f"{'B':>2}  {'hooks s':>8}  {'mode only':>9}  {'tracer':>6}  {'typeguard':>9}  "
              f"{'torch calls':>11}  {'rule ops':>8}  {'judged':>6}  {'per traced op':>13}  tracer")
        for batch, best, info, steady, hooks in tables:  # hooks: the tracer processes' rollouts without it
            work = info["tracer"].get("traced", {})
            traced_ops = work.get("rule", 0) + work.get("judged", 0)
            per_op = (steady["tracer"] - 1) * hooks / max(traced_ops, 1) * 1e6
            verdict = "PASS" if steady["tracer"] <= 1.05 else "MISS"
            print(f"{batch:>2}  {hooks:8.4f}  {steady['mode']:9.2f}  {steady['tracer']:6.2f}  "
                  f"{best['typeguard'] / best['on']:9.2f}  {work.get('calls', 0):11d}  {work.get('rule', 0):8d}  "
                  f"{work.get('judged', 0):6d}  {per_op:10.1f} us  {verdict}")
            print(f"    with the tracer: violations {info['tracer'].get('violations')}, "
                  f"notes {info['tracer'].get('notes')}")
    return 0


def _before_after(args: argparse.Namespace) -> int:
    # The tracer of --before and this one, each against the hooks alone, rollouts alternating in one process
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp, "layoutcheck.toml")
        config.write_text(CONFIG)
        print(f"reference data path: {args.samples} samples per rollout, BSHD, cp=2; the hooks alone, the tracer "
              f"of {args.before} ('before') and this tracer ('after') alternating rollouts in each of {args.repeat} "
              f"processes x {3 * args.rollouts} rounds; medians of neighbouring ratios")
        print(f"{'B':>2}  {'hooks s':>8}  {'before/hooks':>12}  {'after/hooks':>11}  {'after/before':>12}  "
              f"{'+ms/rollout before':>18}  {'after':>6}  {'traced ops before':>17}  {'after':>6}  "
              f"{'us/traced op before':>19}  {'after':>6}")
        for batch in (1, 4):
            runs = [_run(BEFORE_AFTER, config, args.rollouts, args.samples, batch, args.before)
                    for _ in range(args.repeat)]
            hooks = _median([float(r["hooks"]) for r in runs])
            ratio = {k: _median([r["ratios"][k] for r in runs]) for k in ("before", "after", "after/before")}
            work = runs[0]["traced"]
            ops = {k: work[k]["rule"] + work[k]["judged"] for k in ("before", "after")}
            extra = {k: (ratio[k] - 1) * hooks for k in ("before", "after")}
            print(f"{batch:>2}  {hooks:8.4f}  {ratio['before']:12.3f}  {ratio['after']:11.3f}  "
                  f"{ratio['after/before']:12.3f}  {extra['before'] * 1e3:18.1f}  {extra['after'] * 1e3:6.1f}  "
                  f"{ops['before']:17d}  {ops['after']:6d}  {extra['before'] / max(ops['before'], 1) * 1e6:19.1f}  "
                  f"{extra['after'] / max(ops['after'], 1) * 1e6:6.1f}")
            print(f"    torch calls in the traced regions: before {work['before']['calls']}, after "
                  f"{work['after']['calls']}; violations {runs[0]['violations']}, notes {runs[0]['notes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
