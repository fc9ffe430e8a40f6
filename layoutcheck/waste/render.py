"""`layoutcheck report` output: the text summary and the JSON document, for one run report or a job's.

Both start from the runs' own totals (complete, whatever detail was kept),
then say how much detail the reports kept before showing it: nothing below
is cut silently. A job of several ranks adds a row per rank and the ranks
that disagree.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from layoutcheck.errors import describe_value
from layoutcheck.waste.job import JobWaste, RankRow, rank_ranges

__all__ = ["detail_coverage", "to_json", "to_text"]

SHOWN_SAMPLES = 8
"""Sample indices listed per violation group before the rest are counted."""


def _samples_text(samples: Sequence[int]) -> str:
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


def _ratio(positions: int | None, true: int | None) -> str:
    return f"{positions / true:.2f}x" if positions is not None and true else "-"


def _of(kept: int, total: int) -> str:
    return f"{kept:,}" if kept >= total else f"{kept:,} of {total:,}"  # a hand-made report may have no totals


def detail_coverage(w: JobWaste) -> str:
    """What the detail below covers, against the runs' totals: ``32 of 144 samples, 16 of 72 micro-batches``."""
    samples = sum(r.samples for r in w.ranks)
    batches = sum(r.micro_batches for r in w.ranks)
    kept_samples = sum(w.lengths.values())
    text = f"{_of(kept_samples, samples)} samples, {_of(w.batches, batches)} micro-batches"
    if kept_samples < samples or w.batches < batches:
        text += " (the detail each run kept: its first rollouts and micro-batches; the totals cover everything)"
    return text


def _run_totals(w: JobWaste) -> list[str]:
    t = w.totals
    where = "every rank, summed" if w.multi else "the whole run"
    lines = [f"run totals ({where}):"]
    if t.get("padded_tokens"):
        lines.append(f"  max_seq_lens: {t['true_tokens']:,} true tokens padded to {t['padded_tokens']:,} "
                     f"({_ratio(t['padded_tokens'], t['true_tokens'])})")
    if t.get("batch_true_tokens"):
        lines.append(f"  micro-batches: {t['batch_true_tokens']:,} true tokens in {t['batch_positions']:,} positions "
                     f"({_ratio(t['batch_positions'], t['batch_true_tokens'])})")
    if len(lines) == 1:
        lines.append("  no padded samples or micro-batches recorded (boundary contracts and presets record the calls "
                     "they checked and their violations, not padding)" if w.hooks and not w.batches
                     else "  no padded samples or micro-batches recorded")
    return lines


def _checked(w: JobWaste) -> list[str]:
    """The hooks the runs configured (calls summed over ranks, where each went in) and their configuration problems."""
    if not w.hooks and not w.config_problems:
        return []
    lines: list[str] = []
    if w.hooks:
        ranks = {r.rank for r in w.ranks}
        parts = []
        for h in w.hooks:
            text = f"{h.role} {h.target} {h.calls:,} call{'s' if h.calls != 1 else ''}"
            if w.multi and h.installed and h.installed != ranks:
                text += f" (installed on rank{'s' if len(h.installed) != 1 else ''} {rank_ranges(h.installed)})"
            if not h.installed:
                text += " (never installed" + "".join(f": {why}" for why in list(h.problems)[:1]) + ")"
            parts.append(text)
        lines.append(f"hooks ({len(w.hooks)}): " + "; ".join(parts))
    if w.config_problems:
        lines.append(f"configuration problems ({len(w.config_problems)}): the runs did not check everything "
                     "their configuration says")
        for text, ranks in w.config_problems:
            lines.append(f"    {'rank' + ('s' if len(ranks) != 1 else '') + ' ' + rank_ranges(ranks) + ': ' if w.multi else ''}"
                         f"{text}")
    return lines


