"""Padding waste reports: ``layoutcheck report RUN.json`` (numpy; matplotlib for ``--plot``).

* `analysis`: a run report summarised (violations, inflation, pad shares,
  shapes, what per-sample padding or the advisor's buckets would save);
* `render`: its text and JSON;
* `plot`: the padding picture (also drawn by ``layoutcheck buckets --plot``);
* `command`: ``layoutcheck report`` (its parser imports nothing heavy).
"""
