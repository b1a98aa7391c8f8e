"""Corpus, PyTorch's own programs, fourth part: the mutation/aliasing programs of test_aotdispatch.py and
test/dynamo/test_subclasses.py the first three parts did not yet run (set_ then a write under grad, out= returns,
writes hidden from autograd, detached aliases of intermediates, custom Functions that write in both passes,
overlapping inputs written and returned, modules, grad modes, TwoTensor programs), written fresh; and the PairTensor
variants of plain programs of the earlier parts where PyTorch runs them on TwoTensor (`make_inputs_subclasses`).

Input: nothing. Output: `CASES4` for tests/pipeline/test_corpus_pytorch.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus; a
training variant's mutated inputs are non-leaves, as eager requires. Each group names the PyTorch test it ports.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from subclasses.pair import PairTensor
from tests.pipeline import corpus_pytorch as plain
from tests.pipeline import corpus_pytorch2 as p2
from tests.pipeline import corpus_pytorch3 as p3
from tests.pipeline.corpus import Case, set_to
from tests.pipeline.corpus_pytorch2 import MakeOne, both_kinds, kinds, leaf_kinds
from tests.pipeline.corpus_pytorch_subclass import pair, pair_leaf

T = torch.Tensor
FunctionCtx = torch.autograd.function.FunctionCtx


# ---------------------------------------------------------------------------------------------------------------
# Input mutations: set_ then a write under grad, out= returns, writes hidden from autograd


def set_then_write_target(a: T, b: T) -> object:
    # test_set__not_allowed (AOTAutograd bans it; eager runs it)
    with torch.no_grad():
        set_to(a, b)
    a.mul_(2)
    return a + b


def sin_out(a: T, b: T) -> object:
    # test_input_mutation_return
    return torch.sin(a, out=b)


def no_grad_write_through_flat_view(a: T) -> object:
    # test_input_mutation_hidden_from_autograd_aliasing
    a_alias = a.view(-1)
    with torch.no_grad():
        a_alias.mul_(2)
    return a + 1


def add_both_returned(t0: T, t1: T, s0: int, s1: int) -> object:
    # test_duplicated_arguments_on_tensor_overlap
    return t0.add_(s0), t1.add_(s1)


def add_into_first(x: T, y: T) -> object:
    # test_new_inp_requires_grad_now
    return x.add_(y)


def buffer_write_times_x(x: T, buf: T) -> object:
    # test_aot_export_input_mutation
    buf.add_(1)
    return buf * x


def _overlapping(new: MakeOne, rg: bool) -> tuple[object, ...]:
    x = new(10, rg=rg)
    return x, x[1:-1], 2, 2


INPUT_MUTATIONS = [
    *kinds("set__not_allowed", set_then_write_target, (3, 3), (3, 3)),
    Case(name="input_mutation_return", fn=sin_out, make_inputs=lambda: (plain.t(3, 3), plain.t(3, 3))),
    Case(name="pair_input_mutation_return", fn=sin_out, make_inputs=lambda: (pair(3, 3), pair(3, 3))),
    Case(
        name="input_mutation_return_grad_raises",
        fn=sin_out,
        make_inputs=lambda: (plain.leaf(3, 3), plain.t(3, 3)),
        eager_raises=True,
    ),
    *kinds("input_mutation_hidden_from_autograd_aliasing", no_grad_write_through_flat_view, (2, 2)),
    *leaf_kinds(
        "input_mutation_hidden_from_autograd_aliasing_leaf", no_grad_write_through_flat_view, lambda new: (new(2, 2),)
    ),
    *both_kinds("duplicated_arguments_on_tensor_overlap", add_both_returned, _overlapping),
    Case(name="new_inp_requires_grad_now", fn=add_into_first, make_inputs=lambda: (plain.t(4, 5), plain.leaf(4, 5))),
    Case(name="pair_new_inp_requires_grad_now", fn=add_into_first, make_inputs=lambda: (pair(4, 5), pair_leaf(4, 5))),
    Case(name="aot_export_input_mutation", fn=buffer_write_times_x, make_inputs=lambda: (plain.leaf(2), plain.t(2))),
    Case(name="pair_aot_export_input_mutation", fn=buffer_write_times_x, make_inputs=lambda: (pair_leaf(2), pair(2))),
]


# ---------------------------------------------------------------------------------------------------------------
# Outputs aliasing inputs and intermediates


def transposed_and_detached(x: T) -> object:
    # test_alias_of_intermediate_detach
    x = x + 1
    a = x.transpose(0, 1)
    return a.detach(), a


def flat_view(a: T) -> object:
    # test_input_output_view_simple
    return a.view(-1)


def write_first_unbound(out: object, args: tuple[object, ...]) -> None:
    # test_output_aliases_input_multi_output_view_should_raise_autograd_error, first case: eager raises
    assert isinstance(out, list)
    out[0].mul_(2)


def write_detached_unbound_then_read_grad_fn(out: object, args: tuple[object, ...]) -> None:
    # ..._should_raise_autograd_error, third case: a write through a detached alias
    assert isinstance(out, list)
    out[0].detach().mul_(2)
    _ = out[1].grad_fn


def write_last_and_input(out: object, args: tuple[object, ...]) -> None:
    # test_output_aliases_input_multi_output_view, f3: the last output and the input are written after the call
    a = args[0]
    assert isinstance(out, tuple) and isinstance(a, torch.Tensor)
    out[-1].mul_(2)
    a.view(-1).mul_(3)


def view_to_size_and_flat(a: T, size: tuple[int, ...]) -> object:
    # test_dynamic_output_aliases_input_view_meta_replay
    return a.view(size), a.view(-1)


def product_and_self_detached(x: T, y: T) -> object:
    # test_aot_export_simplified_basic
    return x * y, y * y.detach()


def plus_one_transposed(x: T) -> object:
    # test_noncontig_nonmemformat_tangents
    x = x + 1
    return x.transpose(1, 2)


def div_and_double(a: T, b: T) -> object:
    # test_aot_dispatch_incorrect_backward (a PairTensor, b plain)
    aa = torch.mul(a, 2)
    bb = torch.add(b, 3)
    return torch.div(aa, bb), torch.add(b, b)


OUTPUT_ALIASES = [
    *kinds("alias_of_intermediate_detach", transposed_and_detached, (3, 3), after_call=plain.mul_out(0)),
    *leaf_kinds("alias_of_intermediate_detach_leaf", transposed_and_detached, lambda new: (new(3, 3),)),
    *kinds("input_output_view_simple", flat_view, (2, 2), after_call=plain.mul_out(-1)),
    Case(
        name="output_aliases_input_multi_output_view_written",
        fn=p3.unbind_list,
        make_inputs=lambda: (plain.t(3, 3, rg=True),),
        after_call=write_first_unbound,
    ),
    Case(
        name="pair_output_aliases_input_multi_output_view_written",
        fn=p3.unbind_list,
        make_inputs=lambda: (pair(3, 3, rg=True),),
        after_call=write_first_unbound,
    ),
    Case(
        name="output_aliases_input_multi_output_view_detached_written",
        fn=p3.unbind_list,
        make_inputs=lambda: (plain.t(3, 3, rg=True),),
        after_call=write_detached_unbound_then_read_grad_fn,
    ),
    Case(
        name="pair_output_aliases_input_multi_output_view_detached_written",
        fn=p3.unbind_list,
        make_inputs=lambda: (pair(3, 3, rg=True),),
        after_call=write_detached_unbound_then_read_grad_fn,
    ),
    *kinds(
        "output_aliases_input_multi_output_view_and_view_written",
        p2.unbind_input_and_view,
        (3, 3),
        after_call=write_last_and_input,
    ),
    *both_kinds("dynamic_output_aliases_input_view_meta_replay", view_to_size_and_flat, lambda n, rg: (n(2, 2), (4,))),
    *leaf_kinds(
        "dynamic_output_aliases_input_view_meta_replay_leaf", view_to_size_and_flat, lambda new: (new(2, 2), (4,))
    ),
    *leaf_kinds("aot_export_simplified_basic", product_and_self_detached, lambda new: (new(2), new(2))),
    *leaf_kinds("noncontig_nonmemformat_tangents", plus_one_transposed, lambda new: (new(2, 4, 6),)),
    Case(
        name="aot_dispatch_incorrect_backward",
        fn=div_and_double,
        make_inputs=lambda: (pair_leaf(3, 3), plain.leaf(3, 3)),
    ),
]


# ---------------------------------------------------------------------------------------------------------------
# Grad modes: outputs that require grad under an outer no_grad (the `_train` variants also run under no_grad)


def sin_then_cos_with_grad(x: T) -> object:
    # test_aot_dispatch_output_requires_grad_in_no_grad
    out1 = x.sin()
    with torch.enable_grad():
        out2 = x.cos()
    return out1, out2


def flat_view_and_sin(x: T) -> object:
    # test_aot_dispatch_output_requires_grad_in_no_grad_views
    return x.view(-1), x.sin()


GRAD_MODES = [
    *kinds("aot_dispatch_output_requires_grad_in_no_grad", sin_then_cos_with_grad, (10,)),
    *leaf_kinds(
        "aot_dispatch_output_requires_grad_in_no_grad_leaf_train", sin_then_cos_with_grad, lambda new: (new(10),)
    ),
    *kinds("aot_dispatch_output_requires_grad_in_no_grad_views", flat_view_and_sin, (2, 3)),
]


# ---------------------------------------------------------------------------------------------------------------
# Custom autograd Functions and custom ops that write inputs, intermediates or saved tensors in either pass


class ForeachWritesBothPasses(torch.autograd.Function):
    # test_fw_bw_mutation_no_functionalization1
    @staticmethod
    def forward(ctx: FunctionCtx, a: T, b: T) -> T:
        torch._foreach_mul_([b], [2])
        x = b + 1
        torch._foreach_mul_([x], [3])
        ctx.save_for_backward(x)
        return x * a

    @staticmethod
    def backward(ctx: FunctionCtx, grad_output: T) -> tuple[T, T]:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        torch._foreach_mul_([x], [4])
        return grad_output * x, grad_output * x


class ForeachWritesSavedOutput(torch.autograd.Function):
    # test_fw_bw_mutation_no_functionalization2
    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> T:
        torch._foreach_mul_([x], [2])
        x = x + 1
        torch._foreach_mul_([x], [3])
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx: FunctionCtx, grad_output: T) -> T:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        torch._foreach_mul_([x], [4])
        out: T = grad_output * x
        return out


def foreach_writes_both_passes(a: T, b: T) -> object:
    out: T = ForeachWritesBothPasses.apply(a, b)  # type: ignore[no-untyped-call]
    return out.sin_().clone()


def foreach_writes_saved_output(a: T, b: T) -> object:
    out: T = ForeachWritesSavedOutput.apply(b)  # type: ignore[no-untyped-call]
    return out * a


class SavesItsInput(torch.autograd.Function):
    # test_saved_tensors_hooks_donated_buffers: returns its input, saved for the backward
    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> T:
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx: FunctionCtx, gx: T) -> T:
        (saved_x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        out: T = gx + saved_x
        return out


def input_and_relu_of_saved_identity(x: T) -> object:
    x0 = x
    y: T = SavesItsInput.apply(x)  # type: ignore[no-untyped-call]
    return x0, F.relu(y)


@torch.library.custom_op("corpus4::clone_zero_in_backward", mutates_args=())
def clone_zero_in_backward(x: T, x1: T) -> T:
    return x.clone()


@clone_zero_in_backward.register_fake
def _clone_zero_in_backward_fake(x: T, x1: T) -> T:
    return torch.empty_like(x)


def _clone_zero_setup(ctx: FunctionCtx, inputs: tuple[T, T], output: T) -> None:
    ctx.x1 = inputs[1]  # type: ignore[attr-defined]


def _clone_zero_backward(ctx: FunctionCtx, grad: T) -> tuple[T, None]:
    with torch.no_grad():
        ctx.x1.zero_()  # type: ignore[attr-defined]
    return grad * 2, None


clone_zero_in_backward.register_autograd(_clone_zero_backward, setup_context=_clone_zero_setup)


def custom_op_writes_input_in_backward(x: T, x1: T, x2: T) -> object:
    # test_backward_mutation_forward_inputs
    x2.mul_(5)
    out: T = torch.ops.corpus4.clone_zero_in_backward(x, x1)
    return out + x2


CUSTOM = [
    Case(
        name="fw_bw_mutation_no_functionalization1",
        fn=foreach_writes_both_passes,
        make_inputs=lambda: (plain.leaf(3, 3), plain.t(3, 3)),
    ),
    Case(
        name="pair_fw_bw_mutation_no_functionalization1",
        fn=foreach_writes_both_passes,
        make_inputs=lambda: (pair_leaf(3, 3), pair(3, 3)),
    ),
    Case(
        name="fw_bw_mutation_no_functionalization2",
        fn=foreach_writes_saved_output,
        make_inputs=lambda: (plain.leaf(3, 3), plain.t(3, 3)),
    ),
    Case(
        name="pair_fw_bw_mutation_no_functionalization2",
        fn=foreach_writes_saved_output,
        make_inputs=lambda: (pair_leaf(3, 3), pair(3, 3)),
    ),
    *leaf_kinds("saved_tensors_hooks_donated_buffers", input_and_relu_of_saved_identity, lambda new: (new(3, 3),)),
    Case(
        name="backward_mutation_forward_inputs",
        fn=custom_op_writes_input_in_backward,
        make_inputs=lambda: (plain.leaf(3), plain.t(3), plain.t(3)),
    ),
]


# ---------------------------------------------------------------------------------------------------------------
# Random in-place ops


def rrelu_in_place(x: T) -> object:
    # test_rrelu (fn_)
    torch.rrelu_(x, training=True)
    return x


def rrelu_with_noise_written(x: T) -> object:
    # test_rrelu_with_noise_mutation (fn_mutation): the noise intermediate is written by the op
    noise = torch.ones_like(x)
    result = torch.ops.aten.rrelu_with_noise(x, noise, 0.2, 0.8, True)
    return result, noise


def _negative(rg: bool) -> tuple[object, ...]:
    return (-torch.abs(plain.t(4, 4, rg=rg)),)


RANDOM = [
    *kinds("rrelu_in_place", rrelu_in_place, (4, 4)),
    *plain.both("rrelu_with_noise_mutation", rrelu_with_noise_written, _negative),
]


# ---------------------------------------------------------------------------------------------------------------
# Modules


class BufferCopiedInGraph(torch.nn.Module):
    # test_buffer_copied_in_graph
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.zeros(1))
        self.w1 = torch.nn.Parameter(torch.zeros(1))
        self.w2 = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x: T) -> T:
        buf = self.get_buffer("buf")
        buf.add_(1)
        return (self.w1 * x * self.w2).sum() + buf.sum()


class BufferCopiedInGraphOtherShape(torch.nn.Module):
    # test_buffer_copied_in_graph_with_different_shapes
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.ones(4, 4))
        self.w = torch.nn.Parameter(torch.tensor([[4.0, 5.0], [1.0, 2.0], [6.0, 7.0], [8.0, 9.0]]))

    def forward(self, x: T) -> T:
        buf = self.get_buffer("buf")
        buf.add_(1)
        return (self.w @ x).sum() + buf.sum()


class BatchNorm1dModule(torch.nn.Module):
    # test_buffer_batch_norm
    def __init__(self) -> None:
        super().__init__()
        self.m = torch.nn.BatchNorm1d(10)

    def forward(self, x: T) -> T:
        out: T = self.m(x)
        return out


class ConvBatchnormRelu(torch.nn.Module):
    # test_aot_export_module_joint
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 3, 1, 1)
        self.bn = torch.nn.BatchNorm2d(3)

    def forward(self, x: T) -> tuple[T, T]:
        x = self.conv(x)
        x = self.bn(x)
        user_out = F.relu(x)
        loss = user_out.sum()
        return loss, user_out.detach()


class ParamAndInputTransposed(torch.nn.Module):
    # test_aot_export_metadata_mutation_banned (TestMod: a parameter the program does not read)
    def __init__(self) -> None:
        super().__init__()
        self.p = torch.nn.Parameter(torch.ones(2))

    def forward(self, x: T) -> tuple[T]:
        x.t_()
        return (x * 2,)


class InputWrittenBufferRead(torch.nn.Module):
    # test_aot_export_forward_mutation_no_buffer_mut
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buffer1", torch.ones(6, 4))

    def forward(self, x: T) -> tuple[T]:
        x.add_(4)
        return (x.cos().sum() + self.get_buffer("buffer1").sum(),)


class ConvAndViewsChannelsLast(torch.nn.Module):
    # test_grads_no_force_contiguous_dense (without the logging op)
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 3, 3)
        self.to(memory_format=torch.channels_last)  # type: ignore[call-overload]

    def forward(self, x: T, y: T, cont_inp: T) -> tuple[T, ...]:
        z = y + 3
        y.mul_(2)
        r = self.conv(x)
        return r, r.transpose(0, 1), z.view(-1), z.transpose(0, 1), cont_inp * 2


class PairParameters(torch.nn.Module):
    # test_subclass_parameters: a parameter that is a PairTensor, and one that is a PairTensor of PairTensors
    def __init__(self) -> None:
        super().__init__()
        self.p1 = torch.nn.Parameter(torch.ones(3, 4))
        self.p2 = torch.nn.Parameter(PairTensor(torch.ones(3, 4), torch.randn(3, 4)))
        inner = PairTensor(torch.zeros(3, 4), torch.randn(3, 4))
        self.p3 = torch.nn.Parameter(PairTensor(inner, PairTensor(torch.ones(3, 4), torch.ones(3, 4))))

    def forward(self, x: T) -> T:
        return x + self.p3 + x + 2 * self.p1 + self.p2


def _channels_last_inputs() -> tuple[object, ...]:
    cl = torch.channels_last
    return (
        torch.randn(2, 3, 5, 5, requires_grad=True).to(memory_format=cl),
        torch.randn(3, 2, 1, 1, requires_grad=True).to(memory_format=cl).clone(),
        torch.randn(3, 2, 1, 1, requires_grad=True),
    )


MODULES = [
    Case(name="buffer_copied_in_graph", fn=BufferCopiedInGraph(), make_inputs=lambda: (plain.leaf(1),)),
    Case(
        name="buffer_copied_in_graph_with_different_shapes",
        fn=BufferCopiedInGraphOtherShape(),
        make_inputs=lambda: (plain.leaf(2, 4),),
    ),
    Case(name="buffer_batch_norm", fn=BatchNorm1dModule(), make_inputs=lambda: (plain.leaf(20, 10),)),
    Case(name="aot_export_module_joint", fn=ConvBatchnormRelu(), make_inputs=lambda: (plain.t(1, 1, 3, 3),)),
    Case(name="aot_export_metadata_mutation", fn=ParamAndInputTransposed(), make_inputs=lambda: (plain.t(2, 4),)),
    Case(
        name="aot_export_forward_mutation_no_buffer_mut",
        fn=InputWrittenBufferRead(),
        make_inputs=lambda: (plain.t(6, 4),),
    ),
    Case(
        name="aot_export_forward_mutation_no_buffer_mut_train",
        fn=InputWrittenBufferRead(),
        make_inputs=lambda: (plain.t(6, 4, rg=True),),
    ),
    Case(name="grads_no_force_contiguous_dense", fn=ConvAndViewsChannelsLast(), make_inputs=_channels_last_inputs),
    Case(name="subclass_parameters", fn=PairParameters(), make_inputs=lambda: (plain.t(3, 4),)),
]


# ---------------------------------------------------------------------------------------------------------------
# TwoTensor programs of test/dynamo/test_subclasses.py (a PairTensor whose inners are a leaf and its clone)


def times_first_size(tt: T) -> object:
    # test_tensor_subclass_TwoTensor_simple
    return tt * tt.size()[0]


def clone_then_swapped_view(tt: T) -> object:
    # test_tensor_subclass_TwoTensor_clone_view
    y = tt.clone()
    return y.view(y.shape[1], y.shape[0])


def times_sizes(tt: T, a: T, b: T) -> object:
    # test_tensor_subclass_TwoTensor_mul (tt's inners are the inputs a and b)
    s0, s1 = a.size()
    s2, s3 = b.size()
    return tt * s0 * s1 * s2 * s3


def clone_inner_and_flat(tt: T) -> object:
    # test_tensor_subclass_TwoTensor_return_tensor_and_subclass
    y = tt.clone()
    inner: T = y.a  # type: ignore[attr-defined]
    return inner, y.view(y.shape[0] * y.shape[1])


def clone_inners_and_views(tt: T) -> object:
    # test_tensor_subclass_TwoTensor_return_multiple
    y = tt.clone()
    z = tt.clone()
    return y.a, y.view(y.shape[0] * y.shape[1]), y.b, z.view(-1)  # type: ignore[attr-defined]


def clone_a_flat_b(tt: T) -> object:
    # test_tensor_subclass_TwoTensor_automatic_dynamic_shapes
    y = tt.clone()
    return y.a, y.view(-1), y.b  # type: ignore[attr-defined]


def clone_to_3d(tt: T) -> object:
    # test_tensor_subclass_TwoTensor_different_shape
    return tt.clone().view(3, 2, 4)


def _leaf_and_clone(*shape: int) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        a = plain.leaf(*shape)
        return (PairTensor(a, a.clone()),)

    return make


def _pair_of_inputs() -> tuple[object, ...]:
    a = plain.leaf(3, 4)
    b = a.clone()
    return PairTensor(a, b), a, b


TWO_TENSOR = [
    Case(name="tensor_subclass_TwoTensor_simple", fn=times_first_size, make_inputs=_leaf_and_clone(3, 4)),
    Case(name="tensor_subclass_TwoTensor_clone_view", fn=clone_then_swapped_view, make_inputs=_leaf_and_clone(3, 4)),
    Case(name="tensor_subclass_TwoTensor_mul", fn=times_sizes, make_inputs=_pair_of_inputs),
    Case(
        name="tensor_subclass_TwoTensor_return_tensor_and_subclass",
        fn=clone_inner_and_flat,
        make_inputs=_leaf_and_clone(3, 4),
    ),
    Case(
        name="tensor_subclass_TwoTensor_return_multiple", fn=clone_inners_and_views, make_inputs=_leaf_and_clone(3, 4)
    ),
    Case(
        name="tensor_subclass_TwoTensor_automatic_dynamic_shapes",
        fn=clone_a_flat_b,
        make_inputs=_leaf_and_clone(3, 5),
        after_call=plain.mul_out(1),
    ),
    Case(name="tensor_subclass_TwoTensor_different_shape", fn=clone_to_3d, make_inputs=_leaf_and_clone(24)),
    *plain.both("pair_clone_inner_and_flat", clone_inner_and_flat, lambda rg: (pair(3, 4, rg=rg),)),
    *plain.both("pair_clone_inners_and_views", clone_inners_and_views, lambda rg: (pair(3, 4, rg=rg),)),
]


# ---------------------------------------------------------------------------------------------------------------
# PairTensor variants of plain programs of the earlier parts (PyTorch runs them with make_inputs_subclasses=True,
# or they are the TwoTensor counterpart of a plain aliasing program)


def _p(*shape: int) -> plain.Make:
    return lambda rg: (pair(*shape, rg=rg),)


def _pair_flat_pair_with_other(rg: bool) -> tuple[object, ...]:
    x, y = pair(2, 2, rg=rg), pair(2, 2, rg=rg)
    return x.view(-1), y, x.view(-1)


def _pair_flat_twice(rg: bool) -> tuple[object, ...]:
    x = pair(2, 2, rg=rg)
    return x.view(-1), x.view(-1)


def _pair_flat_twice_and_grad(rg: bool) -> tuple[object, ...]:
    x = pair(2, 2)
    return x.view(-1), x.view(-1), pair(2, 2, rg=rg)


def _pair_out_of_order(rg: bool) -> tuple[object, ...]:
    x1, x2 = pair(2, 2, rg=rg), pair(2, 2, rg=rg)
    return x1.view(-1), x2.view(-1), x1.view(-1), x2.view(-1)


def _pair_everything(rg: bool) -> tuple[object, ...]:
    x1, x2 = pair(2, 2, rg=rg), pair(2, 2, rg=rg)
    return x1.view(-1), x2, x1.view(-1)


def _pair_flat_and_base(rg: bool) -> tuple[object, ...]:
    x = pair(2, 2, rg=rg)
    return x.view(-1), x


def _pair_same_twice(rg: bool) -> tuple[object, ...]:
    x = pair(3, 3, rg=rg)
    return x, x


def _pair_dupe_with_other(rg: bool) -> tuple[object, ...]:
    a = pair(2, rg=rg)
    return a, pair(2), a


def _pair_strided(offset: int) -> plain.Make:
    def make(rg: bool) -> tuple[object, ...]:
        x = pair(64, rg=rg)
        return x.as_strided((4, 4), (9, 1), 0), x.as_strided((4, 4), (9, 1), offset)

    return make


def _pair_alias_and_view(rg: bool) -> tuple[object, ...]:
    x = pair(3, 3, rg=rg)
    return x, x.view(3, 3)


def _pair_no_grad_a(rg: bool) -> tuple[object, ...]:
    return pair(3, 3), pair(3, 3, rg=rg)


def _pair_two(rg: bool) -> tuple[object, ...]:
    return pair(3, 3, rg=rg), pair(3, 3, rg=rg)


def _pair_set_inputs(rg: bool) -> tuple[object, ...]:
    return pair(3, 3, rg=rg), pair(3, 3, rg=rg)


def pair_set_to_arange_no_grad(a: T) -> object:
    # test_input_mutation_set__input_mutation, the source a PairTensor too
    b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
    b = PairTensor(b, b * 2)
    with torch.no_grad():
        set_to(a, b)
    return a * b


def pair_set_there_and_back(a: T) -> object:
    # test_input_mutation_set__nop, the source a PairTensor too
    b = torch.arange(9, dtype=a.dtype)
    b = PairTensor(b, b + 1)
    a_old = torch.ops.aten.alias.default(a)
    with torch.no_grad():
        set_to(a, b)
        set_to(a, a_old)
    return a + b.reshape(3, 3)


PAIR_VARIANTS = [
    *plain.both("pair_aliased_mutation_output_alias", plain.mutate_third_return_views, _pair_flat_pair_with_other),
    *plain.both("pair_metadata_mutation_aliases", plain.metadata_mutation_of_alias, _pair_flat_twice),
    *plain.both("pair_aliases_none_require_grad", plain.mutate_first_none_need_grad, _pair_flat_twice_and_grad),
    *plain.both("pair_aliases_bases_out_of_order", plain.bases_out_of_order, _pair_out_of_order),
    *plain.both("pair_alias_everything", plain.alias_everything, _pair_everything),
    *plain.both("pair_outputs_view_correct_alias", plain.views_of_each, _pair_flat_and_base, after_call=plain.mul_arg0),
    *plain.both("pair_dupe_arg_torture", plain.dupe_torture, _pair_same_twice),
    *plain.both("pair_dupe_left_bias", plain.dupe_left_bias, _pair_same_twice),
    *plain.both("pair_dupe_arg_returned_as_output", plain.dupe_returned, _pair_dupe_with_other),
    *plain.both("pair_strided_aliases_overlap", plain.both_aliases_mutated, _pair_strided(24)),
    *plain.both("pair_strided_aliases_no_overlap", plain.both_aliases_mutated, _pair_strided(22)),
    *plain.both("pair_inplace_view_between_views", plain.inplace_view_between_views, _p(2, 4)),
    *plain.both(
        "pair_intermediate_returned_three_times",
        plain.intermediate_returned_three_times,
        _p(3, 3),
        after_call=plain.mul_out(0),
    ),
    *plain.both("pair_intermediate_view_no_grad", plain.intermediate_view_no_grad, _pair_no_grad_a),
    *plain.both(
        "pair_mutation_of_intermediate_view_output", plain.plus_one_flat, _p(3, 3), after_call=plain.mul_out(-1)
    ),
    *plain.both(
        "pair_unbind_intermediate_and_both", plain.unbind_intermediate_and_both, _p(3, 3), after_call=plain.mul_out(-1)
    ),
    *plain.both("pair_split_with_sizes_of_intermediate", plain.split_with_sizes_of_intermediate, _p(2, 4)),
    *plain.both("pair_masked_fill_row_output", plain.masked_fill_row, _p(2, 2)),
    *plain.both("pair_diagonal_mutated_returned", plain.diagonal_mutated_returned, _p(2, 2)),
    *plain.both(
        "pair_unsafe_view_of_intermediate", plain.unsafe_view_of_intermediate, _p(2, 3), after_call=plain.mul_out(-1)
    ),
    *plain.both("pair_enable_grad_inside", plain.enable_grad_inside, _p(3)),
    *plain.both(
        "pair_data_output_mutated_after",
        plain.data_output,
        lambda rg: (pair_leaf(3) if rg else pair(3),),
        after_call=plain.mul_out(0),
    ),
    *plain.both(
        "pair_input_mutation_modifies_autograd_meta_of_aliases", p3.mutate_then_detached_result, _pair_alias_and_view
    ),
    Case(
        name="pair_output_aliases_input_multi_output_view_mutated_after",
        fn=p2.unbind_input,
        make_inputs=lambda: (pair_leaf(3, 3),),
        after_call=plain.mul_out(0),
    ),
    *plain.both("pair_input_mutation_set__input_mutation", p2.set_to_arange_no_grad, _p(3, 3)),
    *plain.both("pair_input_mutation_set__input_mutation_pair_source", pair_set_to_arange_no_grad, _p(3, 3)),
    *plain.both("pair_input_mutation_set__nop_pair_source", pair_set_there_and_back, _p(3, 3)),
    *plain.both("pair_set__and_data_mutation_good", p2.set_then_write_source, _pair_set_inputs),
    *plain.both("pair_input_mutation_set__nop", p2.set_there_and_back, _p(3, 3)),
    Case(name="pair_set__steals_view_chain", fn=p2.set_steals_view_chain, make_inputs=lambda: (pair(3, 3), pair(3, 9))),
]

CASES4 = INPUT_MUTATIONS + OUTPUT_ALIASES + GRAD_MODES + CUSTOM + RANDOM + MODULES + TWO_TENSOR + PAIR_VARIANTS
