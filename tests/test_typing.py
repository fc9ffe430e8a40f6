"""Padded-tensor annotations checked by typeguard: under @typechecked and under its import hook."""

from __future__ import annotations

import importlib
import sys
import textwrap
from typing import Annotated

import pytest
import torch
import typeguard
from typeguard import TypeCheckError, check_type, install_import_hook, typechecked

from layoutcheck import LayoutSpecError, geometry
from layoutcheck.runtime.tracing.tags import Tag, clear_tags, tag
from layoutcheck.typing import Padded, checker_lookup, install

Batch = Annotated[torch.Tensor, Padded("B", "P")]
Sample = Annotated[torch.Tensor, Padded("P")]


@pytest.fixture(autouse=True)
def _no_tags():
    clear_tags()
    yield
    clear_tags()


@typechecked
def first_row(tokens: Batch, masks: Batch) -> Sample:
    return tokens[0]


@typechecked
def shifted(tokens: Sample) -> Sample:
    return tokens[1:]  # one position short: the return value breaks P


def test_the_plugin_is_loaded_from_its_entry_point():
    assert checker_lookup in typeguard.checker_lookup_functions
    install()  # idempotent
    assert typeguard.checker_lookup_functions.count(checker_lookup) == 1
    assert checker_lookup(torch.Tensor, (), ()) is None and checker_lookup(torch.Tensor, (), ("x",)) is None


def test_a_length_is_bound_once_per_call_across_arguments_and_return():
    assert first_row(torch.zeros(2, 384), torch.zeros(2, 384)).shape == (384,)
    assert first_row(torch.zeros(3, 256), torch.zeros(3, 256)).shape == (256,)  # a new call, new bindings
    with pytest.raises(TypeCheckError) as info:
        first_row(torch.zeros(2, 384), torch.zeros(2, 256))
    assert str(info.value) == (
        'argument "masks" (torch.Tensor) has P=256 (size 256 in dimension 1), but P=384 was bound by argument "tokens"')
    with pytest.raises(TypeCheckError, match=r'the return value .* has P=383 .* P=384 was bound by argument "tokens"'):
        shifted(torch.zeros(384))


