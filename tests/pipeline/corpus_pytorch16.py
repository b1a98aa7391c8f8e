"""Corpus, PyTorch's own programs, sixteenth part (held out: written from PyTorch's tests, not from ours): the programs
of test/inductor/test_inplacing_pass.py the fourteenth part did not port, and the TwoTensor programs of
test/dynamo/test_subclasses.py's TestNestedTensor (its NestedTensor programs are in tests/subclasses/test_njt.py).

From test_inplacing_pass.py: the graphs its reinplacing tests build by hand, run as programs (auto_functionalized and
auto_functionalized_v2 called on an op that writes an input's whole base or a 0-d view of an intermediate, the result
copied back into the input or not, a view of the input taken before and read before or returned after), the programs
those graphs are the functional form of (a custom op writing an input, a row or a slice of it, a row of an
intermediate, beside views taken before the write), and test_partitioner_recomputes_factory's variants the fourteenth
part left out (empty_like; a kernel that writes nothing, as its Triton op is on CPU). From TestNestedTensor: a
TwoTensor parameter read after an isinstance check (test_param_subclass_isinstance_input), a view of a TwoTensor of one
tensor twice under dynamic=False (test_subclass_gives_static_shapes_when_dynamic_false).

Each program that takes tensors runs twice: as written (`ip_<name>`), and on torch's TwoTensor (`ip_two_<name>`).
As written: their inputs (shapes, dtypes), programs and ops, declared here in the namespace `corpus16`; where the test
fills a buffer with empty_like and reads it unwritten (test_counters_functionalize_*), it is zeros_like here.

Input: nothing. Output: `CASES16` for tests/pipeline/test_corpus_pytorch.py and test_dynamo_corpus.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus (prefix
`ip_`); each program names the PyTorch test it follows.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch._higher_order_ops.auto_functionalize import auto_functionalized, auto_functionalized_v2
from torch.autograd.function import FunctionCtx
from torch.testing._internal.two_tensor import TwoTensor

from tests.pipeline.corpus import Case, inp, ported_as
from tests.pipeline.corpus_pytorch14 import sin_into  # (test_inplacing_pass.py's _reinplacing::sin too)

T = torch.Tensor
aten = torch.ops.aten
ported = ported_as("ip")


@torch.library.custom_op("corpus16::boo", mutates_args={"x"})
def boo(x: T) -> None:
    # test_inplacing_pass.py's test_view::boo
    x.sin_()


@boo.register_fake
def _boo_fake(x: T) -> None:
    return None


def _boo_v2_whole(base: T) -> tuple[object, ...]:
    """auto_functionalized_v2 of boo over the whole of a 3-element `base` (the tests' `_x_size=(3,)`, ...)."""
    return auto_functionalized_v2(
        torch.ops.corpus16.boo.default,
        _x_base_index=0,
        _x_size=(3,),
        _x_stride=(1,),
        _x_storage_offset=0,
        _all_bases=[base],
    )


# ---------------------------------------------------------------------------------------------------------------
# test_inplacing_pass.py: the hand-built graphs, run as programs


def v2_written_back(arg0_1: T) -> object:
    # test_view_inplaced_functionalize_v2
    aten.select.int(arg0_1, 0, 0)
    result = _boo_v2_whole(arg0_1)
    aten.copy_.default(arg0_1, result[1])
    return None


def v2_written_back_view_returned(arg0_1: T) -> object:
    # test_view_inplaced2_functionalize_v2: a view taken before, returned after the copy
    aten.select.int(arg0_1, 0, 0)
    another_view = arg0_1[2]
    result = _boo_v2_whole(arg0_1)
    aten.copy_.default(arg0_1, result[1])
    return another_view


def v2_view_read_before_copy(arg0_1: T) -> object:
    # test_views_not_inplaced_functionalize_v2: the view read between the op and the copy
    aten.select.int(arg0_1, 0, 0)
    another_view = arg0_1[2]
    result = _boo_v2_whole(arg0_1)
    use_another_view = another_view * 10
    aten.copy_.default(arg0_1, result[1])
    return use_another_view


def v2_not_written_back(arg0_1: T) -> object:
    # test_views_not_inplaced2_functionalize_v2: no copy back (the input keeps its values)
    aten.select.int(arg0_1, 0, 0)
    arg0_1[2]
    _boo_v2_whole(arg0_1)
    return None


def v2_zero_dim_of_local(arg0_1: T) -> object:
    # test_views_not_inplaced3_functionalize_v2: a 0-d view at offset 0 of a tensor made inside
    a = torch.ones(10)
    another_view = a[2]
    auto_functionalized_v2(
        torch.ops.corpus16.boo.default, _x_base_index=0, _x_size=(), _x_stride=(), _x_storage_offset=0, _all_bases=[a]
    )
    return another_view


def v1_result_beside_buffer(x: T) -> object:
    # test_counters_functionalize_old (zeros_like for its empty_like)
    out = torch.zeros_like(x)
    _, new_out = auto_functionalized(torch.ops.corpus14.sin_into.default, x=x, result=out)
    y = out * new_out
    return new_out, y


def v2_result_beside_buffer(x: T) -> object:
    # test_counters_functionalize_v2 (zeros_like for its empty_like)
    out = torch.zeros_like(x)
    _, new_out = auto_functionalized_v2(
        torch.ops.corpus14.sin_into.default,
        x=x,
        _result_base_index=0,
        _result_size=(3,),
        _result_stride=(1,),
        _result_storage_offset=0,
        _all_bases=[out],
    )
    y = out * new_out
    return new_out, y


# ---------------------------------------------------------------------------------------------------------------
# test_inplacing_pass.py: the programs those graphs are the functional form of


def boo_input_select_returned(x: T) -> object:
    # (test_view_inplaced*: boo of the input, a select of it taken before and returned)
    first = x.select(0, 0)
    boo(x)
    return first


def boo_row_other_row_returned(x: T) -> object:
    # (test_views_not_inplaced3: boo of a 0-d row, another row returned)
    another_view = x[2]
    boo(x[0])
    return another_view


def boo_row_of_local(x: T) -> object:
    # (test_views_not_inplaced3 on an intermediate: a row of a clone written, the clone and another row returned)
    a = x.clone()
    another_view = a[2]
    boo(a[0])
    return a, another_view


def boo_slice_strided_view_returned(x: T) -> object:
    # (a slice written, a strided view over it returned)
    boo(x[1:3])
    return x[::2]


def boo_view_read_before(x: T) -> object:
    # (test_views_not_inplaced: the view read before the write, and returned)
    another_view = x[2]
    use_another_view = another_view * 10
    boo(x)
    return use_another_view, another_view


def sin_into_slice_of_input(x: T, out: T) -> object:
    # (test_multiple_mutations into a slice: the op writes out[1:], then reads and writes it again)
    sin_into(x[1:], out[1:])
    sin_into(out[1:], out[1:])
    return out[:2]


def _factory_sin(factory: Callable[[T], T], writes: bool) -> type[torch.autograd.Function]:
    """test_partitioner_recomputes_factory's MySin over `factory` and the sin op (`writes`), or its CPU stand-in for
    the Triton kernel (which writes nothing)."""

    def sin_op(x: T, out: T) -> None:
        if writes:
            sin_into(x, out)

    class FactorySin(torch.autograd.Function):
        @staticmethod
        def forward(ctx: FunctionCtx, x: T) -> T:
            out = factory(x)
            sin_op(x, out)
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx: FunctionCtx, grad: T) -> T:
            (saved,) = ctx.saved_tensors  # type: ignore[attr-defined]
            out = factory(grad)
            sin_op(saved, out)
            return out

    return FactorySin


