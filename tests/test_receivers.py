"""A method's receiver is its first parameter, whatever it is called (issue 28: a name is not a meaning).

Python binds the receiver by place: in a ``def`` directly in a class body the
first positional parameter is the instance (the class for a ``@classmethod``),
and a ``@staticmethod`` has none. The facts record it per function
(`Function.receiver`); binding a call's arguments, resolving
``<receiver>.method(...)`` and judging what is stored through the receiver read
it from there, never from the spelling ``self`` / ``cls``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from linttree import lint_files

from layoutcheck.lint.engine import ProjectFile, analyse_project, lint_source, module_name_of
from layoutcheck.lint.registry import all_rules, rule_by_name
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.extract import extract


def _project(files: dict[str, str]):
    entries = [ProjectFile(name, name, module_name_of(name), textwrap.dedent(text).lstrip("\n"), checked=True,
                           rules=tuple(all_rules()), is_package=False)
               for name, text in files.items()]
    _, project = analyse_project(entries, LintSettings(), all_rules=list(all_rules()))
    return project


def test_the_facts_name_each_methods_receiver_by_place() -> None:
    source = textwrap.dedent('''
        import builtins


        def free(self, x):
            return x


        class Packer:
            def pack(this, samples):
                def inner(self_like):
                    return self_like
                return inner(samples)

            @classmethod
            def build(klass, size):
                return klass()

            @staticmethod
            def width(total, unit):
                return total // unit

            @builtins.staticmethod
            def height(rows):
                return rows

            if True:
                def guarded(me, x):
                    return x
    ''')
    facts = extract(source, LintSettings())
    receivers = {f.qualname: f.receiver for f in facts.functions[1:]}
    assert receivers == {
        "free": None,  # a `self` outside a class is a parameter like any other
        "Packer.pack": "this",
        "Packer.pack.inner": None,
        "Packer.build": "klass",
        "Packer.width": None,
        "Packer.height": None,
        "Packer.guarded": "me",  # an `if` arm of a class body defines methods too
    }


_STATIC = {"ops.py": '''
    class Ops:
        @staticmethod
        def trim(cls, length):
            return cls.tokens[:length]

        def run(self, batch, n):
            return self.trim(batch, n)

        def run_by_class(self, batch, n):
            return Ops.trim(batch, n)
'''}


def test_a_staticmethod_called_through_the_instance_binds_its_first_parameter() -> None:
    """``self.trim(batch, n)`` and ``Ops.trim(batch, n)`` fill ``trim(cls, length)`` from its first parameter:
    a staticmethod takes no receiver, whatever its first parameter is called (read by the name ``cls``, it
    was ``length`` <- ``batch``, and ``cls`` nothing)."""
    project = _project(_STATIC)
    refs = {f.qualname: (0, j) for j, f in enumerate(project.files[0].facts.functions)}
    for caller in ("Ops.run", "Ops.run_by_class"):
        _, target, bound = next(iter(project.bound_calls(refs[caller])))
        assert target == refs["Ops.trim"], caller
        assert {name: arg.params for name, arg in bound.items()} == {"cls": ("batch",), "length": ("n",)}, caller


def test_a_receiver_by_another_name_resolves_and_binds_as_self_does() -> None:
    files = {"ops.py": '''
        class Ops:
            def trim(this, tokens, length):
                return tokens[:length]

            def run(this, batch, n):
                return this.trim(batch, n)
    '''}
    project = _project(files)
    refs = {f.qualname: (0, j) for j, f in enumerate(project.files[0].facts.functions)}
    _, target, bound = next(iter(project.bound_calls(refs["Ops.run"])))
    assert target == refs["Ops.trim"]
    assert {name: arg.params for name, arg in bound.items()} == {"tokens": ("batch",), "length": ("n",)}


_CLASS = '''
import torch


class Chunks:
    def offsets(RECV, total, response, rank, size):
        prompt = total - response
        step = (total + 2 * size - 1) // (2 * size)
        head = (rank * step, (rank + 1) * step)
        tail = ((2 * size - rank - 1) * step, (2 * size - rank) * step)
        logits_0 = (max(head[0], prompt - 1), min(head[1], total - 1))
        logits_1 = (max(tail[0], prompt - 1), min(tail[1], total - 1))
        if logits_0[0] < logits_0[1]:
            token_0 = (logits_0[0] + 1, logits_0[1] + 1)
        else:
            token_0 = (0, 0)
        if logits_1[0] < logits_1[1]:
            token_1 = (logits_1[0] + 1, logits_1[1] + 1)
        else:
            token_1 = (0, 0)
        return step, (head, tail), (logits_0, logits_1), (token_0, token_1)

    def local_masks(RECV, loss_masks, totals, responses, rank, size):
        chunks = []
        for i in range(len(loss_masks)):
            full = loss_masks[i]
            total, response, prompt = totals[i], responses[i], totals[i] - responses[i]
            _, _, _, offs = RECV.offsets(total, response, rank, size)
            s0, e0 = offs[0][0] - prompt, offs[1][1] - prompt
            s1, e1 = offs[1][0] - prompt, offs[1][1] - prompt
            chunks.append(torch.cat([full[s0:e0], full[s1:e1]]))
        return torch.cat(chunks)
'''


def test_a_receiver_named_this_reaches_the_classes_helper_as_self_does(tmp_path: Path) -> None:
    """The window built from the offsets ``<receiver>.offsets(...)`` returns, zero on one path, is flagged where
    the receiver is ``self`` and, the same finding on the same line, where it is ``this`` (a name too plain
    to find by itself in the project: only the receiver's class reaches the helper)."""
    def findings(receiver: str) -> list[tuple[int, str]]:
        found = lint_files(tmp_path / receiver, {"chunks.py": _CLASS.replace("RECV", receiver)})
        return sorted((f.line, f.rule) for f in found)

    window = next(i for i, line in enumerate(_CLASS.splitlines(), 1) if "full[s0:e0]" in line)
    as_self = findings("self")
    assert (window, "positions-in-another-space") in as_self, as_self
    assert findings("this") == as_self


_BY_CLASS = {"ops.py": '''
    class Ops:
        def trim(self, tokens, length):
            return tokens[:length]

        @classmethod
        def build(klass, size, unit):
            return klass()

        @staticmethod
        def width(total, unit):
            return total // unit

        def run(self, batch, n):
            return Ops.trim(self, batch, n)

        def cut_tokens(self, tokens, length):
            return tokens[:length]

        def run_on_instance(self, other, batch, n):
            return other.cut_tokens(batch, n)

        def make(self, size, unit):
            return Ops.build(size, unit)

        def wide(self, total, unit):
            return Ops.width(total, unit)

        @classmethod
        def run_in_class(kls, obj, batch, n):
            return kls.trim(obj, batch, n)


    class Sub(Ops):
        def run_sub(self, batch, n):
            return super().cut_tokens(batch, n)
''', "use.py": '''
    from ops import Ops
    import ops


    def imported(obj, batch, n):
        return Ops.trim(obj, batch, n)


    def through_module(obj, batch, n):
        return ops.Ops.trim(obj, batch, n)
'''}


def test_a_method_called_through_its_class_is_passed_its_receiver_by_hand() -> None:
    """``Ops.trim(obj, batch, n)`` binds ``obj`` to the receiver parameter and ``batch`` to ``tokens``, in the
    class's module and where the class is imported (read as ``obj.trim(...)``, every argument moved one place:
    ``tokens`` <- ``obj``). A ``@classmethod`` through its class binds its class, a ``@staticmethod`` nothing,
    and ``other.cut_tokens(...)`` / ``super().cut_tokens(...)`` fill the receiver themselves."""
    project = _project(_BY_CLASS)
    refs = {(project.files[i].display, f.qualname): (i, j) for i, file in enumerate(project.files)
            for j, f in enumerate(file.facts.functions)}

    def bound(file: str, caller: str) -> dict[str, tuple[str, ...]]:
        _, _, found = next(iter(project.bound_calls(refs[(file, caller)])))
        return {name: arg.params for name, arg in found.items()}

    by_hand = {"self": ("obj",), "tokens": ("batch",), "length": ("n",)}
    assert bound("ops.py", "Ops.run") == {"self": ("self",), "tokens": ("batch",), "length": ("n",)}
    assert bound("use.py", "imported") == by_hand
    assert bound("use.py", "through_module") == by_hand
    assert bound("ops.py", "Ops.run_in_class") == by_hand  # a classmethod's receiver holds the class
    assert bound("ops.py", "Ops.run_on_instance") == {"tokens": ("batch",), "length": ("n",)}
    assert bound("ops.py", "Sub.run_sub") == {"tokens": ("batch",), "length": ("n",)}
    assert bound("ops.py", "Ops.make") == {"size": ("size",), "unit": ("unit",)}
    assert bound("ops.py", "Ops.wide") == {"total": ("total",), "unit": ("unit",)}


def test_the_module_readers_bind_a_call_through_the_class_as_python_does() -> None:
    """`syntax.call_arguments` (the module-wide readers' binding) passes the receiver by hand through the
    class (``Outer.Inner.m(obj, x)`` included), and skips it for an instance's call, ``super()``'s and a
    ``@classmethod``'s through its class."""
    import ast

    from layoutcheck.model.syntax import call_arguments, receivers

    tree = ast.parse(textwrap.dedent('''
        class Outer:
            class Inner:
                def m(self, x, y):
                    return x

                @classmethod
                def c(kls, x, y):
                    return x

        Outer.Inner.m(obj, a, b)
        thing.m(a, b)
        super().m(a, b)
        Outer.Inner.c(a, b)
    '''))
    methods = receivers(tree)
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    calls = [n.value for n in tree.body[1:]]
    given = [{k: ast.unparse(v) for k, v in call_arguments(defs[c.func.attr], c, methods).items()} for c in calls]
    assert given == [
        {"self": "obj", "x": "a", "y": "b"},
        {"x": "a", "y": "b"},
        {"x": "a", "y": "b"},
        {"x": "a", "y": "b"},
    ]


def test_a_patch_through_a_parameter_is_read_whatever_the_parameter_is_called() -> None:
    """``self.forward = f`` patches the instance a parameter holds where ``self`` is a parameter like any
    other (a module-level ``def``; a closure in a method that takes its own ``self``), and sets the method's
    own attribute where it is the method's receiver (``this`` alike): the cost gate before the walk judges a
    line by the ``def`` it sits in, by place, as the walk does, never by the spelling ``self.``."""
    source = textwrap.dedent('''
        def new_forward(module, x):
            return x


        def child_forward(module, x):
            return x


        def own_forward(module, x):
            return x


        def patch(self):
            self.forward = new_forward


        class Model:
            def setup(self):
                self.forward = own_forward

                def patch_child(self):
                    self.forward = child_forward
                return patch_child

            def setup_too(this):
                this.forward = own_forward
    ''')
    facts = extract(source, LintSettings())
    assert sorted((cls, attr, function) for cls, attr, function, _, _ in facts.assigned_onto) == [
        ("", "forward", "child_forward"), ("", "forward", "new_forward")]


def test_a_patch_module_is_read_whatever_its_class_is_called() -> None:
    """The text gate before the walk that finds functions assigned onto classes lets every ``a.b.c = f``
    through, whatever ``a`` is spelt: a module imported as ``cls`` (or ``self``) is patched like any other, and
    only the walk, by place, leaves out a target on a method's receiver or a parameter (it was a text test
    on ``self.`` / ``cls.``)."""
    import ast

    from layoutcheck.model.calls import may_assign_methods, methods_assigned

    source = textwrap.dedent('''
        from pkg import layers as cls


        def fast_forward(module, x):
            return x


        cls.Block.forward = fast_forward


        class Model:
            def setup(self):
                self.inner.forward = fast_forward
    ''')
    assert may_assign_methods(source)
    assert methods_assigned(ast.parse(source), source) == (("cls.Block.forward", "fast_forward"),)



_CP_METHODS = '''
import backend


class CpUtils:
    def offsets_with_cp(self, total_length, response_length, qkv_format="thd", max_seq_len=None, cp_size=2):
        length = total_length if qkv_format == "thd" else max_seq_len
        return (length + 2 * cp_size - 1) // (2 * cp_size)

    def slice_with_cp(self, tokens, pad_value, qkv_format="thd", max_seq_len=None):
        if qkv_format == "bshd":
            assert max_seq_len is not None
        return tokens

    def offsets_ext(self, total_length, response_length, qkv_format="thd", max_seq_len=None):
        return backend.offsets(total_length, response_length, qkv_format, max_seq_len)
'''
"""Two layout helpers found by use, and one (``offsets_ext``) whose layout only `cp-helpers` names."""


@pytest.mark.parametrize(("instance", "by_class", "missing"), [
    ('utils.offsets_with_cp(t, r, "bshd")', 'CpUtils.offsets_with_cp(utils, t, r, "bshd")', "`max_seq_len`"),
    ("utils.offsets_with_cp(t, r)", "CpUtils.offsets_with_cp(utils, t, r)", "`qkv_format` and `max_seq_len`"),
    ('utils.offsets_with_cp(t, r, "bshd", p)', 'CpUtils.offsets_with_cp(utils, t, r, "bshd", p)', None),
    ("utils.slice_with_cp(t, 0, layout, p)", "CpUtils.slice_with_cp(utils, t, 0, layout, p)", None),
    ('utils.slice_with_cp(t, 0, "bshd")', 'CpUtils.slice_with_cp(utils, t, 0, "bshd")', "`max_seq_len`"),
    ("utils.offsets_ext(t, r)", "CpUtils.offsets_ext(utils, t, r)", "`qkv_format`"),
    ("utils.offsets_ext(t, r, layout, p)", "CpUtils.offsets_ext(utils, t, r, layout, p)", None),
], ids=["bshd without P", "no layout", "all passed", "all passed, the other helper", "the other helper without P",
        "configured, no layout", "configured, all passed"])
def test_a_helper_method_called_through_its_class_is_judged_as_through_the_instance(
        instance: str, by_class: str, missing: str | None) -> None:
    """A layout helper that is a method (found by use, or named in ``cp-helpers``) judged at
    ``utils.offsets_with_cp(t, r, "bshd")`` and at ``CpUtils.offsets_with_cp(utils, t, r, "bshd")``: the
    second passes the receiver by hand, so each layout argument sits one place further
    (`queries._by_hand`), and both calls get the same finding, or none."""
    rule = rule_by_name("cp-helper-without-geometry")
    settings = LintSettings(cp_helpers={"offsets_ext": {"qkv_format": 2, "max_seq_len": 3}})
    found = {}
    for call in (instance, by_class):
        code = f"from cp import CpUtils\n\n\ndef offsets(utils, t, r, p, layout):\n    return {call}\n"
        found[call] = [(f.line, f.message.split(" is called ")[-1].split(",")[0])
                       for f in lint_source(code, "use.py", [rule], settings, files={"cp.py": _CP_METHODS}).findings]
    assert found[instance] == ([(5, f"without {missing}")] if missing else []), found
    assert found[by_class] == found[instance]