def test_nested_checked_calls_keep_their_own_bindings():
    @typechecked
    def outer(tokens: Sample) -> Sample:
        shifted_ok = inner(torch.zeros(tokens.shape[0] // 2))  # binds P = 192 in its own call
        assert shifted_ok.shape[0] * 2 == tokens.shape[0]
        return tokens

    @typechecked
    def inner(half: Sample) -> Sample:
        return half

    assert outer(torch.zeros(384)).shape == (384,)
    with pytest.raises(TypeCheckError):  # a failed call leaves nothing behind for the next one
        first_row(torch.zeros(2, 384), torch.zeros(2, 128))
    assert first_row(torch.zeros(1, 128), torch.zeros(1, 128)).shape == (128,)


def test_dimension_specs():
    check_type(torch.zeros(3, 4, 5), Annotated[torch.Tensor, Padded("...", 5)])
    check_type(torch.zeros(5), Annotated[torch.Tensor, Padded("...", 5)])
    check_type(torch.zeros(2, 7), Annotated[torch.Tensor, Padded("*", 7)])
    check_type(torch.zeros(299, 4, 2), Annotated[torch.Tensor, Padded("T-1", "layers", "topk")])
    with pytest.raises(TypeCheckError, match="has size 4 in dimension 1, but Padded\\('B', 5\\) says 5"):
        check_type(torch.zeros(2, 4), Annotated[torch.Tensor, Padded("B", 5)])
    with pytest.raises(TypeCheckError, match="has 1 dimensions"):
        check_type(torch.zeros(4), Annotated[torch.Tensor, Padded("B", "P")])
    with pytest.raises(TypeCheckError, match="is not an instance of torch.Tensor"):
        check_type([1, 2], Annotated[torch.Tensor, Padded("P")])
    with pytest.raises(LayoutSpecError, match=r"one name per dimension: Padded\('B', 'P'\)"):
        Padded("B P")
    with pytest.raises(LayoutSpecError, match="may appear once"):
        Padded("...", "P", "...")
    with pytest.raises(LayoutSpecError, match=">= 0"):
        Padded(-1)
    assert Padded("B", "P") is Padded("B", "P") and repr(Padded("B", 4)) == "Padded('B', 4)"


def test_geometry_names_read_the_tensors_tag():
    sample = Tag(field="tokens", padded=384, sample=3, total=300, response=200, cp_size=2)
    unpadded = tag(torch.zeros(300), sample)
    padded = tag(torch.zeros(384), sample)
    local = tag(torch.zeros(192), sample.evolve(cp_rank=1, local=192))
    lp_count = geometry.response_count(300, 200, 2, 1, padded=384)
    log_probs = tag(torch.zeros(lp_count), sample.evolve(field="rollout_log_probs", space="response",
                                                         cp_rank=1, local=lp_count))
    check_type(padded, Sample)
    check_type(unpadded, Annotated[torch.Tensor, Padded("T")])
    check_type(local, Annotated[torch.Tensor, Padded("L")])
    check_type(log_probs, Annotated[torch.Tensor, Padded("R")])
    with pytest.raises(TypeCheckError, match=r"has 300 positions in dimension 0, but P is 384 for sample 3 "
                                             r"`tokens` .*not padded to P yet"):
        check_type(unpadded, Sample)
    with pytest.raises(TypeCheckError, match="but P is 384 .*CP-sliced \\(annotate its local length as L\\)"):
        check_type(local, Sample)
    with pytest.raises(TypeCheckError, match="but L is 192"):
        check_type(padded, Annotated[torch.Tensor, Padded("L")])
    # untagged, the same names are sizes
    check_type(torch.zeros(300), Sample)


def test_a_tag_binds_p_for_the_whole_call():
    @typechecked
    def pad_like(sample: Sample, other: Sample) -> None:
        pass

    a = tag(torch.zeros(384), Tag(field="tokens", padded=384, sample=0))
    with pytest.raises(TypeCheckError, match=r'argument "other" .* P=256 .* bound by argument "sample" \(the tag of'):
        pad_like(a, torch.zeros(256))


HOOKED = '''
from typing import Annotated

import torch

from layoutcheck.typing import Padded

Batch = Annotated[torch.Tensor, Padded("B", "L")]


def stack_samples(samples: list[torch.Tensor], length: int) -> Batch:
    batch: Annotated[torch.Tensor, Padded("B", "L")] = torch.stack(samples)
    return batch[:, :length]


def lay_out(tokens: Annotated[torch.Tensor, Padded("P")], mask: Annotated[torch.Tensor, Padded("P")]) -> int:
    return tokens.shape[0]
'''


def test_under_typeguards_import_hook(tmp_path, monkeypatch):
    (tmp_path / "lc_hooked_data_path.py").write_text(textwrap.dedent(HOOKED))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("lc_hooked_data_path", None)
    try:
        with install_import_hook(["lc_hooked_data_path"]):
            module = importlib.import_module("lc_hooked_data_path")
        assert module.lay_out(torch.zeros(384), torch.zeros(384)) == 384
        with pytest.raises(TypeCheckError, match='argument "mask" .* P=256 .* P=384 was bound by argument "tokens"'):
            module.lay_out(torch.zeros(384), torch.zeros(256))
        assert module.stack_samples([torch.zeros(192)] * 2, 192).shape == (2, 192)
        with pytest.raises(TypeCheckError, match="the return value .* has L=100 .* L=192 was bound by the value "
                                                 "assigned to batch"):
            module.stack_samples([torch.zeros(192)] * 2, 100)
        tagged = tag(torch.zeros(300), Tag(field="tokens", padded=384, sample=1, total=300))
        with pytest.raises(TypeCheckError, match='argument "tokens" .* but P is 384 for sample 1'):
            module.lay_out(tagged, torch.zeros(300))
    finally:
        sys.modules.pop("lc_hooked_data_path", None)


def test_the_docs_annotation_example_runs_and_fails_as_it_says(tmp_path, monkeypatch):
    from pathlib import Path

    section = (Path(__file__).resolve().parents[1] / "docs" / "typing.md").read_text()
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "lc_readme_example.py").write_text(code)  # typeguard instruments from the source file
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("lc_readme_example", None)
    try:
        module = importlib.import_module("lc_readme_example")
        failing = next(line for line in code.splitlines() if line.startswith("# align_mask("))
        message = next(line for line in code.splitlines() if line.startswith("#   argument"))
        with pytest.raises(TypeCheckError) as info:
            eval(failing[2:].split(" raises")[0], vars(module))  # noqa: S307 - our own docs
        assert str(info.value) == message[4:]
    finally:
        sys.modules.pop("lc_readme_example", None)
