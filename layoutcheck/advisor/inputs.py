"""Reading token lengths: one integer per line, JSONL, ``.npy``, or a run report.

Every reader returns the lengths as one int64 array, or raises
`LengthsInputError` naming the file and the line (JSONL, text), the index
(``.npy``) or the sample (run report) of the first bad entry: the command
prints that one sentence and exits 2. A length is a sample's token count
``T``: a positive integer, at most ``max_length`` when one is given.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from layoutcheck.advisor.options import INPUT_FORMATS
from layoutcheck.errors import LayoutSpecError

__all__ = ["Lengths", "LengthsInputError", "format_for", "read_lengths"]


class LengthsInputError(LayoutSpecError):
    """A lengths file that cannot be used; the message names the file and the line or entry."""


@dataclass(frozen=True)
class Lengths:
    """Token lengths ``T`` of a corpus, and where they came from."""

    values: np.ndarray
    """int64, one entry per sample, every entry >= 1."""
    source: str
    """The file, as given (``-`` for standard input)."""
    format: str
    """The reader used: ``lines``, ``jsonl``, ``npy`` or ``report``."""


def format_for(path: str) -> str:
    """The reader ``auto`` picks: ``.npy``, ``.jsonl``/``.ndjson`` (a run report when its first line says so), ``.json`` (a run report), else lines."""
    suffix = Path(path).suffix.lower()
    if suffix == ".npy":
        return "npy"
    if suffix in (".jsonl", ".ndjson"):
        return "report" if _run_report_header(path) else "jsonl"
    if suffix == ".json":
        return "report"
    return "lines"


def _run_report_header(path: str) -> bool:
    # A debug run appends its report as JSON Lines: the header names the format on line 1.
    from layoutcheck.runtime.reporting.runlog import FORMAT

    try:
        with open(path, "rb") as f:
            first = f.readline(4096)
    except OSError:
        return False
    return f'"format": "{FORMAT}"'.encode() in first


def read_lengths(
    path: str,
    *,
    input_format: str = "auto",
    field: str = "length",
    max_length: int | None = None,
) -> Lengths:
    """Read and validate the lengths in ``path`` (``-``: standard input, one integer per line).

    ``field`` is the JSONL key holding a length or a list of token ids (a
    dotted path such as ``meta.num_tokens`` reaches into nested objects).
    """
    kind = ("lines" if path == "-" else format_for(path)) if input_format == "auto" else input_format
    if kind not in INPUT_FORMATS[1:]:
        raise LayoutSpecError(f"unknown input format {kind!r}: expected one of {', '.join(INPUT_FORMATS)}")
    lines: list[int] | None = None  # the 1-based line of each entry (text formats)
    if kind == "report":
        values = _from_report(path)
    elif kind == "npy":
        values = _from_npy(path)
    else:
        raw = _read_bytes(path)
        values, lines = _from_lines(path, raw) if kind == "lines" else _from_jsonl(path, raw, field)
    if values.size == 0:
        what = "the run report has no sample or micro-batch records" if kind == "report" else (
            f"the {'input' if path == '-' else 'file'} is empty")
        raise LengthsInputError(f"{path}: no lengths ({what})")
    if max_length is not None and int(values.max()) > max_length:
        index = int(np.flatnonzero(values > max_length)[0])
        if kind in ("lines", "jsonl"):
            where = f"{path}:{lines[index] if lines is not None else index + 1}"
        else:
            where = f"{path}: index {index}" if kind == "npy" else f"{path}: sample record #{index}"
        raise LengthsInputError(
            f"{where}: length {int(values[index])} is above --max-length {max_length} "
            "(truncate such samples or raise --max-length)"
        )
    return Lengths(values=values, source=path, format=kind)


def _read_bytes(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise LengthsInputError(f"{path}: cannot read: {err.strerror or err}") from None


def _positive(path: str, where: str, value: object, what: str = "") -> int:
    """``value`` as a length, or the error for it; ``what`` names a JSONL field (``field `x` is``)."""
    # bool is an int subclass; `true` in a JSON file is not a length.
    if isinstance(value, bool) or not isinstance(value, int):
        shown = json.dumps(value) if what else repr(value)
        problem = "an integer token length"
    elif value < 1:
        shown, problem = str(value), "a positive token length (a sample has at least one token)"
    else:
        return value
    text = f"{what}{shown[:40]}, not {problem}" if what else f"{shown[:40]} is not {problem}"
    raise LengthsInputError(f"{path}:{where}: {text}")


# --- one integer per line ---------------------------------------------------------


def _from_lines(path: str, raw: bytes) -> tuple[np.ndarray, list[int] | None]:
    lines = raw.splitlines()
    try:
        # The common case in one numpy call; any blank line or bad entry takes the slow path below.
        values = np.array(lines, dtype=np.int64)
    except (ValueError, OverflowError):
        pass
    else:
        if values.size == 0 or int(values.min()) >= 1:
            return values, None  # entry i is on line i + 1
    out: list[int] = []
    numbers: list[int] = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        try:
            value = int(text)
        except ValueError:
            shown = text.decode("utf-8", "replace")
            raise LengthsInputError(
                f"{path}:{number}: {shown[:40]!r} is not an integer token length (one integer per line)"
            ) from None
        out.append(_positive(path, str(number), value))
        numbers.append(number)
    return _int64(path, out, numbers), numbers


def _int64(path: str, out: list[int], numbers: list[int]) -> np.ndarray:
    try:
        return np.array(out, dtype=np.int64)
    except OverflowError:
        index = next(i for i, v in enumerate(out) if v >= 2**63)
        raise LengthsInputError(f"{path}:{numbers[index]}: length {out[index]} is too large") from None


# --- JSONL ----------------------------------------------------------------------


def _lookup(record: object, keys: list[str]) -> tuple[bool, object]:
    for key in keys:
        if not isinstance(record, dict) or key not in record:
            return False, None
        record = record[key]
    return True, record


def _from_jsonl(path: str, raw: bytes, field: str) -> tuple[np.ndarray, list[int]]:
    keys = field.split(".")
    out: list[int] = []
    numbers: list[int] = []
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise LengthsInputError(f"{path}:{number}: not valid JSON ({err})") from None
        if not isinstance(record, dict):
            raise LengthsInputError(f"{path}:{number}: a JSON {type(record).__name__}, not an object with `{field}`")
        found, value = _lookup(record, keys)
        if not found:
            raise LengthsInputError(f"{path}:{number}: no field `{field}` (choose the field with --field)")
        if isinstance(value, list):
            # A list of token ids: its length is the sample's length.
            value = len(value)
            if value == 0:
                raise LengthsInputError(f"{path}:{number}: field `{field}` is an empty list of token ids")
        out.append(_positive(path, str(number), value, f"field `{field}` is "))
        numbers.append(number)
    return _int64(path, out, numbers), numbers


# --- .npy -------------------------------------------------------------------------


def _from_npy(path: str) -> np.ndarray:
    try:
        array = np.load(path, allow_pickle=False)
    except OSError as err:
        raise LengthsInputError(f"{path}: cannot read: {err.strerror or err}") from None
    except ValueError as err:
        raise LengthsInputError(f"{path}: not a numpy array file without pickles ({err})") from None
    if not isinstance(array, np.ndarray) or array.ndim != 1:
        shape = getattr(array, "shape", None)
        raise LengthsInputError(f"{path}: expected a 1-D array of lengths, got shape {shape}")
    if array.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(array) | (array != np.floor(array)))
        if bad.size:
            raise LengthsInputError(f"{path}: index {int(bad[0])}: {array[bad[0]]} is not an integer token length")
    elif array.dtype.kind not in "iu":
        raise LengthsInputError(f"{path}: dtype {array.dtype} is not an integer array of lengths")
    if array.size and (array.dtype.kind == "f" and float(array.max()) >= 2**63):
        raise LengthsInputError(f"{path}: index {int(array.argmax())}: length {array.max()} is too large")
    values = array.astype(np.int64)
    if values.size and int(values.min()) < 1:
        index = int(np.flatnonzero(values < 1)[0])
        raise LengthsInputError(
            f"{path}: index {index}: {int(values[index])} is not a positive token length "
            "(a sample has at least one token)"
        )
    return values


# --- a run report -------------------------------------------------------------------


def _from_report(path: str) -> np.ndarray:
    from layoutcheck.runtime.reporting.runreport import load_run_report

    report = load_run_report(path)
    totals: Iterable[int]
    if report.samples:
        totals = (s.total for s in report.samples)
    else:
        totals = _micro_batch_totals(report.micro_batches)
    values = np.fromiter(totals, dtype=np.int64)
    if values.size and int(values.min()) < 1:
        index = int(np.flatnonzero(values < 1)[0])
        raise LengthsInputError(f"{path}: sample record #{index}: T={int(values[index])} is not a positive length")
    return values


def _micro_batch_totals(micro_batches: Iterable[object]) -> Iterator[int]:
    for batch in micro_batches:
        yield from batch.totals  # type: ignore[attr-defined]
