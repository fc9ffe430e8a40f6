"""What the debug mode set up in one process: each configured hook, installed or not, its calls, and configuration problems.

A debug run must never end looking checked when it was not. A `SetupLedger`
holds what the summary and the run report say about the set-up:

* one `HookStatus` per configured hook: whether it went in, how many calls
  it saw, and, when it never went in, why (a module that does not exist, a
  function the module lacks, a module the process never imported);
* the configuration problems found while reading it (`ConfigError`s kept,
  not raised: an unknown key, a table the file cannot contain, an unknown
  ``LAYOUTCHECK`` value), each naming the key and the file or the variable.

`SetupLedger.summary` is the summary's hook line; `SetupLedger.error` is
the error raise mode stops the run with. Deciding *when* (the end of the
first step, or exit) is the session's (`layoutcheck.runtime.activation.session`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from layoutcheck.errors import ConfigError

__all__ = ["HookStatus", "SetupLedger"]


@dataclass(eq=False)
class HookStatus:
    """One configured hook: where it is configured, whether it went in, and its calls."""

    role: str
    target: str
    """``package.module:function``."""
    key: str
    """Where it is configured, for messages: ``tool.layoutcheck.runtime.hooks.producer in /x/pyproject.toml``."""
    installed: bool = False
    calls: int = 0
    """Calls of the hooked function (every name it was installed under, together)."""
    problem: str | None = None
    """Why it never went in (``None``: installed, or still waiting for its module)."""
    not_exercised: bool = False
    """A preset's hook whose module this process never imported (a path of the trainer it does not run): no problem."""
    lost: str | None = None
    """Why an installed hook is no longer wrapped (its function replaced, and not re-installed): a problem."""
    reinstalled: list[str] = field(default_factory=list)
    """Each time its function was replaced and the hook went in again later, with what happened."""

    @property
    def name(self) -> str:
        """The function's own name (``get_batch``), as the summary shows it."""
        return self.target.rpartition(":")[2].rpartition(".")[2]

    def __str__(self) -> str:
        return f"{self.role}: {self.target}"


def _first_line(err: ConfigError) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


