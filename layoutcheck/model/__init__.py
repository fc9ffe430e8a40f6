"""The linter's analysis: what the checked code does with padded layouts, whatever its names.

* per file (`extract`): one `ast` traversal into plain facts (`facts`), built on
  what each function does with each name and field (`uses`), the flow of values
  through locals with the space each is in (`flow`: true length, padded length,
  packed stream, cumulative lengths, next-token shifts in `shifts`), the padding
  idioms (`idioms`), where values go (`sinks`), alignment units in one spelling
  (`units`), the section-10 mismatches one function shows (`clashes`), where
  each padded row's real tokens are placed and read (`padsides`), bucket lists,
  unit literals and units picked by a branch (`literals`), the configured names as hints
  (`vocabulary`) and imports (`imports`);
* per project (`project`): names resolved, calls bound to their ``def`` s, what
  fields and parameters hold (`spaces`), the side each field is padded on
  (`sides`), layout helpers found by what their ``def`` s do (`helpers`),
  owners and second owners (`owners`), the call graph;
* for the rules (`queries`): the questions each rule asks about one file;
* what it reads from the configuration (`settings`: `LintSettings`).

The tool around it (discovery, cache, runner, output, the rule base) is
`layoutcheck.lint`, which imports this package and never the other way round
(tests/test_import_graph.py holds it). Nothing here imports libcst.
"""
