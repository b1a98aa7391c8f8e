"""Corpus, PyTorch's own programs, sixth part: the aliased-input and grad-mode programs of test_aotdispatch.py the
first five parts did not yet run (metadata writes of aliased inputs, aliases none of which requires grad, outputs
aliasing a written aliased input, None and int inputs, detach/no_grad/grad writes mixed, an intermediate returned
several times, a storage resized to zero then set_), the input and slice mutation programs of
test/inductor/test_torchinductor.py (copy_ into an input, augmented assignment chains, slice assignment, in-place
activations, index_put_ with masks and None indices, a zero-element in-place module, mixed dtypes, an int index),
subclass programs of test/dynamo/test_subclasses.py and test/test_subclass.py (an in-graph input write beside a
read-only input, the inner tensors of nested pairs read, an optimizer step on a leaf under no_grad), custom Functions
(mark_non_differentiable, set_materialize_grads(False), once_differentiable, an output that is a view of the input
written), inference_mode blocks (a write through a view of an input, an inference tensor as an argument of an
input's in-place op, an inference tensor returned) and resize_/set_ of intermediates (test_functionalization.py);
written fresh, on plain tensors and PairTensors, without and with grad.

Input: nothing. Output: `CASES6` for tests/pipeline/test_corpus_pytorch.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus; a
training variant's mutated inputs are non-leaves, as eager requires. Each program names the PyTorch test (or, where
it follows a family of them, the test file) it ports.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from subclasses.pair import PairTensor
from tests.pipeline import corpus_pytorch as plain
from tests.pipeline.corpus import Case, set_to
from tests.pipeline.corpus_pytorch2 import MakeOne, both_kinds, kinds
from tests.pipeline.corpus_pytorch_subclass import pair, pair_leaf

T = torch.Tensor
FunctionCtx = torch.autograd.function.FunctionCtx
aten = torch.ops.aten


# ---------------------------------------------------------------------------------------------------------------
# test_aotdispatch.py: aliased inputs, None/int inputs, grad modes mixed


def metadata_write_of_alias(a: T, b: T) -> object:
    # test_input_metadata_mutation_aliases (a and b are the same flat view of one base)
    a.t_()
    return a + b


def _two_flat_views(new: MakeOne, rg: bool) -> tuple[object, ...]:
    base = new(2, 2, rg=rg)
    return base.view(-1), base.view(-1)


def write_alias_none_requires_grad(a: T, b: T, c: T) -> object:
    # test_input_mutation_aliases_and_none_require_gradients
    a.mul_(2)
    return b + 1, c + 1


def _aliases_without_grad(new: MakeOne, rg: bool) -> tuple[object, ...]:
    base = new(2, 2)
    return base.view(-1), base.view(-1), new(4, rg=rg)


def write_alias_return_its_view(a: T, b: T, c: T) -> object:
    # test_input_aliased_with_mutation_output_alias (a and c alias)
    c.mul_(2)
    return b.add(1), c.view(-1)


def _first_and_third_alias(new: MakeOne, rg: bool) -> tuple[object, ...]:
    base = new(2, 2, rg=rg)
    return base.view(-1), new(2, 2, rg=rg), base.view(-1)


def with_none_and_int(a: T, b: None, c: int) -> object:
    # test_input_mutation_simple_with_none_and_nontensor, the tensor also written by the int
    a.mul_(c)
    return a * c, b


def detach_grad_no_grad_writes(a: T) -> object:
    # test_input_mutation_requires_grad_no_grad_detach_mixed
    a.detach().mul_(2)
    a.mul_(3)
    with torch.no_grad():
        a.mul_(4)
    return a + 5


def intermediate_returned_three_times(a: T) -> object:
    # test_output_aliases_intermediate_returned_multiple_times
    out = torch.mul(a, 3)
    return out, out.view(-1), out


def storage_freed_then_set(a: T) -> object:
    # test_input_mutation_storage_resize_before_set_ (untyped_storage().resize_ for inductor's resize_storage_bytes_)
    with torch.no_grad():
        a.untyped_storage().resize_(0)
        set_to(a, torch.ones(2))
    return a + 1


AOTDISPATCH = [
    *both_kinds("aot_input_metadata_mutation_aliases", metadata_write_of_alias, _two_flat_views),
    *both_kinds("aot_aliases_none_require_grad", write_alias_none_requires_grad, _aliases_without_grad),
    *both_kinds("aot_aliased_with_mutation_output_alias", write_alias_return_its_view, _first_and_third_alias),
    *both_kinds("aot_none_and_nontensor", with_none_and_int, lambda new, rg: (new(3, 3, rg=rg), None, 3)),
    *kinds("aot_no_grad_detach_mixed", detach_grad_no_grad_writes, (4,)),
    *kinds("aot_intermediate_returned_multiple_times", intermediate_returned_three_times, (3, 3)),
    Case(name="aot_storage_resize_before_set", fn=storage_freed_then_set, make_inputs=lambda: (plain.t(8),)),
    Case(name="aot_storage_resize_before_set_leaf", fn=storage_freed_then_set, make_inputs=lambda: (plain.leaf(8),)),
]


# ---------------------------------------------------------------------------------------------------------------
# test_torchinductor.py: input mutations, slice assignment, in-place activations, index_put_


def copy_into_input(a: T) -> object:
    # test_input_mutation1
    b = a + 1
    a.copy_(b)
    c = a + 2
    return a * b / c


def copy_scalar_tensor_into_flat_view(a: T) -> object:
    # test_input_mutation2
    b = a + 1
    a.view(-1).copy_(torch.tensor([66.0]))
    c = a + 2
    return b, c


def augmented_chain(a: T) -> object:
    # test_input_mutation3
    a += 1
    a *= 2
    aten.sigmoid_(a)
    a = a.view(-1)
    a += 3
    a *= 4
    aten.relu_(a)
    return a


def relu_input(a: T) -> object:
    # test_input_mutation4
    torch.relu_(a)
    return a


def slice_assign_into_zeros(a: T) -> object:
    # test_slice_mutation1
    x = torch.zeros_like(a)
    b = x + 1
    x[:, 3] = 3.0
    c = torch.clone(x)
    x[4, :] = 4.0
    d = x + 1
    return x, b, c, d


def slice_assign_overlapping(a: T) -> None:
    # test_slice_mutation2 (the source of the second write overlaps the first write)
    a[:, 20:40] = a[:, 20:40] + 1
    a[:, 2:11] = a[:, 1:10] + 2


def corner_fill(a: T) -> None:
    # test_slice_mutation3
    a[:2, :2].fill_(10)


def inplace_activations(x: T) -> object:
    # test_inplace_activations
    a = aten.hardswish_(x + 1)
    b = aten.hardtanh_(x + 1)
    c = aten.leaky_relu_(x + 1)
    d = aten.silu_(x + 1)
    e = aten.log1p(x + 1)
    f = aten.masked_fill_(x + 1, torch.zeros_like(x, dtype=torch.bool), 99.0)
    h = aten.masked_fill_(x + 1, torch.ones_like(x, dtype=torch.bool), 99.0)
    return a, b, c, d, e, f, h


def index_put_functional_and_inplace(a: T, b: T, c: T) -> object:
    # test_index_put1
    return torch.index_put(a, [b], c), torch.index_put_(a + 1, [b + 1], c + 1) + 1


def index_put_none_indices(a: T, b: T, c: T) -> object:
    # test_index_put3 (the input written through (None, b, None))
    aten.index_put_(a, (None, b, None), c)
    a1 = a + 1
    aten.index_put_(a1, (None, b + 1, None), c + 1)
    return a, a1


def index_put_masked(a: T, b: T, c: T, d: bool) -> object:
    # test_index_put_as_masked_fill
    a = a.clone()
    aten.index_put_(a, [b], c, d)
    return a


def index_put_none_long_bool(a: T, b: T, c: T, d: T, e: bool) -> object:
    # test_index_put_fallback2
    a = a.clone()
    aten.index_put_(a, [None, b, c], d, e)
    return a


def leaky_relu_inplace_empty(x: T) -> object:
    # an in-place LeakyReLU (nn.LeakyReLU(inplace=True)) on an input with no elements (test_torchinductor.py)
    return torch.nn.functional.leaky_relu(x, negative_slope=5.2955089, inplace=True)


def mixed_dtype_inplace(x: T, y: T) -> object:
    # test_inplace_mixed_dtype_ops
    z = x + y.float()
    w = z.add_(y)
    return w.mul_(y)


def setitem_int_index(n: int, a: T) -> object:
    # a row of the input assigned by a Python int index (test_torchinductor.py's setitem programs)
    a[n] = -1
    return a


def setitem_then_pointwise(a: T, b: T) -> object:
    # an element of the input assigned, then read by a pointwise op (test_torchinductor.py's setitem programs)
    a[0] = 2
    return a * b


def add_alpha_inplace(x: T, y: T) -> object:
    # test_inplace_add_alpha (test/inductor/test_cpu_repro.py)
    aten.add_.Tensor(x, y, alpha=0.55)
    return (x,)


def fill_tensor_of_fresh(x: T) -> object:
    # test_fill2 (fill with a 0-d tensor), written in place
    tmp = torch.ones_like(x)
    return tmp, tmp.fill_(torch.tensor(3.0))


def _index_put1_inputs(new: MakeOne, rg: bool) -> tuple[object, ...]:
    return new(8, 4, 2, rg=rg), torch.arange(4), new(4, 1, 1, rg=rg)


def _index_put3_inputs(new: MakeOne, rg: bool) -> tuple[object, ...]:
    return new(5, 4, 2, rg=rg), torch.arange(3), new(5, 1, 2, rg=rg)


def _masked_inputs(accumulate: bool) -> object:
    def make(new: MakeOne, rg: bool) -> tuple[object, ...]:
        return new(6, 4, 2, rg=rg), torch.randn(6, 4, 2) > 0, new(rg=rg), accumulate

    return make


def _fallback2_inputs(accumulate: bool) -> object:
    def make(new: MakeOne, rg: bool) -> tuple[object, ...]:
        b, c = torch.as_tensor([0, 1]), torch.as_tensor([True, True, False])
        return new(1, 2, 3, rg=rg), b, c, new(rg=rg), accumulate

    return make


INDUCTOR_MUTATIONS = [
    *kinds("ind_input_mutation1", copy_into_input, (8,)),
    *kinds("ind_input_mutation2", copy_scalar_tensor_into_flat_view, (1, 8)),
    *kinds("ind_input_mutation3", augmented_chain, (1, 8)),
    *kinds("ind_input_mutation4", relu_input, (1, 8)),
    *kinds("ind_slice_mutation1", slice_assign_into_zeros, (8, 8)),
    *kinds("ind_slice_mutation2", slice_assign_overlapping, (1, 64)),
    *kinds("ind_slice_mutation3", corner_fill, (4, 4)),
    *kinds("ind_inplace_activations", inplace_activations, (16,)),
    *both_kinds("ind_index_put1", index_put_functional_and_inplace, _index_put1_inputs),
    *both_kinds("ind_index_put3", index_put_none_indices, _index_put3_inputs),
    *both_kinds("ind_index_put_as_masked_fill", index_put_masked, _masked_inputs(False)),  # type: ignore[arg-type]
    *both_kinds("ind_index_put_as_masked_fill_acc", index_put_masked, _masked_inputs(True)),  # type: ignore[arg-type]
    *both_kinds("ind_index_put_fallback2", index_put_none_long_bool, _fallback2_inputs(False)),  # type: ignore[arg-type]
    *both_kinds(
        "ind_index_put_fallback2_acc",
        index_put_none_long_bool,
        _fallback2_inputs(True),  # type: ignore[arg-type]
    ),
    *kinds("ind_zero_element_mutation", leaky_relu_inplace_empty, (0,)),
    *both_kinds(
        "ind_inplace_mixed_dtype_ops",
        mixed_dtype_inplace,
        lambda new, rg: (new(4, 3, rg=rg), torch.randn(4, 3, dtype=torch.float64)),
    ),
    *both_kinds("ind_setitem_with_int_parameter", setitem_int_index, lambda new, rg: (3, new(7, rg=rg))),
    *kinds("ind_inplace_where_pointwise", setitem_then_pointwise, (4,), (4,)),
    *kinds("ind_inplace_add_alpha", add_alpha_inplace, (4, 4), (4, 4)),
    *kinds("ind_fill2", fill_tensor_of_fresh, (3, 2)),
]


# ---------------------------------------------------------------------------------------------------------------
# test/dynamo/test_subclasses.py and test/test_subclass.py


def write_beside_read_only(x: T, y: T) -> object:
    # test_subclass_with_mutation_in_graph
    z = x.sin()
    y.sin_()
    return z.cos(), y.cos()


def nested_inner_reads(x: T, y: T, z: T) -> object:
    # test_nested_subclasses_complicated_inps (test_aotdispatch.py)
    temp = x + y
    temp_plain = x.a + y.b  # type: ignore[attr-defined]
    res = temp.sum() + temp_plain.sum()
    return x.sin().cos() + res + z.sum()


def _nested(rg: bool) -> T:
    inner = PairTensor(torch.randn(4), torch.randn(4))
    outer = PairTensor(inner, PairTensor(torch.randn(4), torch.randn(4)), requires_grad=rg)
    return outer.clone() if rg else outer


def _nested_inputs(rg: bool) -> tuple[object, ...]:
    return _nested(rg), _nested(rg), plain.t(4, rg=rg)


def sgd_step_on_leaf(p: T, g: T) -> object:
    # test_subclass.py test_module_optimization: the optimizer's in-place step on a parameter under no_grad
    with torch.no_grad():
        p.add_(g, alpha=-0.5)
    return p * 2


SUBCLASS = [
    *kinds("subclass_with_mutation_in_graph", write_beside_read_only, (3, 4), (3, 4)),
    *plain.both("pair_nested_complicated_inps", nested_inner_reads, _nested_inputs),
    Case(name="sgd_step_on_leaf", fn=sgd_step_on_leaf, make_inputs=lambda: (plain.leaf(3), torch.randn(3))),
    Case(name="pair_sgd_step_on_leaf", fn=sgd_step_on_leaf, make_inputs=lambda: (pair_leaf(3), pair(3))),
]


# ---------------------------------------------------------------------------------------------------------------
# Custom autograd Functions (test/test_autograd.py)


class ScaleAndMask(torch.autograd.Function):
    """x * 2 and a float mask of x > 0 marked non-differentiable."""

    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> tuple[T, T]:
        mask = (x > 0).to(x.dtype)
        ctx.mark_non_differentiable(mask)
        return x * 2, mask

    @staticmethod
    def backward(ctx: FunctionCtx, g: T, g_mask: T) -> T:
        return g * 2


def non_differentiable_mask_written(x: T) -> object:
    # test_mark_non_differentiable, the non-differentiable output then written in place
    out, mask = ScaleAndMask.apply(x)  # type: ignore[no-untyped-call]
    mask.mul_(3)
    return out * mask, mask


class TwoClones(torch.autograd.Function):
    """Two clones of x; with set_materialize_grads(False) an unused output's gradient arrives as None."""

    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> tuple[T, T]:
        ctx.set_materialize_grads(False)
        return x.clone(), x.clone()

    @staticmethod
    def backward(ctx: FunctionCtx, g1: T | None, g2: T | None) -> T | None:
        if g1 is None and g2 is None:
            return None
        total = g1 * 2 if g1 is not None else torch.zeros(())
        return total + g2 * 3 if g2 is not None else total


