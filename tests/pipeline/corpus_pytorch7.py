"""Corpus, PyTorch's own programs, seventh part: the programs that PyTorch runs on its own TwoTensor
(torch.testing._internal.two_tensor), on TwoTensor itself. The earlier parts run them on PairTensor, our equivalent;
torch's class differs from ours in what the pipeline reads (its `__tensor_flatten__` names, its dispatch through
`return_and_correct_aliasing`, a mode-built instance's inner tensors not requiring grad). As written: their inputs
(`torch.ones` of their shapes, the `.add(1)` or `.mul(2)` of a leaf that `verify_aot_autograd` passes), their
requires_grad settings, and TwoTensorMode's instances (`TwoTensor(t, t.clone())` of each factory call).

Sources: test/functorch/test_aotdispatch.py (the tests run with `make_inputs_subclasses=True`, and the nested
TwoTensor and ConstantExtraMetadataTensor tests) and test/dynamo/test_subclasses.py (test_tensor_subclass_TwoTensor_*).

Input: nothing. Output: `CASES7` for tests/pipeline/test_corpus_pytorch.py and test_dynamo_corpus.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus (prefix
`two_`); each program names the PyTorch test it ports.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.testing._internal.custom_tensor import ConstantExtraMetadataTensor
from torch.testing._internal.two_tensor import TwoTensor

from tests.pipeline import corpus_pytorch as plain
from tests.pipeline import corpus_pytorch2 as second
from tests.pipeline import corpus_pytorch4 as fourth
from tests.pipeline.corpus import Case

T = torch.Tensor
Make = Callable[[bool], tuple[object, ...]]


def two(*shape: int, rg: bool = False) -> T:
    """What `torch.ones(shape, requires_grad=rg)` gives under TwoTensorMode: a leaf whose inners do not need grad."""
    inner = torch.ones(shape)
    out: T = TwoTensor(inner, inner.clone())  # type: ignore[no-untyped-call]
    return out.requires_grad_(rg)


def two_of(a: T, b: T) -> T:
    out: T = TwoTensor(a, b)  # type: ignore[no-untyped-call]
    return out


def constant_tensor(elem: T, constant: int) -> T:
    out: T = ConstantExtraMetadataTensor(elem)  # type: ignore[no-untyped-call]
    out.constant_attribute = constant  # type: ignore[attr-defined]
    return out


def two_both(name: str, fn: Callable[..., object], make: Make, **kwargs: object) -> list[Case]:
    return plain.both(f"two_{name}", fn, make, **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------------
# test_aotdispatch.py, make_inputs_subclasses=True (the inputs built under TwoTensorMode)


def _transposed_input(rg: bool) -> tuple[object, ...]:
    # test_subclass_metadata_mutation (its inp_callable: a clone of a leaf)
    return (two(1, 2, 4, rg=rg).clone(),)


def _same_row_twice(rg: bool) -> tuple[object, ...]:
    # test_input_data_and_metadata_mutation_aliases_other_input
    x = two(2, 2, rg=rg).add(1)
    return x[0], x[0]


def _column(rg: bool) -> tuple[object, ...]:
    # test_input_mutation_noncontiguous
    x = two(2, 2, rg=rg).add(1)
    return (x[:, 0],)


def _two_row_blocks(rg: bool) -> tuple[object, ...]:
    # test_input_mutation_false_aliasing (inp_callable1: no overlap, contiguous)
    x = two(4, 4, rg=rg).add(1)
    return x[0:2], x[2:4]


def _flat_and_row(rg: bool) -> tuple[object, ...]:
    # test_output_aliases_multiple_inputs_get_correct_one
    x = two(2, 2, rg=rg).mul(2)
    return x.view(-1), x[0]


def _aliases_and_other(rg: bool) -> tuple[object, ...]:
    # test_input_mutation_aliases_and_none_require_gradients (the aliases need no grad; `c` does where rg)
    x = two(2, 2).add(1)
    return x.view(-1), x.view(-1), two(2, 2, rg=rg)


def _bases_out_of_order(rg: bool) -> tuple[object, ...]:
    # test_input_mutation_aliases_bases_out_of_order
    x1, x2 = two(2, 2, rg=rg).add(1), two(2, 2, rg=rg).add(1)
    return x1.view(-1), x2.view(-1), x1.view(-1), x2.view(-1)


def mul_then_plus_one(a: T) -> object:
    a.mul_(2)
    return a + 1


AOTDISPATCH_MODE = [
    *two_both("subclass_metadata_mutation", second.metadata_mutation_then_transposed_intermediate, _transposed_input),
    *two_both("data_and_metadata_mutation_aliases_other_input", second.mul_first_transpose_second, _same_row_twice),
    *two_both("input_mutation_noncontiguous", mul_then_plus_one, _column),
    *two_both("input_mutation_false_aliasing", second.mul_both_clone_flat, _two_row_blocks),
    *two_both("output_aliases_multiple_inputs_get_correct_one", second.views_of_each_input, _flat_and_row),
    *two_both("aliases_and_none_require_gradients", plain.mutate_first_none_need_grad, _aliases_and_other),
    *two_both("aliases_bases_out_of_order", plain.bases_out_of_order, _bases_out_of_order),
]


# ---------------------------------------------------------------------------------------------------------------
# test_aotdispatch.py: nested TwoTensors, TwoTensor beside ConstantExtraMetadataTensor


def _leaf_ones(n: int) -> T:
    return torch.ones(n, requires_grad=True)


def _fresh_leaf(x: T) -> T:
    return x.detach().clone().requires_grad_()


def sin_cos(x: T) -> object:
    # test_nested_subclasses
    return x.sin().cos()


def _nested_two() -> tuple[object, ...]:
    a = _leaf_ones(4)
    return (two_of(two_of(a, _fresh_leaf(a)), two_of(_fresh_leaf(a), _fresh_leaf(a))),)


def nested_inner_reads(x: T, y: T, z: T) -> object:
    # test_nested_subclasses_complicated_inps (z unused, as there)
    temp = x + y
    temp_plain = x.a + y.b  # type: ignore[attr-defined]
    res = temp.sum() + temp_plain.sum()
    return x.sin().cos() + res


def _nested_complicated() -> tuple[object, ...]:
    x = _leaf_ones(4)
    xx = two_of(x, _fresh_leaf(x))
    x_nested = two_of(xx, _fresh_leaf(xx))
    return x_nested, _fresh_leaf(x_nested), _fresh_leaf(x)


def constant_times_pair_parts(x: T, y: T) -> object:
    # test_subclasses_mixed (a TwoTensor made in the program of two ConstantExtraMetadataTensors)
    x_metadata = x.constant_attribute  # type: ignore[attr-defined]
    out_a = x_metadata * x * y.a  # type: ignore[attr-defined]
    out_b = x * y.a * y.b  # type: ignore[attr-defined]
    return two_of(out_a, out_b)


def _constant_and_two() -> tuple[object, ...]:
    b = torch.ones(4)
    return constant_tensor(torch.ones(4), 5), two_of(b, b.clone())


def constant_times_elem_sin_cos(x: T) -> object:
    # test_nested_subclasses_non_homogenous
    return x.constant_attribute * x.elem * x.sin().cos()  # type: ignore[attr-defined]


def _constant_of_two() -> tuple[object, ...]:
    a = _leaf_ones(4)
    return (constant_tensor(two_of(a, _fresh_leaf(a)), 6),)


def nested_constant_reads(x: T) -> object:
    # test_custom_tensor_metadata
    x_elem = x.elem  # type: ignore[attr-defined]
    return x * x_elem * x_elem.elem * x_elem.constant_attribute


def _constant_of_constant() -> tuple[object, ...]:
    return (constant_tensor(constant_tensor(_leaf_ones(4), 6), 4),)


def nested_constant_and_two(x: T, y: T) -> object:
    # test_nested_subclasses_complicated_inps_mixed
    y_elem = y.elem  # type: ignore[attr-defined]
    return y * y_elem * y_elem.elem * y_elem.constant_attribute + x


def _nested_two_and_constant() -> tuple[object, ...]:
    x = _leaf_ones(4)
    xx = two_of(x, _fresh_leaf(x))
    return two_of(xx, _fresh_leaf(xx)), _constant_of_constant()[0]


NESTED = [
    Case(name="two_nested_subclasses", fn=sin_cos, make_inputs=_nested_two),
    Case(name="two_nested_subclasses_complicated_inps", fn=nested_inner_reads, make_inputs=_nested_complicated),
    Case(name="two_subclasses_mixed", fn=constant_times_pair_parts, make_inputs=_constant_and_two),
    Case(name="two_nested_subclasses_non_homogenous", fn=constant_times_elem_sin_cos, make_inputs=_constant_of_two),
    Case(name="constant_tensor_custom_tensor_metadata", fn=nested_constant_reads, make_inputs=_constant_of_constant),
    Case(
        name="two_nested_subclasses_complicated_inps_mixed",
        fn=nested_constant_and_two,
        make_inputs=_nested_two_and_constant,
    ),
]


# ---------------------------------------------------------------------------------------------------------------
# test/dynamo/test_subclasses.py: test_tensor_subclass_TwoTensor_* (fourth part's programs, on TwoTensor)


def _leaf_and_detached(*shape: int) -> Callable[[], tuple[object, ...]]:
    # test_tensor_subclass_TwoTensor_simple: b = a.clone().detach().requires_grad_(True)
    def make() -> tuple[object, ...]:
        a = torch.ones(shape, requires_grad=True)
        return (two_of(a, _fresh_leaf(a)),)

    return make


def _leaf_and_clone(*shape: int) -> Callable[[], tuple[object, ...]]:
    # the other tests: b = a.clone() (a non-leaf that requires grad)
    def make() -> tuple[object, ...]:
        a = torch.ones(shape, requires_grad=True)
        return (two_of(a, a.clone()),)

    return make


def _two_and_its_inners() -> tuple[object, ...]:
    a = torch.ones(3, 4, requires_grad=True)
    b = a.clone()
    return two_of(a, b), a, b


def clone_then_same_view(tt: T) -> object:
    # test_tensor_subclass_TwoTensor_view
    y = tt.clone()
    return y.view(y.shape[0], y.shape[1])


def clone_then_flat_by_product(tt: T) -> object:
    # test_tensor_subclass_TwoTensor_view_mul
    y = tt.clone()
    return y.view(y.shape[0] * y.shape[1])


def _marked_dynamic() -> tuple[object, ...]:
    # test_tensor_subclass_TwoTensor_mark_dynamic_shapes
    (tt,) = _leaf_and_clone(3, 4)()
    torch._dynamo.mark_dynamic(tt, 1)
    return (tt,)


def clone_flat_by_sizes(x: T) -> object:
    # test_tensor_subclass_TwoTensor_return_shape
    return x.clone().view(x.shape[0] * x.shape[1])


def _two_no_grad() -> tuple[object, ...]:
    a = torch.ones(2, 3)
    return (two_of(a, a.clone()),)


def sines_times_sizes(x: T, i: T, y: T) -> object:
    # test_tensor_subclass_TwoTensor_nested
    out1 = x.sin() + i.sin() + y.sin()
    val1 = x.shape[0] * i.shape[1] * y.shape[0]
    return out1 * val1


def _two_plain_and_nested() -> tuple[object, ...]:
    i = torch.randn(2, 2, requires_grad=True)
    x = two_of(i, i.clone())
    return x, i, two_of(x.clone(), x.clone())


def _uneven_nesting() -> tuple[object, ...]:
    # test_subclass_TwoTensor_TwoTensor_TwoTensor: a TwoTensor of a TwoTensor and of a TwoTensor of TwoTensors
    data = torch.randn(2, 3)
    s = two_of(data, data.clone())
    return (two_of(s, two_of(s, s.clone())),)


def sin(x: T) -> object:
    return x.sin()


DYNAMO_TWO_TENSOR = [
    Case(name="two_TwoTensor_simple", fn=fourth.times_first_size, make_inputs=_leaf_and_detached(3, 4)),
    Case(name="two_TwoTensor_clone_view", fn=fourth.clone_then_swapped_view, make_inputs=_leaf_and_clone(3, 4)),
    Case(name="two_TwoTensor_mul", fn=fourth.times_sizes, make_inputs=_two_and_its_inners),
    Case(name="two_TwoTensor_view", fn=clone_then_same_view, make_inputs=_leaf_and_clone(3, 4)),
    Case(name="two_TwoTensor_view_mul", fn=clone_then_flat_by_product, make_inputs=_leaf_and_clone(3, 4)),
    Case(
        name="two_TwoTensor_return_tensor_and_subclass",
        fn=fourth.clone_inner_and_flat,
        make_inputs=_leaf_and_clone(3, 4),
    ),
    Case(name="two_TwoTensor_return_multiple", fn=fourth.clone_inners_and_views, make_inputs=_leaf_and_clone(3, 4)),
    Case(name="two_TwoTensor_automatic_dynamic_shapes", fn=fourth.clone_a_flat_b, make_inputs=_leaf_and_clone(3, 5)),
    Case(name="two_TwoTensor_different_shape", fn=fourth.clone_to_3d, make_inputs=_leaf_and_clone(24)),
    Case(name="two_TwoTensor_mark_dynamic_shapes", fn=fourth.clone_a_flat_b, make_inputs=_marked_dynamic),
    Case(name="two_TwoTensor_return_shape", fn=clone_flat_by_sizes, make_inputs=_two_no_grad),
    Case(name="two_TwoTensor_nested", fn=sines_times_sizes, make_inputs=_two_plain_and_nested),
    Case(name="two_TwoTensor_TwoTensor_TwoTensor", fn=sin, make_inputs=_uneven_nesting),
]


CASES7 = AOTDISPATCH_MODE + NESTED + DYNAMO_TWO_TENSOR
