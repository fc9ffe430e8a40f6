"""Tensor tags: a weak side table keyed by identity that never keeps a tensor alive."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref

import pytest
import torch

from layoutcheck import LayoutSpecError
from layoutcheck.runtime.tracing.tags import Tag, clear_tags, geometry_of, tag, tagged_count, untag

SAMPLE = Tag(field="tokens", padded=384, sample=3, total=300, response=200, unit=128)


@pytest.fixture(autouse=True)
def _empty_table():
    clear_tags()
    yield
    clear_tags()


def test_tag_and_read_back():
    t = torch.zeros(300)
    assert geometry_of(t) is None
    assert tag(t, SAMPLE) is t
    assert geometry_of(t) == SAMPLE
    other = SAMPLE.evolve(sample=4)
    tag(t, other)  # re-tag replaces
    assert geometry_of(t) is other and tagged_count() == 1
    untag(t)
    assert geometry_of(t) is None and tagged_count() == 0


def test_identity_not_equality():
    # Two equal tensors are different keys (a WeakKeyDictionary would compare them with __eq__).
    a, b = torch.zeros(3), torch.zeros(3)
    tag(a, SAMPLE)
    assert geometry_of(b) is None
    assert geometry_of(a.view(3)) is None  # a view is another tensor object: the tracer tags it


def test_a_tag_holds_only_ints_and_strings():
    def plain(value):
        if isinstance(value, tuple):
            return all(plain(v) for v in value)
        if isinstance(value, Tag):
            return all(plain(getattr(value, f)) for f in value._fields)
        return value is None or type(value) in (int, bool, str)

    assert plain(SAMPLE.evolve(samples=(1, 2), members=(SAMPLE,), window=(0, 96), segments=(300,)))
    with pytest.raises(Exception):  # noqa: B017 - frozen
        SAMPLE.padded = 1  # type: ignore[misc]


def test_the_table_does_not_keep_a_tensor_alive():
    t = torch.zeros(1000)
    ref = weakref.ref(t)
    tag(t, SAMPLE)
    del t
    gc.collect()
    assert ref() is None and tagged_count() == 0


def test_a_reused_address_does_not_inherit_a_tag():
    seen = set()
    for _ in range(200):  # freed tensors' ids are reused at once by new ones
        t = torch.zeros(1)
        seen.add(id(t))
        assert geometry_of(t) is None
        tag(t, SAMPLE)
        del t
    assert tagged_count() == 0 and len(seen) < 200


def test_tag_rejects_a_non_tag():
    with pytest.raises(LayoutSpecError, match="Tag"):
        tag(torch.zeros(1), {"padded": 384})  # type: ignore[arg-type]


_GROWTH = """
import gc, os, sys
import torch
from layoutcheck.runtime.tracing.tags import Tag, tag, tagged_count

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

tags = [Tag(field="tokens", padded=128 * (1 + k), sample=k, total=100) for k in range(7)]

def round_trip():
    tensors = [torch.empty(0) for _ in range(100_000)]
    for i, t in enumerate(tensors):
        tag(t, tags[i % 7])
    assert tagged_count() == 100_000
    del tensors, t
    assert tagged_count() == 0

round_trip()  # warm the allocator
gc.collect()
before = rss()
for _ in range(2):
    round_trip()
gc.collect()
print(rss() - before)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_tag_and_drop_100k_tensors_several_times_without_growth():
    # In a fresh interpreter: in a test worker the allocator's state after hundreds of other tests moves RSS
    # by as much as one leaked round.
    run = subprocess.run([sys.executable, "-c", _GROWTH], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    growth = int(run.stdout.split()[-1])
    # One leaked round is about 15 MiB of table entries (40 MiB with the tensors); allow allocator noise.
    assert growth < 8 * 2**20, f"RSS grew by {growth / 2**20:.1f} MiB over 2 rounds"