def _rank_rows(w: JobWaste) -> list[str]:
    flagged: dict[int, list[str]] = {}
    for d in w.disagreements:
        for _, ranks in d.variants[1:]:  # the most common variant is the reference
            for rank in ranks:
                flagged.setdefault(rank, []).append(d.kind)
    rows = []
    for r in w.ranks:
        cp = "-" if r.cp_size is None else f"{r.cp_rank}/{r.cp_size}"
        rows.append([str(r.rank), cp, f"{r.rollouts:,}", f"{r.samples:,}", f"{r.micro_batches:,}",
                     "-" if r.inflation is None else f"{r.inflation:.2f}x",
                     "-" if r.positions_ratio is None else f"{r.positions_ratio:.2f}x",
                     str(sum(r.violations.values())), ", ".join(dict.fromkeys(flagged.get(r.rank, []))) or "-"])
    return [f"ranks ({len(w.ranks)}): whole-run totals of each",
            *_table(["rank", "cp", "rollouts", "samples", "micro-batches", "P/T", "positions/T", "violations",
                     "differs in"], rows, text={1, 8})]


def _disagreements(w: JobWaste) -> list[str]:
    if not w.disagreements:
        return ["ranks agree: settings, micro-batch schedules, padded lengths of shared micro-batches, violations"]
    lines = [f"ranks that disagree ({len(w.disagreements)}):"]
    for d in w.disagreements:
        lines.append(f"  {d.kind}: {d.summary}")
        for text, ranks in d.variants:
            lines.append(f"    rank{'s' if len(ranks) != 1 else ''} {rank_ranges(ranks)}: {text}")
    return lines