def one_output_unused(x: T) -> object:
    # test_set_materialize_grads
    a, _ = TwoClones.apply(x)  # type: ignore[no-untyped-call]
    return a * 2


class CubeOnce(torch.autograd.Function):
    """x ** 3 with a once_differentiable backward."""

    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> T:
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, g: T) -> T:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        out: T = g * 3 * x * x
        return out


def once_differentiable_output_written(x: T) -> object:
    # test_once_differentiable, the output then written in place
    y = CubeOnce.apply(x)  # type: ignore[no-untyped-call]
    y.add_(1)
    return y


class FlatView(torch.autograd.Function):
    """Returns a flat view of its input."""

    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> T:
        return x.view(-1)

    @staticmethod
    def backward(ctx: FunctionCtx, g: T) -> T:
        return g.view(2, 3)


def custom_view_output_written(x: T) -> object:
    # test_autograd.py's custom Function view checks: eager refuses an in-place write of a custom Function's output
    # that is a view of its input and requires grad
    y = FlatView.apply(x)  # type: ignore[no-untyped-call]
    y.mul_(2)
    return y, x + 1


CUSTOM_FUNCTIONS = [
    *kinds("custom_mark_non_differentiable", non_differentiable_mask_written, (2, 3)),
    *kinds("custom_set_materialize_grads", one_output_unused, (2, 3)),
    *kinds("custom_once_differentiable_written", once_differentiable_output_written, (2, 3)),
    *kinds("custom_view_output_written", custom_view_output_written, (2, 3), train_raises=True),
]


