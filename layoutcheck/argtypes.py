"""argparse value types shared by the commands (``check``'s ``--jobs``, the advisor's and the report's counts).

A module of its own so that the command modules (`layoutcheck.advisor.command`,
`layoutcheck.waste.command`) and `layoutcheck.cli`, which registers them, all
import it and never each other back: dependencies point from the CLI to the
commands, one way. Standard library only (the parsers are built at start-up).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["whole_number"]


def whole_number(minimum: int, meaning: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum`` (``meaning`` explains the minimum in errors)."""

    def parse(text: str) -> int:
        import argparse

        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum}{meaning} or more, got {value}")
        return value

    return parse
