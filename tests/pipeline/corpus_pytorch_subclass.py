"""Corpus, PyTorch's own programs again: PairTensor inputs (after test/dynamo/test_subclasses.py's TwoTensor tests
and the `make_inputs_subclasses=True` variants of test_aotdispatch.py), and nn.Modules with buffers.

Input: nothing. Output: `SUBCLASS_CASES` and `MODULE_CASES` for tests/pipeline/test_corpus_pytorch.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from subclasses.pair import PairTensor
from tests.pipeline import corpus_pytorch as plain
from tests.pipeline.corpus import Case

T = torch.Tensor


def pair(*shape: int, rg: bool = False) -> T:
    """A fresh PairTensor; with `rg`, a non-leaf that requires grad."""
    p = PairTensor(torch.randn(shape), torch.randn(shape), requires_grad=rg)
    return p.clone() if rg else p


def pair_leaf(*shape: int) -> T:
    return PairTensor(torch.randn(shape), torch.randn(shape), requires_grad=True)


def both(name: str, fn: Callable[..., object], make: plain.Make, **kwargs: object) -> list[Case]:
    return plain.both(f"pair_{name}", fn, make, **kwargs)  # type: ignore[arg-type]


def _p(*shape: int) -> plain.Make:
    return lambda rg: (pair(*shape, rg=rg),)


def _pair_rows(rg: bool) -> tuple[object, ...]:
    x = pair(4, 2, rg=rg)
    return x[0], x[0]


def _pair_row_and_base(rg: bool) -> tuple[object, ...]:
    x = pair(2, 2, rg=rg)
    return x[0], x


def _pair_and_plain(rg: bool) -> tuple[object, ...]:
    return pair(3, rg=rg), plain.t(3, rg=rg)


def _pair_interleaved(rg: bool) -> tuple[object, ...]:
    x = pair(4, 4, rg=rg)
    return x[:, 0:2], x[:, 2:4]


# ---------------------------------------------------------------------------------------------------------------
# PairTensor programs


def pair_data_mul(x: T) -> object:
    x.data.mul_(2)
    return x * 3


def pair_detached_mutation(x: T) -> object:
    x.detach().mul_(2)
    return x + 1


def pair_no_grad_mutation(x: T) -> object:
    with torch.no_grad():
        x.mul_(2)
    return x + 3


def pair_resize_shrink(x: T) -> object:
    x.resize_(2)
    return x * 2


def pair_copy_from_plain(x: T, y: T) -> object:
    x.copy_(y)
    return x + y


def pair_masked_fill(x: T) -> object:
    x.masked_fill_(x > 0, 0.0)
    return x.sum()


def pair_index_put(x: T) -> object:
    x[torch.tensor([0, 2])] = 1.0
    return x * 1


def pair_dropout(x: T) -> object:
    return F.dropout(x, 0.5)


def pair_construct_inside(x: T, y: T) -> object:
    return PairTensor(x, y) * 2


def pair_inner_read(x: T) -> object:
    assert isinstance(x, PairTensor)
    return x.a + x.b


def pair_sum_outer(x: T) -> object:
    return (x * x).sum()


def clone_then_view(x: T) -> object:
    y = x.clone()
    return y.view(y.shape[1], y.shape[0])


def inner_and_view(x: T) -> object:
    y = x.clone()
    assert isinstance(y, PairTensor)
    return y.a, y.t()


def transposed_view_and_sin(x: T) -> object:
    return (x * 2).t(), x.sin()


INPUT_PROGRAMS = [
    *both("aliases_other_input", plain.add_first_read_both, _pair_rows),
    *both("aliases_other_input_is_base", plain.add_first_read_both, _pair_row_and_base),
    *both("dupe_arg", plain.add_dupes, lambda rg: (x := pair(3, 3, rg=rg), x)),
    *both("false_aliasing_interleaved", plain.both_aliases_mutated, _pair_interleaved),
    *both("view_chain_mutation", plain.view_chain_mutation, _p(4, 2)),
    *both("split_then_diagonal_mutation", plain.split_then_diagonal_mutation, _p(4, 2), train_raises=True),
    *both("functionalization_everything", plain.everything, _p(4, 2), train_raises=True),
    *both("nested_updates", plain.nested_updates, _p(2, 3)),
    *both("copy_broadcast", plain.copy_broadcast, lambda rg: (pair(3, 4, rg=rg), plain.t(4))),
    *both("copy_from_plain", pair_copy_from_plain, lambda rg: (pair(3, rg=rg), plain.t(3))),
    *both("masked_fill", pair_masked_fill, _p(2, 3)),
    *both("index_put", pair_index_put, _p(4)),
    Case(name="pair_data_mul", fn=pair_data_mul, make_inputs=lambda: (pair_leaf(3),)),
    Case(name="pair_detached_mutation", fn=pair_detached_mutation, make_inputs=lambda: (pair_leaf(3),)),
    Case(name="pair_no_grad_mutation", fn=pair_no_grad_mutation, make_inputs=lambda: (pair_leaf(3),)),
    Case(name="pair_resize_shrink", fn=pair_resize_shrink, make_inputs=lambda: (pair(4),)),
    Case(
        name="pair_with_inner_requiring_grad",
        fn=pair_sum_outer,
        make_inputs=lambda: (PairTensor(plain.leaf(3), plain.leaf(3)),),
    ),
    Case(name="pair_leaf_sum", fn=pair_sum_outer, make_inputs=lambda: (pair_leaf(2, 3),)),
]

OUTPUT_PROGRAMS = [
    *both("intermediate_viewed_twice", plain.intermediate_viewed_twice, _p(3, 3), after_call=plain.mul_out(0)),
    *both("intermediates_mixed_views", plain.intermediates_mixed, _p(3, 3)),
    *both("inplace_view_then_detach", plain.inplace_view_then_detach, _p(2, 4)),
    *both("intermediate_inplace_view", plain.intermediate_inplace_view, _p(2, 4)),
    *both("unbind_intermediate_and_view", plain.unbind_intermediate_and_view, _p(3, 3), after_call=plain.mul_out(-1)),
    *both("views_of_views", plain.views_of_views, _p(3, 3), after_call=plain.mul_out(1)),
    *both("split_of_input", plain.split_of_input, _p(5, 2)),
    *both("chunk_and_base", plain.chunk_and_base, _p(4, 2), after_call=plain.mul_out(-1)),
    *both("expand_of_input", plain.expand_of_input, _p(5)),
    *both("detach_output_mutated_after", plain.detach_output, _p(3), after_call=plain.mul_out(0)),
    *both("output_dict_mixed", plain.output_dict_mixed, _pair_and_plain),
    *both("alias_op_output", plain.alias_op_output, _p(2, 3), after_call=plain.mul_out(0)),
    *both("dropout", pair_dropout, _p(4, 4)),
    *both("custom_plus_one_backward", plain.custom_plus_one_backward, lambda rg: (pair_leaf(3) if rg else pair(3),)),
    *both("clone_then_view", clone_then_view, _p(2, 3)),
    *both("view_of_intermediate_mutated_after", plain.plus_one_flat, _p(2, 3), after_call=plain.mul_out(-1)),
    *both("inner_and_view", inner_and_view, _p(2, 3)),
    *both("transposed_view_and_sin", transposed_view_and_sin, _p(2, 3)),
    Case(name="pair_construct_inside", fn=pair_construct_inside, make_inputs=lambda: (plain.t(3), plain.t(3))),
    Case(name="pair_inner_read", fn=pair_inner_read, make_inputs=lambda: (pair(3),)),
]


def pair_resize_grow(x: T) -> object:
    x.resize_(6)
    x.fill_(1.5)
    return x * 2


def pair_bernoulli(x: T) -> object:
    x.bernoulli_(0.5)
    return x + 1


def pair_rand_like(x: T) -> object:
    return x + torch.rand_like(x)


def pair_linear(x: T, w: T) -> object:
    return F.linear(x, w).relu()


def nested_view_mutation(x: T) -> object:
    x[0].mul_(2)
    return x.sum()


def _nested(rg: bool) -> tuple[object, ...]:
    inner = PairTensor(torch.randn(3, 2), torch.randn(3, 2))
    outer = PairTensor(inner, PairTensor(torch.randn(3, 2), torch.randn(3, 2)), requires_grad=rg)
    return (outer.clone() if rg else outer,)


def inner_returned(x: T) -> object:
    assert isinstance(x, PairTensor)
    return x.a


def inner_mutated(x: T) -> object:
    assert isinstance(x, PairTensor)
    x.a.add_(1)
    return x * 2


def inner_view_out(x: T) -> object:
    assert isinstance(x, PairTensor)
    return x.b.t()


def build_then_mutate(x: T, y: T) -> object:
    p = PairTensor(x, y)
    p.add_(1)
    return p


def build_view_of_inputs(x: T, y: T) -> object:
    return PairTensor(x, y).view(-1)


MORE_PROGRAMS = [
    *both("inner_returned", inner_returned, _p(2, 3)),
    *both("inner_mutated", inner_mutated, _p(2, 3)),
    *both("inner_view_out", inner_view_out, _p(2, 3)),
    *both("build_then_mutate", build_then_mutate, lambda rg: (plain.t(3, rg=rg), plain.t(3, rg=rg))),
    *both("build_view_of_inputs", build_view_of_inputs, lambda rg: (plain.t(2, 2, rg=rg), plain.t(2, 2, rg=rg))),
    *both("unfold_output", plain.unfold_output, _p(4)),
    *both("view_clone_view_inplace", plain.view_clone_view_inplace, _p(4)),
    *both("select_copy_into", plain.select_copy_into, lambda rg: (pair(3, 2, rg=rg), plain.t(3))),
    *both("mutated_intermediate_outputs", plain.mutated_intermediate_outputs, _p(2, 2)),
    *both("expand_after_mutation", plain.expand_after_mutation, _p(3)),
    *both("same_input_thrice", plain.same_input_thrice, _p(2, 2)),
    *both("nested_alias_structure", plain.nested_alias_structure, _p(2, 3)),
    *both("no_grad_view_then_mutate", plain.no_grad_view_then_mutate, _p(4)),
    *both("grad_disabled_inside", plain.grad_disabled_inside, _p(3)),
    *both("inference_mode_inside", plain.inference_mode_inside, _p(3)),
    *both("detach_then_mutate_detached", plain.detach_then_mutate_detached, _p(3)),
    *both("custom_mark_dirty", plain.custom_mark_dirty, _p(3)),
    *both("output_dict_same", plain.output_dict_same, _p(3, 3)),
    *both("self_add", plain.self_add, _p(3)),
    *both("index_setitem_add", plain.index_setitem_add, lambda rg: (pair(5, rg=rg), torch.tensor([0, 3]))),
    *both("nested_view_mutation", nested_view_mutation, _nested),
    *both("linear", pair_linear, lambda rg: (pair(4, 3, rg=rg), plain.leaf(2, 3) if rg else plain.t(2, 3))),
    Case(name="pair_resize_grow", fn=pair_resize_grow, make_inputs=lambda: (pair(2),)),
    Case(name="pair_bernoulli", fn=pair_bernoulli, make_inputs=lambda: (pair(6),)),
    Case(name="pair_rand_like", fn=pair_rand_like, make_inputs=lambda: (pair(3),)),
]

SUBCLASS_CASES = INPUT_PROGRAMS + OUTPUT_PROGRAMS + MORE_PROGRAMS


# ---------------------------------------------------------------------------------------------------------------
# Modules with buffers


class BufferInGraph(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.zeros(1))
        self.w1 = torch.nn.Parameter(torch.randn(1))
        self.w2 = torch.nn.Parameter(torch.randn(1))

    def forward(self, x: T) -> T:
        buf = self.get_buffer("buf")
        buf.add_(1)
        return (self.w1 * x * self.w2).sum() + buf.sum()


class BufferOtherShape(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.ones(4, 4))
        self.w = torch.nn.Parameter(torch.randn(4, 2))

    def forward(self, x: T) -> T:
        buf = self.get_buffer("buf")
        buf.add_(1)
        return (self.w @ x).sum() + buf.sum()


class RunningAverage(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("avg", torch.zeros(3))
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x: T) -> T:
        y: T = self.lin(x)
        avg = self.get_buffer("avg")
        with torch.no_grad():
            avg.mul_(0.9).add_(y.mean(0) * 0.1)
        return y - avg


class ReturnsBufferView(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.arange(6.0))
        self.w = torch.nn.Parameter(torch.randn(2, 3))

    def forward(self, x: T) -> tuple[T, T]:
        buf = self.get_buffer("buf")
        buf.add_(x.sum().detach())
        return buf.view(2, 3), self.w.t()


class ParamDataMutation(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self, x: T) -> T:
        self.w.data.add_(1)
        return x * self.w


def _seeded(make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    torch.manual_seed(0)
    return make()


def _bn2d() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Conv2d(2, 4, 1), torch.nn.BatchNorm2d(4))


class ReassignedBuffer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.zeros(3))

    def forward(self, x: T) -> T:
        self.buf = self.get_buffer("buf") + x.detach()
        return x * self.get_buffer("buf")


class TiedWeights(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = torch.nn.Linear(3, 3, bias=False)
        self.dec = torch.nn.Linear(3, 3, bias=False)
        self.dec.weight = self.enc.weight

    def forward(self, x: T) -> T:
        out: T = self.dec(self.enc(x).tanh())
        return out


class ReturnsMutatedBuffer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(()))
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self, x: T) -> tuple[T, T]:
        steps = self.get_buffer("steps")
        steps.add_(1)
        return x * self.w, steps


class BufferAddThenResize(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buffer", torch.ones(4, 5))

    def forward(self, x: T) -> T:
        y = self.get_buffer("buffer").add_(3)
        y.resize_([20])
        return x.sum() + self.get_buffer("buffer").sum()


MODULE_CASES = [
    Case(name="buffer_in_graph", fn=_seeded(BufferInGraph), make_inputs=lambda: (plain.leaf(1),)),
    Case(name="buffer_other_shape", fn=_seeded(BufferOtherShape), make_inputs=lambda: (plain.leaf(2, 4),)),
    Case(name="running_average", fn=_seeded(RunningAverage), make_inputs=lambda: (plain.t(4, 3),)),
    Case(name="returns_buffer_view", fn=_seeded(ReturnsBufferView), make_inputs=lambda: (plain.t(2),)),
    Case(name="param_data_mutation", fn=_seeded(ParamDataMutation), make_inputs=lambda: (plain.leaf(3),)),
    Case(name="conv_batch_norm2d_train", fn=_seeded(_bn2d), make_inputs=lambda: (plain.t(3, 2, 2, 2),)),
    Case(name="conv_batch_norm2d_eval", fn=_seeded(_bn2d).eval(), make_inputs=lambda: (plain.t(3, 2, 2, 2),)),
    Case(
        name="batch_norm_cumulative",
        fn=_seeded(lambda: torch.nn.BatchNorm1d(3, momentum=None)),
        make_inputs=lambda: (plain.leaf(4, 3),),
    ),
    Case(name="reassigned_buffer", fn=_seeded(ReassignedBuffer), make_inputs=lambda: (plain.leaf(3),)),
    Case(name="tied_weights", fn=_seeded(TiedWeights), make_inputs=lambda: (plain.t(2, 3),)),
    Case(name="returns_mutated_buffer", fn=_seeded(ReturnsMutatedBuffer), make_inputs=lambda: (plain.t(3),)),
    Case(name="buffer_add_then_resize", fn=_seeded(BufferAddThenResize), make_inputs=lambda: (plain.t(2, 5),)),
    Case(
        name="instance_norm_running_stats",
        fn=_seeded(lambda: torch.nn.InstanceNorm1d(3, track_running_stats=True)),
        make_inputs=lambda: (plain.leaf(2, 3, 4),),
    ),
    Case(name="dropout_module", fn=_seeded(lambda: torch.nn.Dropout(0.4)), make_inputs=lambda: (plain.leaf(8),)),
]
