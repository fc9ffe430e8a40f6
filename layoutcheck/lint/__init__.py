"""The libcst linter: rule base class, engine, discovery, output."""
