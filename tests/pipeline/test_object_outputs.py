"""Objects returned by the program: refused by name unless their type is a pytree node, whose tensors are then
outputs and the object is rebuilt around them (a Hugging Face model's cache, as torch.export takes it)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.utils._pytree as pytree

import subclassaot
from subclassaot.errors import UnsupportedError
from subclassaot.tools.parity import Call
from tests.oracle import assert_matches_eager


class Unregistered:
    def __init__(self, value: torch.Tensor) -> None:
        self.value = value


class Registered:
    def __init__(self, value: torch.Tensor, scale: float) -> None:
        self.value = value
        self.scale = scale


pytree.register_pytree_node(
    Registered,
    lambda r: ([r.value], r.scale),
    lambda values, scale: Registered(next(iter(values)), scale),
    flatten_with_keys_fn=lambda r: ([(pytree.GetAttrKey("value"), r.value)], r.scale),
)


def test_an_object_output_is_refused_with_the_fix() -> None:
    with pytest.raises(UnsupportedError, match=r"out: the program returns a Unregistered.*register_pytree_node"):
        subclassaot.compile(lambda x: Unregistered(x * 2), backend="eager")(torch.randn(3))


def test_a_pytree_registered_object_output_is_rebuilt() -> None:
    compiled = subclassaot.compile(lambda x: Registered(x.sin(), 2.0), backend="eager")
    x = torch.randn(3)
    out: object = compiled(x)
    assert isinstance(out, Registered)
    assert out.scale == 2.0
    torch.testing.assert_close(out.value, x.sin())


transformers = pytest.importorskip("transformers")


def test_gpt2_returning_its_cache_matches_eager_once_the_cache_is_a_pytree_node() -> None:
    from transformers.integrations.executorch import register_dynamic_cache_export_support

    register_dynamic_cache_export_support()  # type: ignore[no-untyped-call]  # transformers ships it untyped
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=16)
    model = transformers.GPT2LMHeadModel(config).eval()
    assert_matches_eager(copy.deepcopy(model), lambda: Call(args=(torch.randint(0, 50, (2, 8)),), kwargs={}))


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_returned_torch_size_stays_a_torch_size(dynamic: bool) -> None:
    # pytree rebuilds a torch.Size as a tuple: an output rebuilt through tree_map came back a tuple (the oracle
    # compares the output's pytree structure, Size against tuple), with a captured tensor returned beside it or not.
    captured = torch.randn(2)

    def sizes(x: torch.Tensor) -> object:
        return x.shape[0], None, x + 1, x.shape, {"s": (x * 2).size()}

    def sizes_and_captured(x: torch.Tensor) -> object:
        return x.shape, captured, x.sum(0).shape

    for f in (sizes, sizes_and_captured):
        assert_matches_eager(f, lambda: (torch.randn(3, 4),), compile_kwargs={"dynamic": dynamic}, calls=3)
