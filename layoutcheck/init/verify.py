"""Each proposed entry checked before it is written: the project imported in a subprocess (`probe`).

`verify` asks `layoutcheck.init.probe` about every hook, boundary contract,
coordinate function and the parallel state of a `Proposal`, with the
project's `sys_path_roots` first on ``sys.path``, and records a `Verdict` for
each: ``ok`` (it installs as written), ``refused`` (it would not: the
module does not import by that path, the target does not exist, the
role's wrapper does not fit its signature) or ``unchecked`` (this Python
environment cannot tell: a dependency it lacks, an import that fails here,
the time limit). `render` writes only ``ok`` entries as configuration; the
others become commented-out lines saying why.

The probe runs the project's module bodies, as the trainer would at import;
it is bounded by ``timeout`` seconds in all, and whatever it judged before
the limit is kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from layoutcheck.init.proposal import Proposal, Verdict

__all__ = ["DEFAULT_TIMEOUT", "verify"]

DEFAULT_TIMEOUT = 120.0
"""Seconds the probe may take in all (importing a trainer's modules can take tens of seconds: torch, Megatron)."""

_PROBE = "import sys; del sys.path[0]; from layoutcheck.init.probe import main; sys.exit(main())"
"""``-c`` puts the working folder first on ``sys.path``; the probe puts the project's roots there itself,
after importing layoutcheck (a project folder holding a ``layoutcheck`` folder must not shadow it)."""


def verify(proposal: Proposal, roots: Sequence[str], *, cwd: str, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Judge every entry of ``proposal`` in a subprocess and store the verdicts in ``proposal.verdicts``."""
    entries = proposal.entries()
    if not entries:
        return
    checks: list[dict[str, Any]] = []
    for i, (kind, target, table) in enumerate(entries):
        check: dict[str, Any] = {"id": i, "kind": kind, "target": target}
        if table is not None:
            check["table"] = table
        checks.append(check)
    env = dict(os.environ)
    env["LAYOUTCHECK"] = "0"  # the probe judges the hooks; the debug mode must not activate in it
    judged: dict[int, tuple[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="layoutcheck-init-") as folder:
        out = os.path.join(folder, "verdicts.jsonl")
        late = ""
        try:
            proc = subprocess.run([sys.executable, "-c", _PROBE, out], input=json.dumps(
                {"paths": list(roots), "checks": checks}, default=list), cwd=cwd, env=env, text=True,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout)
            if proc.returncode != 0:
                tail = (proc.stderr or "").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
                late = f"the check stopped early here ({tail[0]})"
        except subprocess.TimeoutExpired:
            late = f"importing the project took longer than {timeout:g} s here"
        if os.path.exists(out):
            with open(out, encoding="utf-8") as lines:
                for line in lines:
                    try:
                        got = json.loads(line)
                    except ValueError:  # the last line, cut by the time limit
                        continue
                    judged[got["id"]] = (got["status"], got["why"])
    for i, (kind, target, table) in enumerate(entries):
        status, why = judged.get(i, ("unchecked", late or "the check gave no answer"))
        verdict = Verdict(status, why)
        if status == "unchecked":
            verdict = _from_source(kind, target, table, proposal.params.get(target), why)
        proposal.verdicts[(kind, target)] = verdict


def _from_source(kind: str, target: str, table: Any, params: Sequence[str] | None, why: str) -> Verdict:
    """The verdict on an entry that could not be imported here: its signature as the source defines it,
    judged by the same checks as the real function (`probe`); the model found its definition."""
    if params is None:  # a preset's coordinate function in a dependency: the preset was written against it
        return Verdict("source", why) if kind in ("exists", "parallel-state") else Verdict("unchecked", why)
    import inspect

    from layoutcheck.init.probe import judge
    from layoutcheck.runtime.checker.layout_checker import LayoutChecker

    def stand_in(*args: Any, **kwargs: Any) -> None:  # pragma: no cover - never called
        return None

    module, _, qualname = target.partition(":")
    stand_in.__module__, stand_in.__qualname__, stand_in.__name__ = module, qualname, qualname.rpartition(".")[2]
    stand_in.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params])
    check = {"kind": kind, "target": target, **({"table": table} if table is not None else {})}
    status, refusal = judge(check, stand_in, LayoutChecker(mode="record"))
    if status == "refused":
        return Verdict("refused", f"{refusal} (read from its source: {why})")
    return Verdict("source" if status == "ok" else "unchecked", why)