def to_text(w: JobWaste, sources: Sequence[str], *, top: int = 5) -> str:
    """The runs' totals, then the detail: violations, padding per sample and per micro-batch, shapes, savings."""
    lines = [f"layoutcheck report: {sources[0] if len(sources) == 1 else f'{len(sources)} run reports'}"]
    if w.multi:
        hosts = len({r.host for r in w.ranks})
        lines.append(f"  {len(w.ranks)} ranks (world size {', '.join(sorted({str(r.world_size) for r in w.ranks}))}) "
                     f"on {hosts} host(s)")
    else:
        r = w.ranks[0]
        lines.append(f"  rank {r.rank} of {r.world_size}, mode {r.mode}, layoutcheck {r.version}; {r.rollouts} "
                     f"rollout(s), {r.samples:,} samples, {r.micro_batches:,} micro-batches")
    lines.extend(f"  warning: {p}" for p in w.problems)
    checked = _checked(w)
    lines += ["", *checked, *([""] if checked else []), *_run_totals(w), f"detail below: {detail_coverage(w)}", ""]
    if w.multi:
        lines += [*_rank_rows(w), "", *_disagreements(w), ""]

    # --- violations
    rank_col = w.multi
    if w.violations:
        counts = ", ".join(f"{g.invariant}/{g.field} x{g.count}" for g in w.violations)
        lines.append(f"violations: {sum(g.count for g in w.violations)} ({counts})")
        rows = [[g.invariant, g.field, ", ".join(g.wheres), str(g.count),
                 *([rank_ranges(g.ranks)] if rank_col else []), _samples_text(sorted(g.samples)),
                 describe_value(g.problem, 90)] for g in w.violations]
        header = ["invariant", "field", "where", "count", *(["ranks"] if rank_col else []), "samples", "first problem"]
        lines.extend(_table(header, rows, text={0, 1, 2, *range(4, len(header))}))
        for g in w.violations:
            lines.append(f"    fix {g.invariant} ({g.field}): {g.hint}")
    else:
        lines.append("violations: none")
    lines.append("")

    # --- per sample
    if w.samples:
        lines.append(
            f"padding per sample (max_seq_lens): {w.sample_true:,} true tokens padded to {w.sample_padded:,} "
            f"({_ratio(w.sample_padded, w.sample_true)}); each sample padded to its own aligned length: "
            f"{w.sample_own:,} ({_ratio(w.sample_own, w.sample_true)})"
        )
        for rank, g in w.rollout_global:
            on = f"rank {rank}, " if rank_col else ""
            lines.append(
                f"  {on}rollout {g.rollout}: all {g.samples} samples are padded to P={g.padded:,} = round_up(max T, A), "
                f"set by the longest, sample {g.sample} (T={g.total:,}): rollout-global padding"
            )
        if w.rollout_global_count > len(w.rollout_global):
            lines.append(f"  ... and {w.rollout_global_count - len(w.rollout_global)} more rollout(s) padded so")
        rows = [[*([str(rank)] if rank_col else []), str(s.rollout), str(s.sample), f"{s.total:,}", f"{s.padded:,}",
                 str(s.unit), f"{s.inflation:.1f}x"] for rank, s in w.worst_samples[:top]]
        lines.append(f"  worst {len(rows)} sample(s) by inflation P/T:")
        lines.extend(_table([*(["rank"] if rank_col else []), "rollout", "sample", "T", "P", "A", "P/T"], rows))
    elif w.batches or not w.hooks:  # (a contract's report has no padding records: the totals said so)
        lines.append("padding per sample: no sample records with a padded length "
                     "(THD, or the producer was not checked)")
    if w.samples or w.batches or not w.hooks:
        lines.append("")

    # --- per micro-batch
    if w.batches:
        lines.append(
            f"padding per micro-batch: {w.batches:,} micro-batches, {w.batch_true:,} true tokens in "
            f"{w.positions:,} positions: pad share {1 - w.batch_true / w.positions:.0%} of positions "
            f"(median micro-batch {w.share_median:.0%}, worst {w.share_worst:.0%})"
        )
        rows = [[*([str(rank)] if rank_col else []), str(b.rollout), str(b.index), b.layout, str(b.size),
                 "-" if b.padded is None else f"{b.padded:,}", f"{b.longest:,}", f"{b.true_tokens:,}",
                 f"{b.positions:,}", f"{b.pad_share:.0%}"] for rank, b in w.worst_batches[:top]]
        lines.append(f"  worst {len(rows)} micro-batch(es) by pad share:")
        offset = 1 if rank_col else 0
        lines.extend(_table([*(["rank"] if rank_col else []), "rollout", "k", "layout", "B", "P", "longest T",
                             "true tokens", "positions", "pad share"], rows, text={2 + offset}))
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
        rows = [["as the run laid them out", f"{base:,}", _ratio(base, w.batch_true), "-"]]
        rows.append(["per-sample padding (P = round_up(T, A))", f"{w.per_sample_positions:,}",
                     _ratio(w.per_sample_positions, w.batch_true), _saved(base, w.per_sample_positions)])
        if w.fit.buckets:
            label = f"advisor buckets K={w.fit.k} ({','.join(map(str, w.fit.buckets))})"
            rows.append([label, f"{w.fit.positions:,}", _ratio(w.fit.positions, w.batch_true),
                         _saved(base, w.fit.positions)])
        lines.extend(_table(["padding", "positions", "x true", "saved"], rows, text={0}))
    if w.notes_count:
        lines.append("")
        lines.append(f"notes ({w.notes_count}): checks that could not run")
        lines.extend(f"    {note}" for note in w.notes)
        if w.notes_count > len(w.notes):
            lines.append(f"    ... and {w.notes_count - len(w.notes)} more")
    return "\n".join(lines)


def _saved(base: int, other: int) -> str:
    saved = base - other
    return f"{saved:,} ({saved / base:.0%})" if base else "-"


def _rank_json(r: RankRow) -> dict[str, object]:
    return {"rank": r.rank, "source": r.source, "world_size": r.world_size, "cp_rank": r.cp_rank,
            "cp_size": r.cp_size, "host": r.host, "mode": r.mode, "hooks": list(r.hooks),
            "config_file": r.config_file, "layoutcheck_version": r.version, "rollouts": r.rollouts,
            "samples": r.samples, "micro_batches": r.micro_batches, "true_tokens": r.true_tokens,
            "padded_tokens": r.padded_tokens, "batch_true_tokens": r.batch_true_tokens,
            "batch_positions": r.batch_positions, "inflation": r.inflation, "positions_per_true_token": r.positions_ratio,
            "violations": r.violations, "schedule": list(r.schedule), "rollout_global": r.rollout_global,
            "truncated": r.truncated}


