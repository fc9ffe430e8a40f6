"""The linter's analysis: what the checked code says about padded layouts.

* per file (`extract`): one `ast` traversal into plain facts (`facts`), built on
  the flow of values through locals (`flow`), the padding idioms (`idioms`),
  where values go (`sinks`), alignment units in one spelling (`units`), the
  names the settings give meaning to (`vocabulary`) and imports (`imports`);
* per project (`project`): names resolved, calls bound to their ``def`` s, CP
  helpers read from their signatures, owners, the call graph;
* for the rules (`queries`): the questions each rule asks about one file.

The tool around it (discovery, cache, runner, output, the rule base) is
`layoutcheck.lint`. Nothing here imports libcst.
"""
