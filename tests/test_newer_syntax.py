"""A syntax error that a newer Python's grammar accepts says which Python the file needs; no other does."""

from __future__ import annotations

import sys

import pytest

from layoutcheck.lint.engine import lint_source
from layoutcheck.lint.findings import INVALID_INPUT
from layoutcheck.lint.newsyntax import newer_python
from layoutcheck.lint.settings import LintSettings

NEWER = [
    ('x = {"a": 1}\ny = f"{x["a"]}"\n', 2, (3, 12)),  # PEP 701: the string's own quote in a field
    ("y = f'{x['a']}'\n", 1, (3, 12)),
    ("y = f\"{'\\n'.join(a)}\"\n", 1, (3, 12)),  # a backslash in a field
    ('y = f"{a # why\n}"\n', 1, (3, 12)),  # a comment in a field
    ('y = f"{\n  x\n}"\n', 1, (3, 12)),  # a field over lines
    ('z = f"{x:{"a"}}"\n', 1, (3, 12)),  # in a format spec
    ("type Lengths = list[int]\n", 1, (3, 12)),  # PEP 695
    ("type Pair[T] = tuple[T, T]\n", 1, (3, 12)),
    ("def first[T](xs: list[T]) -> T:\n    return xs[0]\n", 1, (3, 12)),
    ("class Box[T](Base):\n    pass\n", 1, (3, 12)),
    ("async def f[T](): pass\n", 1, (3, 12)),
    ("def f[T=int](): pass\n", 1, (3, 13)),  # PEP 696
    ("try:\n    pass\nexcept ValueError, TypeError:\n    pass\n", 3, (3, 14)),  # PEP 758
    ('x = t"hi {a}"\n', 1, (3, 14)),  # PEP 750
]

BROKEN_EVERYWHERE = [
    ('y = f"{x"\n', 1),
    ('y = f"{x[}"\n', 1),
    ('y = f"{}"\n', 1),
    ('y = f"{x!z}"\n', 1),
    ('y = f"{x["a"}"\n', 1),  # the nested quote is 3.12's, but the brackets do not match in any Python
    ("type = 3\ntype X\n", 2),
    ("def f[(): pass\n", 1),
    ("def f(:\n    pass\n", 1),
    ("x = (1,\n", 1),
    ("class A[T]\n    pass\n", 1),
]


@pytest.mark.parametrize(("source", "line", "version"), NEWER)
def test_a_construct_of_a_newer_grammar_names_the_release_that_brings_it(source, line, version):
    assert newer_python(source, line, running=(3, 11)) == version
    assert newer_python(source, line, running=version) is None  # that release runs: no hint


@pytest.mark.parametrize(("source", "line"), BROKEN_EVERYWHERE)
def test_code_no_python_accepts_gets_no_hint(source, line):
    assert newer_python(source, line, running=(3, 11)) is None


def lint_error(source: str):
    result = lint_source(source, "m.py", [], LintSettings())
    [error] = result.errors
    assert error.kind == INVALID_INPUT and error.message.startswith("syntax error: ")
    return error


RUNNING = f"{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.mark.parametrize(("source", "line", "version"), [c for c in NEWER if c[2] > sys.version_info[:2]])
def test_the_syntax_error_finding_says_the_file_may_need_a_newer_python(source, line, version):
    error = lint_error(source)
    assert error.line == line
    wanted = f"{version[0]}.{version[1]}"
    assert f"(Python {wanted} accepts this: the file may need a newer Python than the {RUNNING} running " \
           f"layoutcheck; run layoutcheck with Python {wanted} or later)" in error.message


def test_the_issue_s_f_string_under_3_11_reads_as_it_should():
    if sys.version_info >= (3, 12):
        pytest.skip("Python 3.12 accepts the f-string")
    error = lint_error('x = {"a": 1}\ny = f"{x["a"]}"\n')
    assert error.message.startswith("syntax error: f-string: unmatched '[' (Python 3.12 accepts this")


@pytest.mark.parametrize(("source", "line"), BROKEN_EVERYWHERE)
def test_an_ordinary_syntax_error_reads_as_before(source, line):
    assert "accepts this" not in lint_error(source).message