_EMPTY_LIKE_SIN = _factory_sin(torch.empty_like, True)
_ONES_LIKE_NO_KERNEL = _factory_sin(torch.ones_like, False)


def empty_like_sin(x: T) -> object:
    # test_partitioner_recomputes_factory (empty_like, sin_op)
    return _EMPTY_LIKE_SIN.apply(x)  # type: ignore[no-untyped-call]


def ones_like_no_kernel(x: T) -> object:
    # test_partitioner_recomputes_factory (ones_like, sin_triton: on CPU a function that does nothing)
    return _ONES_LIKE_NO_KERNEL.apply(x)  # type: ignore[no-untyped-call]


def hop(name: str, fn: Callable[..., object], make: Callable[[bool], tuple[object, ...]]) -> list[Case]:
    """A program calling the HOP on an input: as written, and on TwoTensor, where eager raises (the HOPs have no rule
    for TwoTensor)."""
    plain, two = ported(name, fn, make)
    return [plain, Case(name=two.name, fn=fn, make_inputs=two.make_inputs, eager_raises=True)]


def _randn(*shapes: tuple[int, ...], rg: bool = False) -> Callable[[bool], tuple[object, ...]]:
    return lambda two: tuple(inp(torch.randn(*s), two, rg=rg) for s in shapes)