def to_json(w: JobWaste, sources: Sequence[str], *, top: int = 5) -> str:
    """The summary as one JSON document (the text's figures, plus every rank's row)."""
    multi = w.multi
    doc = {
        "source": sources[0] if len(sources) == 1 else list(sources),
        "rank": None if multi else w.ranks[0].rank,
        "truncated": w.truncated,
        "run_totals": w.totals,
        "detail": {"samples": sum(w.lengths.values()), "micro_batches": w.batches,
                   "run_samples": sum(r.samples for r in w.ranks),
                   "run_micro_batches": sum(r.micro_batches for r in w.ranks)},
        "ranks": [_rank_json(r) for r in w.ranks],
        "problems": w.problems,
        "disagreements": [{"kind": d.kind, "summary": d.summary,
                           "variants": [{"what": text, "ranks": list(ranks)} for text, ranks in d.variants]}
                          for d in w.disagreements],
        "violations": [
            {"invariant": g.invariant, "field": g.field, "count": g.count, "where": list(g.wheres),
             "ranks": sorted(g.ranks), "samples": sorted(g.samples), "problem": g.problem, "hint": g.hint}
            for g in w.violations
        ],
        "samples": {
            "count": w.samples,
            "true_tokens": w.sample_true,
            "padded_tokens": w.sample_padded,
            "own_padded_tokens": w.sample_own,
            "inflation": w.sample_padded / w.sample_true if w.sample_true else None,
            "worst": [{"rank": rank, "rollout": s.rollout, "sample": s.sample, "T": s.total, "P": s.padded,
                       "A": s.unit, "inflation": round(s.inflation, 4)} for rank, s in w.worst_samples[:top]],
            "rollout_global": [{"rank": rank, "rollout": g.rollout, "P": g.padded, "sample": g.sample, "T": g.total,
                                "samples": g.samples} for rank, g in w.rollout_global],
            "rollout_global_count": w.rollout_global_count,
        },
        "micro_batches": {
            "count": w.batches,
            "true_tokens": w.batch_true,
            "positions": w.positions,
            "pad_share": 1 - w.batch_true / w.positions if w.positions else None,
            "median_pad_share": w.share_median,
            "worst": [{"rank": rank, "rollout": b.rollout, "k": b.index, "layout": b.layout, "B": b.size,
                       "P": b.padded, "longest": b.longest, "true_tokens": b.true_tokens, "positions": b.positions,
                       "pad_share": round(b.pad_share, 4)} for rank, b in w.worst_batches[:top]],
        },
        "shapes": [{"shape": list(shape), "count": n} for shape, n in w.shapes],
        "padded_lengths": [{"P": p, "count": n} for p, n in w.padded_lengths],
        "savings": {
            "per_sample_padding": {"positions": w.per_sample_positions,
                                   "saved": w.positions - w.per_sample_positions},
            "advisor_buckets": {"k": w.fit.k, "buckets": list(w.fit.buckets), "max_length": w.fit.max_length,
                                "quantum": w.fit.quantum, "positions": w.fit.positions,
                                "saved": w.positions - w.fit.positions},
        },
        "notes": w.notes,
        "notes_count": w.notes_count,
        "hooks": [{"role": h.role, "target": h.target, "calls": h.calls, "installed_on": sorted(h.installed),
                   "problems": [{"problem": why, "ranks": ranks} for why, ranks in h.problems.items()]}
                  for h in w.hooks],
        "configuration_problems": [{"problem": text, "ranks": list(ranks)} for text, ranks in w.config_problems],
    }
    return json.dumps(doc, indent=2)
