"""The advisor's outputs: the text table, the JSON document, and the snippets users paste.

``pad_ratio`` is positions / true tokens everywhere (1.0 means no padding);
``over_floor`` is positions / pad-to-quantum positions - 1; ``gap_closed``
the share of the gap from one static length down to that floor.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from layoutcheck import geometry
from layoutcheck.advisor.advise import Advice, Score
from layoutcheck.advisor.baselines import BASELINES
from layoutcheck.advisor.options import EMIT_FORMATS, parallel_degrees

__all__ = ["emit", "emitted_k", "to_json", "to_text"]

_BASELINE_TITLES = dict(zip(BASELINES, ("quantiles", "powers of 2", "even")))


def _buckets(buckets: Sequence[int] | None) -> str:
    return ",".join(map(str, buckets)) if buckets else ""


def _pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.1%}" if signed else f"{value:.0%}"


def emit(buckets: Sequence[int], form: str) -> str:
    """``buckets`` as users paste them: a ``[tool.layoutcheck.runtime]`` entry, a YAML line, or JSON."""
    values = ", ".join(map(str, buckets))
    if form == "toml":
        return f"[tool.layoutcheck.runtime]\nbuckets = [{values}]"
    if form == "yaml":
        return f"training.static_shape_buckets: [{values}]"
    if form == "json":
        return json.dumps(list(buckets))
    raise ValueError(f"unknown emit format {form!r}: expected one of {', '.join(EMIT_FORMATS)}")


def emitted_k(advice: Advice) -> int:
    """The K a snippet holds: the one asked for with a single ``--k``, else the recommended one."""
    ks = advice.settings.ks
    return ks[0] if len(set(ks)) == 1 else advice.recommended


def _recommendation(advice: Advice) -> str:
    s = advice.settings
    row = advice.row(advice.recommended)
    over = advice.over_floor(row.optimum.positions)
    if over <= s.within / 100:
        return (
            f"recommended: K={row.k} ({_buckets(row.optimum.buckets)}), the smallest K within {s.within:g}% "
            f"of the floor ({over:+.1%})"
        )
    return (
        f"recommended: K={row.k} ({_buckets(row.optimum.buckets)}); no K up to {row.k} is within "
        f"{s.within:g}% of the floor (K={row.k} is {over:+.1%} above it)"
    )


def to_text(advice: Advice, source: str) -> str:
    """The table of every strategy and each K, then the recommendation, compile cost and verdict."""
    s = advice.settings
    ratio, over, closed = advice.pad_ratio, advice.over_floor, advice.gap_closed
    sampler = s.sampler if s.batch_size > 1 else "any sampler"
    if advice.window is not None:
        sampler += f", window {advice.window} micro-batches"
    lines = [
        f"layoutcheck buckets: {source}",
        f"  {advice.samples:,} samples, {advice.true_tokens:,} true tokens; max length {s.max_length}, "
        f"quantum {s.quantum}{parallel_degrees(s.sp_degree, s.cp_degree)}: "
        f"{len(advice.grid)} grid lengths",
        f"  {advice.micro_batches:,} micro-batches of {s.batch_size} ({sampler}); fitted on shuffle "
        f"{s.seed}, held out: shuffle {s.seed + 1}",
        "",
    ]
    header = ["strategy", "buckets", "positions", "x true", "over floor", "gap closed", "held out",
              *(_BASELINE_TITLES[n] for n in _BASELINE_TITLES)]
    rows: list[list[str]] = []

    def add(name: str, score: Score, buckets: str, baselines: dict[str, Score] | None = None) -> None:
        rows.append([
            name, buckets, f"{score.positions:,}", f"{ratio(score.positions):.3f}x",
            _pct(over(score.positions), signed=True),
            _pct(closed(score.positions) if score.buckets is not None or score is advice.floor else None),
            f"{ratio(score.held_out):.3f}x",
            *((f"{ratio(baselines[name].positions):.3f}x" for name in BASELINES) if baselines else ()),
        ])

    add("pad to longest", advice.longest, "(no fixed shapes)")
    add("pad to quantum (floor)", advice.floor, f"(every multiple of {s.step})")
    add("one static length", advice.static, str(s.max_length))
    if advice.current is not None:
        add("current", advice.current, _buckets(advice.current.buckets))
    for row in advice.rows:
        add(f"optimum K={row.k}", row.optimum, _buckets(row.optimum.buckets), row.baselines)
    lines.extend(_table(header, rows, right_from=2))
    lines.append("")
    lines.append("x true: positions per true token; held out: the same buckets scored on the other shuffle;")
    lines.append("the last three columns: hand-picked lists with the same K (sample quantiles, powers of two, even).")
    lines.append("")
    lines.append(_recommendation(advice))
    k = advice.recommended
    graphs = len(advice.row(k).optimum.buckets or ())
    lines.append(
        f"compile cost: {graphs} graph{'s' if graphs != 1 else ''} for K={k} (one per bucket, about "
        f"{s.compile_seconds:g} s each); Dynamo recompile limit needed: "
        f"{geometry.bucket_recompile_limit(graphs)} (2K + 4)"
    )
    if advice.verdict is not None:
        lines.append(f"verdict: {advice.verdict.text}")
    return "\n".join(lines)


def _table(header: list[str], rows: list[list[str]], *, right_from: int) -> list[str]:
    widths = [max(len(r[i]) if i < len(r) else 0 for r in [header, *rows]) for i in range(len(header))]

    def fmt(cells: list[str]) -> str:
        out = []
        for i, cell in enumerate(cells):
            out.append(cell.rjust(widths[i]) if i >= right_from else cell.ljust(widths[i]))
        return "  ".join(out).rstrip()

    return [fmt(header), *(fmt(r) for r in rows)]


def _score_json(advice: Advice, score: Score) -> dict[str, object]:
    return {
        "buckets": list(score.buckets) if score.buckets is not None else None,
        "positions": score.positions,
        "pad_ratio": round(advice.pad_ratio(score.positions), 6),
        "over_floor": round(advice.over_floor(score.positions), 6),
        # pad-to-longest is no bucket list: it has no place on the static-to-floor scale
        "gap_closed": None if score is advice.longest or (g := advice.gap_closed(score.positions)) is None
        else round(g, 6),
        "out_of_sample": {
            "positions": score.held_out,
            "pad_ratio": round(advice.pad_ratio(score.held_out), 6),
        },
    }


def to_json(advice: Advice, source: str, input_format: str) -> str:
    """The whole result as one JSON document (its fields are listed in docs/reports.md)."""
    s = advice.settings
    optimum = []
    for row in advice.rows:
        entry = _score_json(advice, row.optimum)
        entry["out_of_sample"]["refit_positions"] = row.refit_held_out  # type: ignore[index]
        optimum.append({
            "k": row.k,
            **entry,
            "graphs": len(row.optimum.buckets or ()),
            "recompile_limit": geometry.bucket_recompile_limit(len(row.optimum.buckets or (1,))),
            "baselines": {name: _score_json(advice, b) for name, b in row.baselines.items()},
        })
    v = advice.verdict
    doc = {
        "input": {"path": source, "format": input_format, "samples": advice.samples,
                  "true_tokens": advice.true_tokens},
        "settings": {
            "max_length": s.max_length, "quantum": s.quantum, "grid_step": s.step, "grid_lengths": len(advice.grid),
            "batch_size": s.batch_size, "sampler": s.sampler, "window": advice.window, "k": sorted(set(s.ks)),
            "sp_degree": s.sp_degree, "cp_degree": s.cp_degree, "recompile_limit": s.recompile_limit, "seed": s.seed,
            "validation_seed": s.seed + 1, "within_percent": s.within, "compile_seconds": s.compile_seconds,
            "step_seconds": s.step_seconds, "steps": s.steps,
        },
        "micro_batches": advice.micro_batches,
        "strategies": {
            "pad_to_longest": _score_json(advice, advice.longest),
            "pad_to_quantum": _score_json(advice, advice.floor),
            "static": _score_json(advice, advice.static),
            "current": None if advice.current is None else _score_json(advice, advice.current),
        },
        "optimum": optimum,
        "recommended": {"k": advice.recommended, "buckets": list(advice.row(advice.recommended).optimum.buckets or ())},
        "verdict": None if v is None else {
            "text": v.text, "k": v.k, "buckets": list(v.buckets), "padding_saved": round(v.padding_saved, 6),
            "seconds_saved_per_step": v.time_saved_per_step, "extra_compile_seconds": v.extra_compile_seconds,
            "break_even_steps": v.break_even_steps, "worth_it": v.worth_it,
        },
        "warnings": advice.warnings,
    }
    return json.dumps(doc, indent=2)
