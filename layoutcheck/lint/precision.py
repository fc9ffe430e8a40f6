"""Each rule's release status and its measured precision: the one table the rule registry reads.

A rule is *stable* (on by default) only when its findings on the precision
corpus, linted with no configuration and every finding read by hand, are at
least `TARGET` true; every other rule is in *preview*: it runs only under
``--preview`` (or ``preview = true`` in ``[tool.layoutcheck]``), or when it is
selected by its exact code or name (``--select LC113``; a prefix or ``ALL``
does not reach a preview rule without ``--preview``), as ruff does.

The policy for thin evidence: a rule is judged only on at least `MIN_FINDINGS`
findings. A rule with no finding on the corpus has no measured precision, and
stays in preview: nothing shows that its findings on real code are worth
reading, and a user loses nothing by it (``--preview`` or its code turns it on).
Below ten findings, 90% means every finding true, so one false finding keeps a
rule in preview.

The corpus, the verdict and cause of every finding, and the script that counts
them are in ``benchmarks/`` (``lint_truth.toml``, ``lint_truth.py``): run it on
the corpus checkouts after a change to the rules, and ``--write-precision``
rewrites `MEASURED` from the verdicts (a new finding has to be read and judged
first: an unread finding fails the run). A new rule gets its row here when it
is added (``Measured(0, 0)``: preview until measured); the registry refuses a
rule without one.
"""

from __future__ import annotations

from layoutcheck.records import dataclass

__all__ = ["MEASURED", "MIN_FINDINGS", "PREVIEW", "STABLE", "TARGET", "Measured", "status_for"]

TARGET = 0.90
"""The share of true findings a rule needs on the precision corpus to be on by default."""

MIN_FINDINGS = 1
"""Fewer findings than this on the corpus is no evidence: the rule stays in preview."""

STABLE = "stable"
PREVIEW = "preview"


def status_for(findings: int, true: int) -> str:
    """The status the release rule gives ``true`` true findings out of ``findings``."""
    return STABLE if findings >= MIN_FINDINGS and true >= TARGET * findings else PREVIEW


@dataclass(frozen=True)
class Measured:
    """A rule's findings on the precision corpus with no configuration, and how many were true."""

    findings: int
    true: int

    @property
    def precision(self) -> float | None:
        """True findings over all findings; None when it had none (no evidence)."""
        return self.true / self.findings if self.findings else None

    @property
    def status(self) -> str:
        """`STABLE` or `PREVIEW`, by `status_for`."""
        return status_for(self.findings, self.true)

    def describe(self) -> str:
        """``6/19 true (32%)``, or ``no finding`` when it had none."""
        if not self.findings:
            return "no finding"
        return f"{self.true}/{self.findings} true ({100 * self.true / self.findings:.0f}%)"


# The measured rows, by code. Written by `python benchmarks/lint_truth.py --write-precision ...`
# from the verdicts in benchmarks/lint_truth.toml (17 trees of the precision corpus, no configuration).
# BEGIN MEASURED
MEASURED: dict[str, Measured] = {
    "LC101": Measured(1, 1),
    "LC102": Measured(6, 6),
    "LC103": Measured(2, 2),
    "LC104": Measured(8, 8),
    "LC105": Measured(2, 2),
    "LC106": Measured(2, 2),
    "LC107": Measured(0, 0),
    "LC108": Measured(0, 0),
    "LC109": Measured(2, 2),
    "LC110": Measured(1, 1),
    "LC111": Measured(1, 0),
    "LC112": Measured(0, 0),
    "LC113": Measured(0, 0),
    "LC114": Measured(0, 0),
    "LC115": Measured(0, 0),
    "LC116": Measured(0, 0),
    "LC117": Measured(0, 0),
    "LC118": Measured(0, 0),
    "LC119": Measured(0, 0),
    "LC120": Measured(0, 0),
    "LC121": Measured(1, 1),
    "LC122": Measured(2, 2),
    "LC123": Measured(0, 0),
    "LC124": Measured(0, 0),
    "LC125": Measured(0, 0),
    "LC126": Measured(0, 0),
    "LC127": Measured(0, 0),
    "LC128": Measured(0, 0),
    "LC129": Measured(0, 0),
    "LC130": Measured(0, 0),
    "LC131": Measured(0, 0),
    "LC132": Measured(1, 1),
    "LC133": Measured(0, 0),
    "LC201": Measured(0, 0),
}
# END MEASURED
