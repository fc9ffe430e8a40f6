"""Does a refactor of the per-file walk leave every file's facts byte-identical?

Digests the facts `layoutcheck.model.extract.extract` gives each ``.py`` file under the given roots
(default settings): its ``repr`` and its cache data, hashed. Save a baseline before the refactor,
compare after each step:

    PYTHONHASHSEED=0 python benchmarks/facts_identity.py save /tmp/base.json fixtures rules tests /tmp/pc
    PYTHONHASHSEED=0 python benchmarks/facts_identity.py compare /tmp/base.json fixtures rules tests /tmp/pc

Run both with the same ``PYTHONHASHSEED`` (sets of strings are ordered by their hashes) and with
``PYTHONPATH`` at the tree whose code you mean. ``compare`` prints how many files it compared and
each file whose facts differ (exit status 1), or a file missing on one side.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from layoutcheck.model.extract import extract
from layoutcheck.model.facts import cache_data
from layoutcheck.model.settings import LintSettings


def digests(roots: list[str]) -> dict[str, str]:
    """File path -> the SHA-256 of its facts (``repr`` and cache data), for every readable ``.py`` file."""
    settings = LintSettings()
    out: dict[str, str] = {}
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")):
            try:
                source = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            facts = extract(source, settings)
            text = repr(facts) + "\n" + json.dumps(cache_data(facts), sort_keys=True, default=repr)
            out[str(path)] = hashlib.sha256(text.encode()).hexdigest()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("action", choices=("save", "compare"))
    parser.add_argument("baseline", type=Path, help="the JSON file of digests to write (save) or read (compare)")
    parser.add_argument("roots", nargs="+", help="folders whose .py files are extracted")
    args = parser.parse_args(argv)
    found = digests(args.roots)
    if args.action == "save":
        args.baseline.write_text(json.dumps(found, indent=0, sort_keys=True), encoding="utf-8")
        print(f"{len(found)} files digested into {args.baseline}")
        return 0
    base = json.loads(args.baseline.read_text(encoding="utf-8"))
    differing = sorted(path for path in base.keys() & found.keys() if base[path] != found[path])
    missing = sorted(base.keys() ^ found.keys())
    print(f"compared {len(base.keys() & found.keys())} files: {len(differing)} with other facts, "
          f"{len(missing)} on one side only")
    for path in differing:
        print(f"  facts differ: {path}")
    for path in missing:
        print(f"  only {'in the baseline' if path in base else 'now'}: {path}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