INPLACING = [
    *hop("v2_written_back", v2_written_back, _randn((3,))),
    *hop("v2_written_back_view_returned", v2_written_back_view_returned, _randn((3,))),
    *hop("v2_view_read_before_copy", v2_view_read_before_copy, _randn((3,))),
    *hop("v2_not_written_back", v2_not_written_back, _randn((3,))),
    *ported("v2_zero_dim_of_local", v2_zero_dim_of_local, _randn((3,))),
    *hop("v1_result_beside_buffer", v1_result_beside_buffer, _randn((3,))),
    *hop("v2_result_beside_buffer", v2_result_beside_buffer, _randn((3,))),
    *ported("boo_input_select_returned", boo_input_select_returned, _randn((3,))),
    *ported("boo_row_other_row_returned", boo_row_other_row_returned, _randn((3,))),
    *ported("boo_row_of_local", boo_row_of_local, _randn((3,))),
    *ported("boo_row_of_local_train", boo_row_of_local, _randn((3,), rg=True)),
    *ported("boo_slice_strided_view_returned", boo_slice_strided_view_returned, _randn((4,))),
    *ported("boo_view_read_before", boo_view_read_before, _randn((3,))),
    *ported("sin_into_slice_of_input", sin_into_slice_of_input, _randn((3,), (3,))),
    *ported("partitioner_empty_like_train", empty_like_sin, _randn((3,), rg=True)),
    *ported("partitioner_no_kernel_train", ones_like_no_kernel, _randn((3,), rg=True)),
]


# ---------------------------------------------------------------------------------------------------------------
# test/dynamo/test_subclasses.py's TestNestedTensor: its TwoTensor programs


class TwoTensorWeight(torch.nn.Module):
    # test_param_subclass_isinstance_input: a Linear whose weight is a Parameter of TwoTensor(x_inner, x_inner)
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(16, 16)
        x_inner = torch.randn(16, 16, requires_grad=True)
        self.linear.weight = torch.nn.Parameter(TwoTensor(x_inner, x_inner))  # type: ignore[no-untyped-call]

    def forward(self) -> T:
        weight = self.linear.weight
        return weight + 1 if isinstance(weight, torch.nn.Parameter) else weight + 2


def _view_of_two_of_one() -> tuple[object, ...]:
    # test_subclass_gives_static_shapes_when_dynamic_false: TwoTensor(x_inner, x_inner).view(2, 2)
    x_inner = torch.ones(4)
    return (TwoTensor(x_inner, x_inner).view(2, 2),)  # type: ignore[no-untyped-call]


NESTED_TENSOR_TESTS = [
    Case(name="ip_param_subclass_isinstance_input", fn=TwoTensorWeight(), make_inputs=lambda: ()),
    Case(
        name="ip_subclass_static_shapes_when_dynamic_false",
        fn=lambda x: x + 1,
        make_inputs=_view_of_two_of_one,
        compile_kwargs={"dynamic": False},
    ),
]

CASES16 = INPLACING + NESTED_TENSOR_TESTS
