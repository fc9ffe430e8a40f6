"""Plain data types the engine produces and the output formats consume."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True, order=True)
class Finding:
    """One lint finding. Lines and columns are 1-based, as in ruff and flake8.

    Field order is the sort order: path, line, column, rule.
    """

    path: str
    line: int
    column: int
    rule: str
    code: str
    end_line: int
    end_column: int
    message: str
    fixable: bool = False

    def to_dict(self) -> dict[str, object]:
        return asdict(self)