# ---------------------------------------------------------------------------------------------------------------
# inference_mode blocks (test/test_autograd.py TestAutogradInferenceMode)


def inference_write_through_view(x: T) -> object:
    # test_normal_tensor_view_output_in_inference_mode / test_normal_tensor_inplace_output_in_inference_mode
    with torch.inference_mode():
        x.view(-1).mul_(2)
    return x + 1


def inference_tensor_as_argument(x: T) -> object:
    # test_mix_inference_and_normal_tensor_inplace_op (training: eager refuses saving an inference tensor)
    with torch.inference_mode():
        c = torch.full((3,), 2.0)
    return x.mul_(c)


def inference_clone_returned(x: T) -> object:
    # test_inference_mode_tensor_creation, a clone made and written in inference mode returned
    with torch.inference_mode():
        y = x.clone()
        y.add_(1)
    return y, x * 2


INFERENCE_MODE = [
    *plain.both("im_write_through_view_of_input", inference_write_through_view, lambda rg: (plain.t(2, 3, rg=rg),)),
    # (eager fails on a PairTensor here: its view's version counter is set under inference_mode)
    *[
        Case(
            name=f"pair_im_write_through_view_of_input{s}",
            fn=inference_write_through_view,
            make_inputs=m,
            eager_raises=True,
        )
        for s, m in (("", lambda: (pair(2, 3),)), ("_train", lambda: (pair(2, 3, rg=True),)))
    ],
    *kinds("im_inference_tensor_as_argument", inference_tensor_as_argument, (3,), train_raises=True),
    *kinds("im_clone_written_returned", inference_clone_returned, (2, 3)),
]


