"""`layoutcheck report` output: the text summary and the JSON document."""

from __future__ import annotations

import json
import statistics

from layoutcheck.errors import describe_value
from layoutcheck.waste.analysis import WasteReport

__all__ = ["to_json", "to_text"]

SHOWN_SAMPLES = 8
"""Sample indices listed per violation group before the rest are counted."""


def _samples_text(samples: tuple[int, ...]) -> str:
    if not samples:
        return "-"
    shown = ", ".join(map(str, samples[:SHOWN_SAMPLES]))
    return shown + (f" (+{len(samples) - SHOWN_SAMPLES} more)" if len(samples) > SHOWN_SAMPLES else "")


def _table(header: list[str], rows: list[list[str]], *, text: set[int] = frozenset()) -> list[str]:
    """An indented table: columns in ``text`` left-aligned, numbers right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [
        "    " + "  ".join(c.ljust(w) if i in text else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in [header, *rows]
    ]


def _ratio(positions: int, true: int) -> str:
    return f"{positions / true:.2f}x" if true else "-"


def to_text(w: WasteReport, source: str, *, top: int = 5) -> str:
    """Violations, padding per sample and per micro-batch, shapes, and what other padding would save."""
    r = w.report
    t = r.totals
    lines = [
        f"layoutcheck report: {source}",
        f"  rank {r.rank.rank} of {r.rank.world_size}, mode {r.mode}, written {r.created} by layoutcheck "
        f"{r.layoutcheck_version}; {t.rollouts} rollout(s), {t.samples:,} samples, {t.micro_batches:,} micro-batches",
    ]
    if r.truncated:
        lines.append("  (per-sample and per-micro-batch detail was truncated in the run: the totals below are "
                     "the detail kept; the run's totals line is complete)")
    lines.append("")

    # --- violations
    if w.violation_groups:
        counts = ", ".join(f"{g.invariant}/{g.field} x{g.count}" for g in w.violation_groups)
        lines.append(f"violations: {len(r.violations)} ({counts})")
        rows = [[g.invariant, g.field, ", ".join(g.wheres), str(g.count), _samples_text(g.samples),
                 describe_value(g.problem, 90)] for g in w.violation_groups]
        lines.extend(_table(["invariant", "field", "where", "count", "samples", "first problem"], rows,
                            text={0, 1, 2, 4, 5}))
        for g in w.violation_groups:
            lines.append(f"    fix {g.invariant} ({g.field}): {g.hint}")
    else:
        lines.append("violations: none")
    lines.append("")

    # --- per sample
    if w.samples:
        true = sum(s.total for s in w.samples)
        padded = sum(s.padded for s in w.samples)
        own = sum(s.own_padded for s in w.samples)
        lines.append(
            f"padding per sample (max_seq_lens): {true:,} true tokens padded to {padded:,} ({_ratio(padded, true)}); "
            f"each sample padded to its own aligned length: {own:,} ({_ratio(own, true)})"
        )
        for g in w.rollout_global:
            lines.append(
                f"  rollout {g.rollout}: all {g.samples} samples are padded to P={g.padded:,} = round_up(max T, A), "
                f"set by the longest, sample {g.sample} (T={g.total:,}): rollout-global padding"
            )
        rows = [[str(s.rollout), str(s.sample), f"{s.total:,}", f"{s.padded:,}", str(s.unit), f"{s.inflation:.1f}x"]
                for s in w.worst_samples(top)]
        lines.append(f"  worst {len(rows)} sample(s) by inflation P/T:")
        lines.extend(_table(["rollout", "sample", "T", "P", "A", "P/T"], rows))
    else:
        lines.append("padding per sample: no sample records with a padded length "
                     "(THD, or the producer was not checked)")
    lines.append("")

    # --- per micro-batch
    if w.batches:
        shares = [b.pad_share for b in w.batches]
        lines.append(
            f"padding per micro-batch: {len(w.batches):,} micro-batches, {w.true_tokens:,} true tokens in "
            f"{w.positions:,} positions: pad share {1 - w.true_tokens / w.positions:.0%} of positions "
            f"(median micro-batch {statistics.median(shares):.0%}, worst {max(shares):.0%})"
        )
        rows = [[str(b.rollout), str(b.index), b.layout, str(b.size), "-" if b.padded is None else f"{b.padded:,}",
                 f"{b.longest:,}", f"{b.true_tokens:,}", f"{b.positions:,}", f"{b.pad_share:.0%}"]
                for b in w.worst_batches(top)]
        lines.append(f"  worst {len(rows)} micro-batch(es) by pad share:")
        lines.extend(_table(["rollout", "k", "layout", "B", "P", "longest T", "true tokens", "positions",
                             "pad share"], rows, text={2}))
        lines.append("")

    # --- shapes
    if w.shapes or w.padded_lengths:
        shapes = ", ".join(f"{list(shape)} x{n}" for shape, n in w.shapes[:top])
        more = f" (+{len(w.shapes) - top} more)" if len(w.shapes) > top else ""
        lines.append(
            f"distinct padded shapes: {len(w.shapes)} local tokens shape(s){': ' + shapes + more if shapes else ''}; "
            f"{len(w.padded_lengths)} BSHD padded length(s) P: each one a compile for static-shape users"
        )
        lines.append("")

    # --- what other padding would lay out
    if w.batches:
        lines.append("positions for the same micro-batches:")
        base = w.positions
        rows = [["as the run laid them out", f"{base:,}", _ratio(base, w.true_tokens), "-"]]
        rows.append(["per-sample padding (P = round_up(T, A))", f"{w.per_sample_positions:,}",
                     _ratio(w.per_sample_positions, w.true_tokens), _saved(base, w.per_sample_positions)])
        if w.advisor_buckets:
            label = f"advisor buckets K={w.k} ({','.join(map(str, w.advisor_buckets))})"
            rows.append([label, f"{w.advisor_positions:,}", _ratio(w.advisor_positions, w.true_tokens),
                         _saved(base, w.advisor_positions)])
        lines.extend(_table(["padding", "positions", "x true", "saved"], rows, text={0}))
    if w.notes:
        lines.append("")
        lines.append(f"notes ({len(w.notes)}): checks that could not run")
        lines.extend(f"    {note}" for note in w.notes)
    return "\n".join(lines)


def _saved(base: int, other: int) -> str:
    saved = base - other
    return f"{saved:,} ({saved / base:.0%})" if base else "-"


def to_json(w: WasteReport, source: str, *, top: int = 5) -> str:
    """The summary as one JSON document."""
    true = sum(s.total for s in w.samples)
    padded = sum(s.padded for s in w.samples)
    doc = {
        "source": source,
        "rank": w.report.rank.rank,
        "truncated": w.report.truncated,
        "violations": [
            {"invariant": g.invariant, "field": g.field, "count": g.count, "where": list(g.wheres),
             "samples": list(g.samples), "problem": g.problem, "hint": g.hint}
            for g in w.violation_groups
        ],
        "samples": {
            "count": len(w.samples),
            "true_tokens": true,
            "padded_tokens": padded,
            "own_padded_tokens": sum(s.own_padded for s in w.samples),
            "inflation": padded / true if true else None,
            "worst": [{"rollout": s.rollout, "sample": s.sample, "T": s.total, "P": s.padded, "A": s.unit,
                       "inflation": round(s.inflation, 4)} for s in w.worst_samples(top)],
            "rollout_global": [{"rollout": g.rollout, "P": g.padded, "sample": g.sample, "T": g.total,
                                "samples": g.samples} for g in w.rollout_global],
        },
        "micro_batches": {
            "count": len(w.batches),
            "true_tokens": w.true_tokens,
            "positions": w.positions,
            "pad_share": 1 - w.true_tokens / w.positions if w.positions else None,
            "worst": [{"rollout": b.rollout, "k": b.index, "layout": b.layout, "B": b.size, "P": b.padded,
                       "longest": b.longest, "true_tokens": b.true_tokens, "positions": b.positions,
                       "pad_share": round(b.pad_share, 4)} for b in w.worst_batches(top)],
        },
        "shapes": [{"shape": list(shape), "count": n} for shape, n in w.shapes],
        "padded_lengths": [{"P": p, "count": n} for p, n in w.padded_lengths],
        "savings": {
            "per_sample_padding": {"positions": w.per_sample_positions,
                                   "saved": w.positions - w.per_sample_positions},
            "advisor_buckets": {"k": w.k, "buckets": list(w.advisor_buckets), "max_length": w.max_length,
                                "quantum": w.quantum, "positions": w.advisor_positions,
                                "saved": w.positions - w.advisor_positions},
        },
        "notes": w.notes,
    }
    return json.dumps(doc, indent=2)
