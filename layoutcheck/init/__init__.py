"""``layoutcheck init``: propose the debug mode's table (and the linter's owners) from what the project model found.

* `findings`: the seam with the linter's project model (`layoutcheck.model`):
  which functions play which part in the data path, and why, from the
  model's public queries only (owners, CP helpers, the call graph);
* `proposal`: those findings as configuration: roles, boundary contracts
  (from the presets' library where the model cannot yet read a function's
  fields), coordinates, owners, with a comment on each saying why;
* `importable`: the dotted path the program imports a file by (namespace
  packages included), which hooks are written with;
* `verify` and `probe`: each proposed entry checked as the debug mode would
  install it, in a subprocess that imports the project (bounded in time);
* `command`: the command: writes the table into the project's
  configuration (never over an existing one without ``--force``), or prints
  it (``--stdout``) or the change (``--diff``).
"""
