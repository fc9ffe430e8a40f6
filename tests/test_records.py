"""`layoutcheck.records.dataclass` makes the class `dataclasses.dataclass` makes: the same repr
text, equality, hashes, frozen instances and dataclass functions, for each kind of class the
package declares."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import field

import pytest

from layoutcheck.records import dataclass as shared


def _pair(decorate, **options):
    """The same class body under the standard decorator and the shared one."""
    made = []
    for deco in (dataclasses.dataclass, decorate):
        class Point:
            x: int
            y: tuple[int, ...] = ()
            note: str = field(default="", compare=False, repr=False)
            items: tuple[int, ...] = field(default_factory=tuple)

        made.append(deco(**options)(Point))
    return made


@pytest.mark.parametrize("frozen", [False, True])
def test_same_repr_equality_and_hash(frozen):
    std, ours = _pair(shared, frozen=frozen)
    for args in [(1,), (1, (2, 3)), (1, (2, 3), "n", (4,))]:
        a, b = std(*args), ours(*args)
        assert repr(a) == repr(b)
        assert ours(*args) == b and not (b != ours(*args))
        assert (b == ours(9)) is False
        assert b.__eq__(a) is NotImplemented  # another class: as the standard method says
        assert ours(1, (2,), "one") == ours(1, (2,), "other")  # a field with compare=False
    if frozen:
        assert hash(ours(1, (2,))) == hash(std(1, (2,)))
        with pytest.raises(dataclasses.FrozenInstanceError):
            ours(1).x = 2  # type: ignore[misc]
    else:
        assert std.__hash__ is None and ours.__hash__ is None
        with pytest.raises(TypeError):
            hash(ours(1))
    assert dataclasses.asdict(ours(1, (2,))) == dataclasses.asdict(std(1, (2,)))
    assert dataclasses.replace(ours(1), x=5) == ours(5)


def test_one_field_and_no_field_compare_as_tuples():
    nan = float("nan")

    @shared(frozen=True)
    class One:
        value: float

    @dataclasses.dataclass(frozen=True)
    class StdOne:
        value: float

    # The fields compared as a tuple: one NaN object equals itself there, as in the standard method.
    assert StdOne(nan) == StdOne(nan)
    assert One(nan) == One(nan)
    assert hash(One(1.5)) == hash(StdOne(1.5)) == hash((1.5,))

    @shared(frozen=True)
    class Empty:
        pass

    assert Empty() == Empty() and hash(Empty()) == hash(())
    assert repr(Empty()) == "test_one_field_and_no_field_compare_as_tuples.<locals>.Empty()"


def test_recursive_repr_and_explicit_methods_kept():
    @shared
    class Node:
        child: object = None

    node = Node()
    node.child = node
    assert repr(node) == "test_recursive_repr_and_explicit_methods_kept.<locals>.Node(child=...)"

    @shared(frozen=True)
    class Keyed:
        key: str

        def __hash__(self) -> int:
            return 7

        def __repr__(self) -> str:
            return "mine"

    assert hash(Keyed("a")) == 7 and repr(Keyed("a")) == "mine" and Keyed("a") == Keyed("a")


def test_the_facts_compare_and_print_as_before():
    from layoutcheck.model.facts import FileFacts, Function

    facts = FileFacts(functions=[Function("<module>", (1, 0, 1, 0))])
    assert facts == FileFacts(functions=[Function("<module>", (1, 0, 1, 0))])
    assert facts != FileFacts()
    assert pickle.loads(pickle.dumps(facts)) == facts  # the workers send facts pickled
    assert repr(facts).startswith("FileFacts(functions=[Function(qualname='<module>', span=(1, 0, 1, 0), params=()")


def test_same_order_as_the_standard_decorator():
    made = []
    for deco in (dataclasses.dataclass, shared):
        class Row:
            path: str
            line: int
            note: str = field(default="", compare=False)

        made.append(deco(frozen=True, order=True)(Row))
    std, ours = made
    rows = [("b", 2, "x"), ("a", 9, "y"), ("b", 1, "z"), ("a", 9, "a")]
    assert [tuple(vars(r).values()) for r in sorted(ours(*r) for r in rows)] == \
        [tuple(vars(r).values()) for r in sorted(std(*r) for r in rows)]
    for a in rows:
        for b in rows:
            assert [ours(*a) < ours(*b), ours(*a) <= ours(*b), ours(*a) > ours(*b), ours(*a) >= ours(*b)] == \
                [std(*a) < std(*b), std(*a) <= std(*b), std(*a) > std(*b), std(*a) >= std(*b)]
    assert ours("a", 1).__lt__(std("a", 1)) is NotImplemented
    with pytest.raises(TypeError):
        sorted([ours("a", 1), std("a", 1)])