# ---------------------------------------------------------------------------------------------------------------
# test_functionalization.py: resize_ and set_ of intermediates


def resize_transposed_clone(x: T) -> object:
    # resize_ of a clone with other strides to the other shape of its numel (test_functionalization.py resizes)
    y = x.t().clone()
    y.resize_(2, 3)
    y.add_(1)
    return y


def resize_view_larger(x: T) -> object:
    # test_resize_larger_invalid (functionalization rejects it; eager grows the shared storage)
    y = x + 1
    z = y.view(4, 4)
    z.resize_(5, 5)
    z.view(25).fill_(1)
    return y, z


def set_onto_slice_of_fresh(x: T) -> object:
    # set_() of the input onto a slice of a fresh tensor under no_grad, then written (test_aotdispatch.py's set_)
    src = torch.arange(6.0).view(2, 3)[1:]
    with torch.no_grad():
        set_to(x, src)
    x.mul_(2)
    return x, src


RESIZE_AND_SET = [
    *kinds("fz_resize_same_size_diff_strides", resize_transposed_clone, (2, 3), train_raises=True),
    # (plain only: eager fails on a PairTensor view grown by resize_, its inner storages being set to meta ones)
    *plain.both("fz_resize_larger_invalid", resize_view_larger, lambda rg: (plain.t(8, 2, rg=rg),), train_raises=True),
    *plain.both("set_onto_slice_of_fresh", set_onto_slice_of_fresh, lambda rg: (plain.t(3, rg=rg),)),
]


CASES6 = AOTDISPATCH + INDUCTOR_MUTATIONS + SUBCLASS + CUSTOM_FUNCTIONS + INFERENCE_MODE + RESIZE_AND_SET
