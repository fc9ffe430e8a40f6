"""Real trainers' code on CPU: pinned installs and checkouts, stubs for what a CPU cannot import, rank launchers.

The ground the trainer presets' tests stand on (issue 19): verl from PyPI at
pinned versions (in CI), Miles and slime from pinned checkouts named by
environment variables (skipped without them). See ``tests/trainers/README.md``.
"""