class SetupLedger:
    """The hooks and configuration problems of one debug session (see the module docs)."""

    def __init__(self, hooks: Iterable[HookStatus] = (), problems: Iterable[ConfigError] = ()) -> None:
        self.hooks: list[HookStatus] = []
        self._by_target: dict[tuple[str, str], HookStatus] = {}
        for hook in hooks:
            self.add(hook)
        self.problems: list[ConfigError] = list(problems)
        """Configuration problems (keys, tables, variables), in the order found."""
        self.announced = False
        """Whether the problems were raised or warned about (once per process)."""
        self.tracer_off = 0
        """Configured hooks of the tracer's roles, left out because the tracer is off."""

    def add(self, hook: HookStatus) -> HookStatus:
        """Track ``hook`` (the same role and target again: the one already tracked)."""
        known = self._by_target.get((hook.role, hook.target))
        if known is not None:
            return known
        self._by_target[(hook.role, hook.target)] = hook
        self.hooks.append(hook)
        return hook

    def hook(self, role: str, target: str) -> HookStatus | None:
        """The tracked hook for ``role`` and ``target``."""
        return self._by_target.get((role, target))

    @property
    def never_installed(self) -> list[HookStatus]:
        """Hooks known not to have gone in, with why."""
        return [h for h in self.hooks if h.problem is not None]

    @property
    def installed(self) -> list[HookStatus]:
        """Hooks in place now: installed and not lost since."""
        return [h for h in self.hooks if h.installed and h.lost is None]

    @property
    def lost(self) -> list[HookStatus]:
        """Hooks that went in and lost their wrapper since."""
        return [h for h in self.hooks if h.installed and h.lost is not None]

    @property
    def calls(self) -> int:
        """Calls of every hook together."""
        return sum(h.calls for h in self.hooks)

    def has_problems(self) -> bool:
        """Whether anything was not set up as configured."""
        return bool(self.problems) or any(h.problem is not None or h.lost is not None for h in self.hooks)

    def issues(self) -> list[str]:
        """Every problem, one message each: the configuration's first, then the hooks that never went in."""
        out = [str(p).strip() for p in self.problems]
        out += [f"{h.key}: `{h.target}` was never installed: {h.problem}" for h in self.never_installed]
        out += [f"{h.key}: `{h.target}` lost its wrapper after {h.calls} calls: {h.lost}; the calls after that "
                "went unchecked" for h in self.lost]
        return out

    def summary(self, *, listed_below: bool = False) -> str:
        """The summary's hook line: `hook_line`, then the configuration problems (``; 1 configuration problem: ...``).

        ``listed_below``: each problem is printed in full right after (raise
        mode at exit), so the line only counts them.
        """
        text = self.hook_line()
        if self.problems:
            k = len(self.problems)
            text += f"; {k} configuration problem{'s' if k != 1 else ''}" + (" (below)" if listed_below else (
                ": " + "; ".join(_first_line(p) for p in self.problems)))
        return text

    def hook_line(self) -> str:
        """Hooks installed and the calls each saw, then those that never went in, and why.

        ``4 of 4 hooks installed; calls: get_rollout_data 12, get_batch 34, ...``, or
        ``1 of 4 hooks never installed: batch-builder `x.dataa:get_batch` (...); 3 installed, calls: ...``.
        """
        total = len(self.hooks)
        calls = self._calls()
        missing = self.never_installed
        if missing:
            what = ", ".join(f"{h.role} `{h.target}` ({h.problem})" for h in missing)
            text = f"{len(missing)} of {total} hook{'s' if total != 1 else ''} never installed: {what}"
            n = len(self.installed)
            text += f"; {n} installed" + (f", calls: {calls}" if n else "")
        else:
            text = f"{len(self.installed)} of {total} hook{'s' if total != 1 else ''} installed"
            if calls:
                text += f"; calls: {calls}"
        lost = self.lost
        if lost:
            text += f"; {len(lost)} lost: " + ", ".join(f"{h.role} `{h.target}` ({h.lost})" for h in lost)
        unused = [h for h in self.hooks if h.not_exercised and not h.installed and h.problem is None]
        if unused:
            text += (f"; {len(unused)} not exercised (the preset's, in modules this process never imported: "
                     + ", ".join(f"`{h.target}`" for h in unused) + ")")
        again = [h for h in self.installed if h.reinstalled]
        if again:
            text += "; re-installed: " + ", ".join(f"{h.name} ({'; '.join(h.reinstalled)})" for h in again)
        waiting = total - len(self.installed) - len(missing) - len(lost) - len(unused)
        if waiting:
            text += f"; {waiting} waiting for {'its' if waiting == 1 else 'their'} module"
        if self.tracer_off:
            text += f"; {self.tracer_off} tracer hook{'s' if self.tracer_off != 1 else ''} off (LAYOUTCHECK_TRACE=1)"
        return text

    def _calls(self) -> str:
        # A function's own name, unless two hooked functions share it: then its module's last part too.
        names = [h.name for h in self.installed]
        return ", ".join(
            f"{h.name if names.count(h.name) == 1 else h.target.partition(':')[0].rpartition('.')[2] + '.' + h.name}"
            f" {h.calls}" for h in self.installed)

    def error(self, when: str) -> ConfigError:
        """The error raise mode stops the run with, ``when`` saying at which point (``at the end of the first step``)."""
        issues = self.issues()
        first_key = self.problems[0].key if self.problems else None
        first_source = self.problems[0].source if self.problems else None
        if first_key is None and self.never_installed:
            key, _, source = self.never_installed[0].key.partition(" in ")
            first_key, first_source = key, source or None
        body = "\n".join(f"  {issue}".replace("\n", "\n  ") for issue in issues)
        return ConfigError(
            f"the debug mode is not checking what its configuration says ({len(issues)} problem"
            f"{'s' if len(issues) != 1 else ''}, raise mode, {when}):\n{body}\n"
            f"  hooks: {len(self.installed)} of {len(self.hooks)} installed"
            + (f", calls: {self._calls()}" if self.installed else "") + "\n"
            "  fix: correct the configuration (or the variable); warn and record modes report this and go on",
            key=first_key, source=first_source,
        )
