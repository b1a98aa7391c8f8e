"""Corpus, PyTorch's own programs, thirteenth part (held out: written from PyTorch's test/dynamo/test_repros.py, not
from ours): the user bug reports turned tests there that write or alias tensors: out= into views, buffers and
tensors of the wrong size (sort, sigmoid, frexp, abs into a transpose, add/sub/addr with alpha and beta), setitem
with boolean masks and into strided intermediates, in-place unsqueeze_ of intermediates then cat, in-place ops in
loops with graph breaks, writes of overlapping input views and of many as_strided views of one storage, as_strided
of a base and of a diagonal written, `.data =` and `.data.mul_` after a tensor was saved for backward, set_() under
no_grad then a write through the old view, `x._grad =`, `requires_grad =` in the program, outputs aliasing an
intermediate then written, duplicated and mixed-grad outputs, grad-mode blocks, a backward inside the program,
random fills of an input, modules that write buffers (BatchNorm over calls, sort/sigmoid into buffers) and their
outputs' slices, lists passed in and appended to. Each program runs twice where it takes tensors: as written
(`rp_<name>`), and on torch's TwoTensor (`rp_two_<name>`: each tensor input a TwoTensor of it and its clone, with its
requires_grad); modules, and programs whose inputs a TwoTensor cannot be, run as written only.

As written: their inputs (shapes, dtypes, requires_grad settings), their programs (the part of the test that builds
the graph; `print` graph breaks are `torch._dynamo.graph_break()` here). Sizes the test picks only to be large (a
48x4x256x513 buffer, a BatchNorm of 64 channels over 32x32 images, 32 as_strided views) are smaller here (said where).
A `_train` variant takes inputs that require grad (non-leaves where the program writes them, as eager requires).

Input: nothing. Output: `CASES13` for tests/pipeline/test_corpus_pytorch.py and test_dynamo_corpus.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus (prefix
`rp_`); each program names the PyTorch test it ports.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.testing._internal.two_tensor import TwoTensor

from tests.pipeline.corpus import Case, inp, ported_as, set_to

T = torch.Tensor
Make = Callable[[bool], tuple[object, ...]]
New = Callable[[], T]

ported = ported_as("rp")


def _inputs(*makers: New, rg: bool = False, nonleaf: bool = False) -> Make:
    """Inputs made by `makers`, each a leaf (with `rg`, one that requires grad; with `nonleaf`, its clone)."""

    def make(two: bool) -> tuple[object, ...]:
        made = [inp(m(), two, rg=rg or nonleaf) for m in makers]
        return tuple(t.clone() if nonleaf else t for t in made)

    return make


def both(name: str, fn: Callable[..., object], *makers: New, writes: bool = True, **kwargs: object) -> list[Case]:
    """The program without grad, and (`_train`) on inputs that require grad: non-leaves where it `writes` them."""
    train = _inputs(*makers, nonleaf=True) if writes else _inputs(*makers, rg=True)
    return [*ported(name, fn, _inputs(*makers), **kwargs), *ported(f"{name}_train", fn, train, **kwargs)]


def randn(*shape: int, dtype: torch.dtype = torch.float32) -> New:
    return lambda: torch.randn(*shape, dtype=dtype)


def ones(*shape: int) -> New:
    return lambda: torch.ones(*shape)


def arange_2x2() -> T:
    return torch.arange(4, dtype=torch.float32).reshape(2, 2)


def _seeded(make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    torch.manual_seed(0)
    return make()


# ---------------------------------------------------------------------------------------------------------------
# out= programs


def abs_out_transposed(x: T, y: T) -> object:
    # test_out_overload_non_contiguous (issue 113010)
    return torch.abs(x, out=y.T)


def sort_out_zero_dim(x: T) -> object:
    # test_sort_out: out= 0-dim tensors made in the program (resized to the column)
    tensor = x[:, 0]
    values1 = torch.tensor(0, dtype=x.dtype)
    indices1 = torch.tensor(0, dtype=torch.long)
    torch.sort(tensor, out=(values1, indices1))
    return values1, indices1, values1.stride(), indices1.stride()


def sigmoid_out_zero_dim(x: T) -> object:
    # test_sigmoid_out
    out1 = torch.tensor(0, dtype=x.dtype)
    torch.sigmoid(x, out=out1)
    return out1, out1.numel()


def sigmoid_out_of_empty(x: T) -> object:
    # test_out_root_cell_shape_change (its x, an input here)
    out = torch.empty(0)

    def run() -> object:
        torch.sigmoid(x, out=out)
        return out.size()

    return run(), out


def sort_out_of_empties(x: T) -> object:
    # test_out_root_cell_tuple_shape_change
    out1 = torch.empty(0)
    out2 = torch.empty(0, dtype=torch.long)
    torch.sort(x, out=(out1, out2))
    return out1.size(), out2.size(), out1, out2


def frexp_out_in_dict(param: dict[str, object]) -> object:
    # test_kwargs_out_list_variable: out= two empty tensors passed in a dict (resized to the input)
    return torch.frexp(**param)  # type: ignore[arg-type]


def _frexp_param(two: bool) -> tuple[object, ...]:
    outs = [inp(torch.empty(0, dtype=torch.float32), two), inp(torch.empty(0, dtype=torch.int32), two)]
    return ({"input": inp(torch.tensor([[0.0, 1, 2, 4]]), two), "out": outs},)


def add_alpha_out(x: T, out: T) -> object:
    # test_add_sub_alpha_out (torch.add)
    return torch.add(x, 1, alpha=2, out=out)


def sub_alpha_out(x: T, out: T) -> object:
    # test_add_sub_alpha_out (torch.sub)
    return torch.sub(x, 1, alpha=2, out=out)


def addr_alpha_beta_out(x: T, vec1: T, vec2: T, out: T) -> object:
    # test_addr_alpha_beta_out
    return torch.addr(x, vec1, vec2, alpha=2, beta=5, out=out)


class SortIntoBuffers(torch.nn.Module):
    # test_sort_out2
    def __init__(self) -> None:
        super().__init__()
        self.sorted = torch.nn.Buffer(torch.ones(4, 4))
        self.indices = torch.nn.Buffer(torch.ones(4, 4, dtype=torch.long))

    def forward(self, x: T) -> object:
        torch.sort(x, out=(self.sorted, self.indices))
        return (x + 1, self.sorted, self.indices)


class SigmoidIntoBuffer(torch.nn.Module):
    # test_sigmoid_out2
    def __init__(self) -> None:
        super().__init__()
        self.base = torch.nn.Buffer(torch.ones(4, 4))

    def forward(self, x: T) -> object:
        torch.sigmoid(x, out=self.base)
        return x + self.base


OUT = [
    *ported("out_overload_non_contiguous", abs_out_transposed, _inputs(arange_2x2, arange_2x2)),
    *ported("sort_out", sort_out_zero_dim, _inputs(randn(3, 5))),
    *ported("sigmoid_out", sigmoid_out_zero_dim, _inputs(randn(3, 5))),
    *ported("out_root_cell_shape_change", sigmoid_out_of_empty, _inputs(lambda: torch.zeros(3, 5))),
    *ported("out_root_cell_tuple_shape_change", sort_out_of_empties, _inputs(randn(3, 5))),
    *ported("kwargs_out_list_variable", frexp_out_in_dict, _frexp_param),
    *ported("add_alpha_out", add_alpha_out, _inputs(randn(2, 3, 4), lambda: torch.zeros(2, 3, 4))),
    *ported("sub_alpha_out", sub_alpha_out, _inputs(randn(2, 3, 4), lambda: torch.zeros(2, 3, 4))),
    *ported(
        "add_alpha_out_dynamic_marked",
        add_alpha_out,
        _inputs(randn(2, 3, 4), lambda: torch.zeros(2, 3, 4)),
        compile_kwargs={"dynamic": True},
    ),
    *ported(
        "addr_alpha_beta_out",
        addr_alpha_beta_out,
        _inputs(randn(2, 3), randn(2), randn(3), lambda: torch.zeros(2, 3)),
        compile_kwargs={"dynamic": True},
    ),
    Case(name="rp_sort_out2", fn=SortIntoBuffers(), make_inputs=lambda: (torch.randn(4, 4),)),
    Case(name="rp_sigmoid_out2", fn=SigmoidIntoBuffer(), make_inputs=lambda: (torch.randn(4, 4),)),
    Case(
        name="rp_sigmoid_out2_train",  # eager raises: out= with an argument that requires grad
        fn=SigmoidIntoBuffer(),
        make_inputs=lambda: (torch.randn(4, 4).requires_grad_(),),
        eager_raises=True,
    ),
]


# ---------------------------------------------------------------------------------------------------------------
# setitem and writes of intermediates


def setitem_bool_mask(x: T, b: T, y: T) -> object:
    # test_setitem_boolean_mask_diff
    x = x.clone()
    x[b] = y
    return x


def setitem_tuple_bool_mask(x: T, b: T, y: T) -> object:
    # test_setitem_tuple_boolean_mask_diff
    x = x.clone()
    x[:, b] = y
    return x


def _mask_inputs(shape: tuple[int, ...], rg: bool) -> Make:
    def make(two: bool) -> tuple[object, ...]:
        b = torch.tensor([True, False, True, False])
        return inp(torch.randn(*shape), two, rg=rg), inp(b, two), inp(torch.randn(2), two, rg=rg)

    return make


def setitem_from_index_value(input_lengths: T, new_ones_1: T) -> object:
    # test_slicing_dynamic_shape_setitem: a slice starting at a tensor's value
    getitem_13 = input_lengths[3]
    new_ones_1[(3, slice(getitem_13, None, None))] = 0
    setitem_13 = new_ones_1
    return (setitem_13,)


def _lengths_and_ones(two: bool) -> tuple[object, ...]:
    lengths = torch.tensor([0, 5, 2, 3, 1, 9, 4, 8, 7, 6])
    return inp(lengths, two), inp(torch.randn(10, 20), two)


def copy_into_strided_then_add_(a: T) -> object:
    # test_copy_weird_strides (a 48x4x256x513 buffer there; 6x4x8x9 here, the slices scaled alike)
    b = torch.zeros(6, 4, 8, 9, dtype=a.dtype)
    b[:, 0, 1:8, 1:8] = a
    c = b.view(2, 3, 32, 9)
    d = c.transpose(2, 1)
    d.add_(1)
    return d


def _strided_half(rg: bool) -> Make:
    # rand_strided((48, 255, 255), (787968, 513, 1), float16) there: a view of a larger buffer
    def make(two: bool) -> tuple[object, ...]:
        buf = inp(torch.randn(6 * 288, dtype=torch.float16), two)
        return (buf.as_strided((6, 7, 7), (288, 9, 1)).requires_grad_(rg),)

    return make


class HeadingWrite(torch.nn.Module):
    # test_issue134451 (the IntEnum's POINT and HEADING, 0:2 and 2, written as numbers here)
    def __init__(self) -> None:
        super().__init__()
        self.mlp = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 5))

    def forward(self, x: T) -> T:
        agent_states: T = self.mlp(x)
        agent_states[..., 0:2] = agent_states[..., 0:2].tanh() * 32
        agent_states[..., 2] = agent_states[..., 2].tanh() * torch.pi
        return agent_states


def unsqueeze_clone_then_cat(reshape_2: T) -> object:
    # test_bigbird_unsqueeze_inplace (2x12x64x64 there; 2x3x4x4 here)
    view_2 = reshape_2.clone()
    view_2.unsqueeze_(2)
    cat_11 = torch.cat([view_2], dim=2)
    view_13 = cat_11.view((2, 3, 4, -1))
    return (view_13,)


def _bmm_nd(inp_1: T, inp_2: T) -> T:
    torch._dynamo.graph_break()
    return torch.bmm(inp_1, inp_2)


def bmm_unsqueeze_then_cat(inp1: T, inp2: T, inp3: T, inp4: T, c: T) -> object:
    # test_hf_bigbird_unsqueeze (1x64x448 there; 1x4x6 here)
    a = _bmm_nd(inp1, inp2)
    a.unsqueeze_(2)
    a = a * 2
    b = _bmm_nd(inp3, inp4)
    b.unsqueeze_(2)
    l_ = a + b
    out = torch.cat([a, b, c], dim=2)
    return out, l_


def fill_fresh_from_config() -> object:
    # test_reformer_min_chunk_len (the config's min(64, 64))
    t = torch.empty(10)
    t.fill_(min(64, 64))
    return t[0]


def sorted_bucket_idx(buckets: T) -> object:
    # test_reformer_sorting (1x12x4096 zeros there; 1x3x16 integers here, so the sort orders something)
    with torch.no_grad():
        scale_offset = torch.arange(buckets.shape[-1]).view(1, 1, -1).expand(buckets.shape)
        scaled = buckets.shape[-1] * buckets + (scale_offset % buckets.shape[-1])
        sorted_idx = torch.argsort(scaled, dim=-1)
        indices = torch.arange(sorted_idx.shape[-1]).view(1, 1, -1).expand(sorted_idx.shape)
        undo_sorted_idx = sorted_idx.new(*sorted_idx.size())
        undo_sorted_idx.scatter_(-1, sorted_idx, indices)
    return sorted_idx, undo_sorted_idx


SETITEM = [
    *ported("setitem_boolean_mask_diff", setitem_bool_mask, _mask_inputs((4,), False)),
    *ported("setitem_boolean_mask_diff_train", setitem_bool_mask, _mask_inputs((4,), True)),
    *ported("setitem_tuple_boolean_mask_diff", setitem_tuple_bool_mask, _mask_inputs((8, 4), False)),
    *ported("setitem_tuple_boolean_mask_diff_train", setitem_tuple_bool_mask, _mask_inputs((8, 4), True)),
    *ported("slicing_dynamic_shape_setitem", setitem_from_index_value, _lengths_and_ones),
    *ported("copy_weird_strides", copy_into_strided_then_add_, _strided_half(False)),
    *ported("copy_weird_strides_train", copy_into_strided_then_add_, _strided_half(True)),
    Case(name="rp_issue134451", fn=_seeded(HeadingWrite), make_inputs=lambda: (torch.randn(1, 10),)),
    Case(name="rp_issue134451_eval", fn=_seeded(HeadingWrite).eval(), make_inputs=lambda: (torch.randn(1, 10),)),
    *both("bigbird_unsqueeze_inplace", unsqueeze_clone_then_cat, randn(2, 3, 4, 4), writes=False),
    *both(
        "hf_bigbird_unsqueeze",
        bmm_unsqueeze_then_cat,
        randn(1, 4, 6),
        randn(1, 6, 4),
        randn(1, 4, 6),
        randn(1, 6, 4),
        randn(1, 4, 1, 4),
        writes=False,
    ),
    Case(name="rp_reformer_min_chunk_len", fn=fill_fresh_from_config, make_inputs=lambda: ()),
    *ported("reformer_sorting", sorted_bucket_idx, _inputs(lambda: torch.randint(0, 4, (1, 3, 16)))),
]


# ---------------------------------------------------------------------------------------------------------------
# in-place ops on inputs and their views


def iadd_loops_with_breaks(x: T) -> object:
    # test_nested_while_loop_graph_break (20 outer iterations there; 3 here)
    def inner_loop(x: T) -> T:
        i = 3
        while i > 0:
            i -= 1
            x += 1
            torch._dynamo.graph_break()
        return x

    def inner(x: T) -> T:
        inner_loop(x)
        return torch.sin(x)

    i = 3
    while i > 0:
        x = inner(x)
        i -= 1
        torch._dynamo.graph_break()
    return x


def iadd_around_breaking_call(x: T) -> object:
    # test_while_loop_graph_break_inside_call_function
    def inner(x: T) -> T:
        for _ in range(3):
            x += 1
            torch._dynamo.graph_break()
        return x

    x += 2
    inner(x)
    x += 3
    return x


class CountToThree:
    def __init__(self) -> None:
        self.i = 0

    def __iter__(self) -> CountToThree:
        return self

    def __next__(self) -> int:
        if self.i < 3:
            self.i += 1
            return self.i
        raise StopIteration


def iadd_user_iter(x: T) -> object:
    # test_user_defined_iter
    for i in CountToThree():
        x += i
    return x


def iadd_config_values(x: T, seven: T) -> object:
    # test_omegaconf_listconfig_iter (the global x an input here; the config's values 1, 3 and a tensor)
    y = x
    for i in (1, 3, seven):
        y += i
    return y


def abs_via_class(x: T) -> object:
    # test_torch_tensor_ops
    return torch.Tensor.abs_(x)


def mul_returned(x: T) -> object:
    # test_vc_bumped_in_inference_graph
    return x.mul_(2)


def add_with_tensor_attr(x: T) -> object:
    # test_memleak_when_graph_input_has_tensor_attr (x.foo set before the call)
    x.add_(1)
    return None


def _with_attr(rg: bool) -> Make:
    def make(two: bool) -> tuple[object, ...]:
        x = inp(torch.ones(2), two, rg=rg)
        x = x.clone() if rg else x
        x.foo = [torch.zeros(2) for _ in range(2)]  # type: ignore[attr-defined]
        return (x,)

    return make


def relu_first_of_views(x: list[T]) -> object:
    # test_many_views_with_mutation (32 views there; 4 here)
    x[0].relu_()
    return torch.cat(x).sum()


def _as_strided_views(two: bool) -> tuple[object, ...]:
    src = inp(torch.rand(16 * 5) - 0.5, two)
    return ([src.as_strided((4, 4), (4, 1), 3 + 16 * i) for i in range(4)],)


def mul_six(a: T, b: T, c: T, d: T, e: T, f: T) -> object:
    # test_overlapping_inputs_with_dynamic_shapes_error
    for t in (a, b, c, d, e, f):
        t.mul_(2)
    return None


def _six_slices(last: tuple[int, int]) -> Make:
    def make(two: bool) -> tuple[object, ...]:
        base = inp(torch.ones(2, 20), two)
        spans = [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10), last]
        return tuple(base[:, s:e] for s, e in spans)

    return make


def add_each_no_grad(*args: T) -> object:
    # test_many_overlapping_inputs_does_not_explode_guards (its no_grad call inside the program here)
    with torch.no_grad():
        for a in args:
            a.add_(1)
    return None


def _split_of_leaf(two: bool) -> tuple[object, ...]:
    # x.split(10) of a 1000-element leaf that requires grad there; 5 of 4 here
    x = inp(torch.ones(20), two, rg=True)
    return tuple(x.split(4))  # type: ignore[no-untyped-call]


def as_strided_of_base_written(a: T) -> object:
    # test_as_strided_on_base_with_mutation_works (issue 104505)
    f = a.as_strided((2,), (1,), 0)
    f.add_(1.0)
    return a


def as_strided_of_diagonal_written(a: T) -> object:
    # test_as_strided_on_existing_view_banned (AOTAutograd raises; eager runs it)
    e = a.diagonal()
    f = e.as_strided((2,), (1,), 0)
    f.add_(1.0)
    return a


INPLACE = [
    *both("nested_while_loop_graph_break", iadd_loops_with_breaks, randn(4)),
    *both("while_loop_graph_break_inside_call_function", iadd_around_breaking_call, randn(4)),
    *both("user_defined_iter", iadd_user_iter, lambda: torch.zeros(1)),
    *both("omegaconf_listconfig_iter", iadd_config_values, lambda: torch.zeros(2), lambda: torch.tensor([7.0])),
    *both("torch_tensor_ops", abs_via_class, randn(3)),
    *both("vc_bumped_in_inference_graph", mul_returned, randn(4)),
    *ported("memleak_input_tensor_attr", add_with_tensor_attr, _with_attr(False)),
    *ported("memleak_input_tensor_attr_train", add_with_tensor_attr, _with_attr(True)),
    *ported("many_views_with_mutation", relu_first_of_views, _as_strided_views),
    *ported("overlapping_inputs_six", mul_six, _six_slices((10, 12))),
    *ported("overlapping_inputs_six_wider", mul_six, _six_slices((10, 14))),
    *ported("many_overlapping_inputs_no_grad", add_each_no_grad, _split_of_leaf),
    *both("as_strided_on_base_with_mutation", as_strided_of_base_written, randn(2, 4)),
    *both("as_strided_on_existing_view", as_strided_of_diagonal_written, randn(2, 4)),
]


# ---------------------------------------------------------------------------------------------------------------
# .data, set_(), .grad, requires_grad: writes autograd does not see


def data_assigned_then_add_(x: T, y: T) -> object:
    # test_tensor_set_data func1
    x.data = y
    x.add_(1)
    return x


def data_assigned_then_emptied(x: T, y: T) -> object:
    # test_tensor_set_data func2
    x.data = y
    y.data = torch.zeros([0])
    return x


def data_assigned_identity(x: T, y: T) -> object:
    # test_tensor_set_data func3
    z = x
    x.data = y
    y.data = torch.zeros([0])
    return torch.tensor(x is z)


def data_mul_after_saved(x: T) -> object:
    # test_data_attr_mutation_after_saved_for_bw (the backward reads the doubled x: .data has its own version)
    out = x.sin()
    x.data.mul_(2)
    return out


def set_under_no_grad_then_old_view(a: T, tmp: T) -> object:
    # test_trace_functional_tensor_with (run as written, outside FunctionalTensorMode)
    a_view = a.view(-1)
    with torch.no_grad():
        set_to(a, tmp)
        a_view.mul_(2)
    return a + tmp


def grad_assigned(x: T, y: T) -> object:
    # test_grad
    x._grad = y
    return x.grad.data  # type: ignore[union-attr]


def _leaf_and_plain(two: bool) -> tuple[object, ...]:
    return inp(torch.randn(4), two, rg=True), inp(torch.randn(4), two)


def requires_grad_set_inside(x: T) -> object:
    # test_setattr_requires_grad_graph_breaks
    z = x + 4
    x.requires_grad = True
    y = x * z
    return y


DATA = [
    *ported("tensor_set_data_func1", data_assigned_then_add_, _inputs(ones(6), ones(6))),
    *ported("tensor_set_data_func2", data_assigned_then_emptied, _inputs(ones(6), ones(6), rg=True)),
    *ported("tensor_set_data_func2_plain", data_assigned_then_emptied, _inputs(ones(6), ones(6))),
    *ported("tensor_set_data_func3", data_assigned_identity, _inputs(ones(6), ones(6), rg=True)),
    *ported("data_attr_mutation_after_saved_for_bw", data_mul_after_saved, _inputs(randn(4), rg=True)),
    *ported("data_attr_mutation_no_grad", data_mul_after_saved, _inputs(randn(4))),
    *ported("trace_functional_tensor_with", set_under_no_grad_then_old_view, _inputs(ones(3, 3), ones(3, 3))),
    *ported(
        "trace_functional_tensor_with_train", set_under_no_grad_then_old_view, _inputs(ones(3, 3), ones(3, 3), rg=True)
    ),
    *ported("grad", grad_assigned, _leaf_and_plain),
    *ported("setattr_requires_grad_graph_breaks", requires_grad_set_inside, _inputs(lambda: torch.zeros(5))),
]


# ---------------------------------------------------------------------------------------------------------------
# outputs: aliases of intermediates, duplicates, grad modes


def view_and_intermediate(x: T) -> object:
    # test_output_aliases_intermediate (the test writes out[0] after the call)
    intermediate = x.mul(2)
    return intermediate.view(-1), intermediate


def _write_first_output(out: object, args: tuple[object, ...]) -> None:
    assert isinstance(out, tuple)
    out[0].mul_(2)


def doubled_twice(val: T) -> object:
    # test_return_value_duplication_tensor (issue 88813)
    return val * 2, val * 2


def plus_one_with_and_without_grad(val: T) -> object:
    # test_return_value_duplication_mixed_grad (issue 114344)
    with torch.no_grad():
        out0 = val + 1
    out1 = val + 1
    return out0, out1


def first_of_doubled_twice(val: T) -> object:
    # test_return_value_duplication_scalar
    x, y = val * 2, val * 2
    return x[0], y[0]


def no_grad_across_break(x: T) -> object:
    # test_grad_mode_carrying_correct_state_after_graph_break
    with torch.no_grad():
        y = x * 3
        torch._dynamo.graph_break()
        z = x + 2
    return y, z


def branch_on_requires_grad(x: T) -> object:
    # test_requires_grad_guards_with_grad_mode1 (the training variant runs under no_grad too, as the test compiles)
    if x.requires_grad:
        return x + 1
    return x + 2


def sum_of_pair(x: T, y: T) -> object:
    # test_avoid_dupe_specialization (f(x, x) and f(x, y))
    return (x + y) * 1


def _pair(same: bool, rg: bool) -> Make:
    def make(two: bool) -> tuple[object, ...]:
        x = inp(torch.randn(4), two, rg=rg)
        return (x, x) if same else (x, inp(torch.randn(4), two, rg=rg))

    return make


def view_rows(x: T, y: T) -> object:
    # test_inductor_dynamic_shapes_broadcasting (issue 136640)
    x_view = x.view(-1, 4)
    y_view = y.view(-1, 4)
    return x_view * y_view


def add_scaled_by_int(t1: T, t2: T, d: int) -> object:
    # test_maybe_multiply_symint (issue 97346)
    return torch.add(t1, t2, alpha=d)


def _aranges_and(d: int) -> Make:
    def make(two: bool) -> tuple[object, ...]:
        new = lambda: inp(torch.arange(3, dtype=torch.float32), two, rg=True)  # noqa: E731
        return new(), new(), d  # type: ignore[no-untyped-call]

    return make


def view_as_int(x: T) -> object:
    # test_view_dtype_overload (issue 109053)
    return x.view(torch.int32)


def mul_complex(x: T) -> object:
    # test_compile_complex_conj (the input is a view_as_complex of a leaf)
    return torch.view_as_real(torch.mul(x, 2j))


def _complex_view(two: bool) -> tuple[object, ...]:
    return (torch.view_as_complex(torch.randn(4, 2, requires_grad=True)),)


def sins_around_copy_(x: T, l_: T) -> object:
    # test_partitioner_cse_respects_mutation_boundaries (torch.ops.fsdp.copy_ there; Tensor.copy_ here)
    z0 = x.sin()
    z1 = x.sin()
    y = x + 1
    x.copy_(y)
    z2 = x.sin()
    z3 = x.sin()
    return z0, z1, z2, z3, l_**2


def sin_after_copy_(x: T, l_: T) -> object:
    # test_fsdp_set_input_mutation_applied_when_input_gets_no_gradients (Tensor.copy_ for fsdp.copy_)
    x.sin()
    y = x + 1
    x.copy_(y)
    z2 = x.sin()
    return z2, l_**2


def _plain_and_leaf(two: bool) -> tuple[object, ...]:
    return inp(torch.randn(3), two), inp(torch.randn(3), two, rg=True)


OUTPUTS = [
    *both("output_aliases_intermediate", view_and_intermediate, randn(4), writes=False, after_call=_write_first_output),
    *ported("return_value_duplication_tensor", doubled_twice, _inputs(randn(2), rg=True)),
    *ported("return_value_duplication_mixed_grad", plus_one_with_and_without_grad, _inputs(randn(2), rg=True)),
    *ported("return_value_duplication_scalar", first_of_doubled_twice, _inputs(randn(2), rg=True)),
    *ported("grad_mode_after_graph_break", no_grad_across_break, _inputs(randn(3), rg=True)),
    *both("requires_grad_guards_with_grad_mode1", branch_on_requires_grad, ones(2), writes=False),
    *ported("avoid_dupe_specialization_same", sum_of_pair, _pair(True, False)),
    *ported("avoid_dupe_specialization_same_train", sum_of_pair, _pair(True, True)),
    *ported("avoid_dupe_specialization_distinct_train", sum_of_pair, _pair(False, True)),
    *ported(
        "inductor_dynamic_shapes_broadcasting",
        view_rows,
        _inputs(randn(4), randn(8)),
        compile_kwargs={"dynamic": True},
    ),
    *ported("maybe_multiply_symint_train", add_scaled_by_int, _aranges_and(5), compile_kwargs={"dynamic": True}),
    *both("view_dtype_overload", view_as_int, ones(4), writes=False),
    Case(name="rp_compile_complex_conj", fn=mul_complex, make_inputs=lambda: _complex_view(False)),
    *ported("partitioner_cse_respects_mutation", sins_around_copy_, _plain_and_leaf),
    *ported("set_input_mutation_no_gradients", sin_after_copy_, _plain_and_leaf),
]


# ---------------------------------------------------------------------------------------------------------------
# autograd inside the program, randomness, fresh leaves and subclasses


def fresh_leaf(x: T) -> object:
    # test_intermediate_leaf_requires_grad (issue 90552)
    leaf = torch.ones(2, requires_grad=True)
    return leaf, leaf * 2


def backward_twice_inside(a: T, b: T) -> object:
    # test_gan_repro_trying_to_backward_through_the_graph_a_second_time (issue 97745)
    c = torch.ones(2, 2)
    d = torch.ones(2, 2)
    e = torch.matmul(a, c)
    g_loss = torch.abs(e - d).mean()
    g_loss.backward()  # type: ignore[no-untyped-call]
    fake_d_pred = torch.matmul(b, e.detach())
    d_loss = fake_d_pred.mean()
    d_loss.backward()  # type: ignore[no-untyped-call]
    return None


def backward_under_enable_grad(x: T) -> object:
    # test_with_on_graph_break_inst (the test calls it under no_grad: the `_no_grad` variant)
    with torch.enable_grad():
        a = torch.sin(x)
        torch._dynamo.graph_break()
        b = torch.sin(torch.cos(a))
        c = torch.sigmoid(b)
        c.sum().backward()  # type: ignore[no-untyped-call]
        return x.grad


def random_fill(tensor: T) -> object:
    # test_tensor_random (issue 121621)
    return tensor.random_(**{"from": -10, "to": 10})  # type: ignore[call-overload]


def uniform_fill(tensor: T) -> object:
    # test_tensor_uniform (issue 131019)
    return tensor.uniform_(**{"from": -10, "to": 10})  # type: ignore[arg-type]


def rng_state_replayed() -> object:
    # test_rng_state (1000 draws there; 10 here)
    state = torch.get_rng_state()
    before = torch.rand(10)
    torch.set_rng_state(state)
    after = torch.rand(10)
    return before, after


def subclass_made_then_viewed(x: T) -> object:
    # test_subclass_graph_output_repro (issue 118799; to_subclass is allow_in_graph there)
    tmp_subclass = TwoTensor(x.clone(), x.clone())  # type: ignore[no-untyped-call]
    return tmp_subclass.view(-1)


def sizes_from_values(result: T, split_sizes: T) -> object:
    # test_split_with_sizes_aot_autograd
    return torch.ops.aten.split_with_sizes(result, split_sizes.tolist())


def _split_inputs(two: bool) -> tuple[object, ...]:
    return inp(torch.randn(32), two, rg=True), inp(torch.tensor((7, 16, 9)), two)


AUTOGRAD = [
    *ported("intermediate_leaf_requires_grad", fresh_leaf, _inputs(arange_2x2)),
    *ported("gan_repro_backward_inside", backward_twice_inside, _inputs(randn(2, 2), randn(2, 2), rg=True)),
    *ported("with_on_graph_break_inst_train", backward_under_enable_grad, _inputs(randn(3), rg=True)),
    *ported("tensor_random", random_fill, _inputs(randn(2, 3))),
    *ported("tensor_uniform", uniform_fill, _inputs(randn(2, 3))),
    Case(name="rp_rng_state", fn=rng_state_replayed, make_inputs=lambda: ()),
    Case(name="rp_subclass_graph_output_repro", fn=subclass_made_then_viewed, make_inputs=lambda: (torch.ones(2),)),
    # (as written only: TwoTensor has no tolist())
    Case(name="rp_split_with_sizes_aot_autograd", fn=sizes_from_values, make_inputs=lambda: _split_inputs(False)),
]


# ---------------------------------------------------------------------------------------------------------------
# modules


class AccumulateLinear(torch.nn.Module):
    # test_modules
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x: T) -> T:
        res = torch.zeros(3, 3)
        for _ in self.modules():
            res += self.fc(x)
        return res


class BatchNormConv(torch.nn.Module):
    # test_batchnorm_e2e (BatchNorm2d(64) and a 64-channel conv over 32x32 there; 4 channels over 6x6 here)
    def __init__(self) -> None:
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)
        self.conv1 = torch.nn.Conv2d(4, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)

    def forward(self, x: T) -> object:
        x1 = self.bn(x)
        x2 = self.conv1(x1)
        return (torch.nn.functional.relu(x2),)


class SequentialAppendList(torch.nn.Sequential):
    # test_seq_append_list (from timm's vovnet: the list passed in is appended to and returned)
    def forward(self, x: T, concat_list: list[T]) -> object:  # type: ignore[override]
        for i, module in enumerate(self):
            concat_list.append(module(x) if i == 0 else module(concat_list[-1]))
        return torch.cat(concat_list, dim=1), concat_list


def _append_list() -> torch.nn.Module:
    return SequentialAppendList(torch.nn.Linear(10, 10), torch.nn.ReLU(), torch.nn.Linear(10, 10), torch.nn.ReLU())


def _x_and_list() -> tuple[object, ...]:
    x = torch.randn(4, 10)
    return x, [x]


def append_sin(a: list[T]) -> object:
    # test_list_aliasing
    a.append(torch.sin(a[0]))
    return a


class NumFromCounter(torch.nn.Module):
    # test_negative_floor_div_solve (a tensor attribute rebound and an int attribute advanced each call)
    def __init__(self) -> None:
        super().__init__()
        self.nums = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        self.t = 5

    def forward(self) -> T:
        self.num = self.nums[self.t // 12]
        self.t += 1
        return self.num


MODULES = [
    Case(name="rp_modules", fn=_seeded(AccumulateLinear), make_inputs=lambda: (torch.ones(3, 4),)),
    Case(
        name="rp_batchnorm_e2e",
        fn=_seeded(BatchNormConv),
        make_inputs=lambda: (torch.randn(2, 4, 6, 6, requires_grad=True),),
    ),
    Case(name="rp_seq_append_list", fn=_seeded(_append_list), make_inputs=_x_and_list),
    Case(name="rp_list_aliasing", fn=append_sin, make_inputs=lambda: ([torch.randn(10)],)),
    Case(name="rp_negative_floor_div_solve", fn=NumFromCounter(), make_inputs=lambda: ()),
    Case(
        name="rp_requires_grad_guards_with_grad_mode2",
        fn=_seeded(lambda: torch.nn.Linear(2, 2)),
        make_inputs=lambda: (torch.ones(2, requires_grad=True),),
    ),
]

CASES13 = OUT + SETITEM + INPLACE + DATA + OUTPUTS + AUTOGRAD + MODULES
