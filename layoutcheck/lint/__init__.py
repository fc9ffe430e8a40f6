"""The linter's plumbing: discovery, the cache, the runner and engine, suppressions, output, the
rule base classes and the docs. The analysis the rules query is `layoutcheck.model`."""
