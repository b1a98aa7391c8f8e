"""Corpus, PyTorch's own programs, fourteenth part (held out: written from PyTorch's Inductor tests, not from ours):
test/inductor/test_torchinductor.py's programs that write or alias (in-place ops on inputs and their views, on
intermediates and their views, slice/select/as_strided scatters, index_put_ with and without accumulation, setitem by
index tensors, copy_ across dtypes and broadcasts, resize_as_, views returned as outputs, module buffers written in
forward, a module's plain tensor attribute written under no_grad, mutable ops declared by a schema) the sixth part
did not yet run, and test/inductor/test_inplacing_pass.py's programs (index_put of a live value, of a view of it, of
an input; custom ops writing outputs made by empty_like, several times, in a list, inside a custom Function).

Every case also runs on our inductor backend (`inductor=True`). Each program runs as written (`ti_<name>`) and, where
torch's TwoTensor runs it in eager, on TwoTensor inputs too (`ti_two_<name>`); a `_train` variant takes inputs that
require grad (leaves where the program only reads them, non-leaves where it writes them, as eager allows).

As written: the test's program, its inputs' dtypes, layouts (transposed, permuted, a view with an offset) and
requires_grad settings; sizes the test picks only to be large are smaller here (said where). A custom op the test
registers for CPU, CUDA and Meta is one `torch.library.custom_op` (or one schema with a CompositeExplicitAutograd
kernel) here.

Input: nothing. Output: `CASES14` for tests/pipeline/test_corpus_pytorch.py and test_dynamo_corpus.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus (prefix
`ti_`); each program names the PyTorch test it ports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch.autograd.function import FunctionCtx

from tests.pipeline.corpus import Case, inp, ported_as
from tests.pipeline.corpus_pytorch11 import write_then_read_fresh

T = torch.Tensor
Make = Callable[[bool], tuple[object, ...]]
New = Callable[[], object]
aten = torch.ops.aten

ported = ported_as("ti")


def _inputs(*makers: New, rg: bool = False, clone: bool = False, then: Sequence[Callable[[T], T] | None] = ()) -> Make:
    """Inputs made by `makers` (a tensor becomes a leaf, a TwoTensor of it where asked); with `rg` the floating ones
    require grad (and with `clone` are passed as a clone, a non-leaf the program may write); `then[i]` maps input i
    (a view the test takes of its tensor before the program)."""

    def make(two: bool) -> tuple[object, ...]:
        out: list[object] = []
        for i, m in enumerate(makers):
            v = m()
            if isinstance(v, torch.Tensor):
                grad = rg and (v.is_floating_point() or v.is_complex())
                v = inp(v, two, rg=grad)
                v = v.clone() if grad and clone else v
                view = then[i] if i < len(then) else None
                v = view(v) if view is not None else v
            out.append(v)
        return tuple(out)

    return make


def plain(name: str, fn: Callable[..., object], make: Make, **kwargs: object) -> Case:
    """The program as written only (torch's TwoTensor cannot run it in eager, said where)."""
    return Case(name=f"ti_{name}", fn=fn, make_inputs=lambda: make(False), inductor=True, **kwargs)  # type: ignore[arg-type]


def both(
    name: str,
    fn: Callable[..., object],
    *makers: New,
    then: Sequence[Callable[[T], T] | None] = (),
    train: bool = True,
    writes: bool = False,
    two: bool = True,
) -> list[Case]:
    """The program without grad and (`train`) with inputs that require grad (non-leaves where it `writes` them); on
    TwoTensor inputs too where `two`."""
    variants = [(name, _inputs(*makers, then=then))]
    if train:
        variants.append((f"{name}_train", _inputs(*makers, rg=True, clone=writes, then=then)))
    out: list[Case] = []
    for n, make in variants:
        out += ported(n, fn, make, inductor=True) if two else [plain(n, fn, make)]
    return out


def randn(*shape: int, dtype: torch.dtype = torch.float32) -> New:
    return lambda: torch.randn(*shape, dtype=dtype)


def ones(*shape: int) -> New:
    return lambda: torch.ones(*shape)


def longs(*values: int) -> New:
    return lambda: torch.tensor(values, dtype=torch.long)


# ---------------------------------------------------------------------------------------------------------------
# test_torchinductor.py: in-place ops on inputs, their results returned


def add_inplace(x: T, y: T) -> object:
    # test_add_inplace_permuted (a transposed input written by a broadcast operand) and test_inplace_add (the result
    # is the input itself)
    return x.add_(y)


def cat_then_add_inplace(x: T, y: T, z: T) -> object:
    # test_concat_add_inplace
    return torch.cat([x, y], dim=1).add_(z)


def complex_neg_and_double(x: T) -> object:
    # test_add_complex3: the input must not be written
    return torch.neg(x), torch.add(x, x)


def ceil_then_add_(x: T) -> object:
    # test_input_mutation5: an integer ceil (a copy) read before the input's write
    tmp = x.ceil()
    x.add_(10)
    return tmp


def copy_flipped_into_self(a: T) -> object:
    # test_fusing_write_into_disjoint_read
    return a.copy_(torch.flip(a, (0,)))


def cat_of_input_then_sin_(x: T) -> object:
    # test_cat_inplace: the cat keeps the values from before the write
    rt = torch.cat([x])
    x.sin_()
    return rt


def copy_broadcast_into_intermediate(x: T, y: T) -> object:
    # test_remove_noop_copy (fn): copy_ of a broadcast row into an intermediate, its result read
    x = x.cos()
    a = x.copy_(y)
    return a.sin()


def store_max_into_other_dtype(a: T, b: T) -> object:
    # test_remove_noop_copy (fn2): a half value stored into a float input
    abs_max = torch.abs(a).max()
    b[0] = abs_max.to(a.dtype)
    return b


def swap_columns_of_clone(x: T) -> object:
    # test_remove_noop_clone: setitem of a clone's view from its own columns
    y = x.clone().reshape(-1, 4)
    y[:, [2, 0]] = y[:, [0, 2]]
    return y + x


def resize_as_smaller(x: T, y: T) -> object:
    # test_inplace_resize_as (there x grows to y's size and its new elements are uninitialized memory; here y is
    # smaller, so every element read is defined)
    x.resize_as_(y)
    return x


def mul_then_conv(conv: torch.nn.Module) -> Callable[[T], object]:
    def fn(x: T) -> object:
        # test_inductor_layout_optimization_input_mutations: the input written before a conv reads it
        x.mul_(2)
        out: object = conv(x)
        return out

    return fn


def _conv() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Conv2d(3, 8, 1, stride=1, bias=False)


IN_PLACE = [
    *both(
        "add_inplace_permuted",
        add_inplace,
        ones(2, 4, 5, 3),
        randn(2, 5, 1, 3),
        writes=True,
        then=(lambda t: t.transpose(1, 2), None),
    ),  # fmt: skip
    *both("inplace_add", add_inplace, randn(4, 4), randn(4, 4), writes=True),
    *both("concat_add_inplace", cat_then_add_inplace, randn(2, 3, 4, 4), randn(2, 3, 4, 4), randn(2, 6, 4, 4)),
    *both("add_complex3", complex_neg_and_double, randn(41, dtype=torch.complex64)),
    *both("input_mutation5", ceil_then_add_, lambda: torch.zeros((), dtype=torch.int64), train=False),
    *both("fusing_write_into_disjoint_read", copy_flipped_into_self, lambda: torch.rand(20), writes=True),
    *both("cat_inplace", cat_of_input_then_sin_, ones(2), writes=True),
    *both("remove_noop_copy", copy_broadcast_into_intermediate, randn(8, 8), randn(8)),
    *both(
        "remove_noop_copy_dtype",
        store_max_into_other_dtype,
        randn(8, 8, dtype=torch.float16),
        randn(8),
        writes=True,
    ),
    *both("remove_noop_clone", swap_columns_of_clone, randn(2, 4)),
    *both("inplace_resize_as", resize_as_smaller, randn(4, 5), randn(2, 3), train=False),
    plain("layout_optimization_input_mutations", mul_then_conv(_conv()), _inputs(lambda: torch.rand(2, 3, 8, 8))),
    plain(
        "layout_optimization_input_mutations_train",
        mul_then_conv(_conv()),
        _inputs(lambda: torch.rand(2, 3, 8, 8), rg=True, clone=True),
    ),
]


# ---------------------------------------------------------------------------------------------------------------
# test_torchinductor.py: views of inputs and intermediates returned, written


def flat_view_of_slice(x: T) -> object:
    # test_views5: a view of an empty slice of the input
    y = x[:, 4:]
    return y.view(len(y), -1, 4)


def empty_slices_of_relu(x: T) -> object:
    # test_views6
    x = aten.relu(x)
    s = aten.slice(x, 0, 0, 9223372036854775807)
    s = aten.slice(s, 1, 0, 9223372036854775807)
    s = aten.slice(s, 3, 0, 0)
    return aten.view(s, [4, 2, -1])


def dtype_views_of_intermediates(x: T, y: T) -> object:
    # test_views7
    x = (x + 1).to(torch.float32)
    y = (y + 1).to(torch.int32)
    return x.view(torch.int32), y.view(torch.float32)


def unsqueeze_in_place(a: T) -> object:
    # test_unsqueeze_inplace: in-place unsqueeze of intermediates
    tmp1 = a + 1
    aten.unsqueeze_(tmp1, 2)
    tmp2 = aten.unsqueeze_(a + 1, 0) + 2
    return tmp1, tmp2


def mm_slice_plus(x: T, y: T) -> object:
    # test_aliased_buffer_reuse
    x = 2 * x
    y = 2 * y
    c = torch.cat([x, y], dim=-1)
    d = 1 + c
    m = torch.mm(d, d)
    return m[:, :2] + x


def detached_row(a: T) -> object:
    # test_view_detach
    return a[0].detach()


def slices_out_of_range(a: T) -> object:
    # test_slice1
    return a[:, :10, 0] + a[:, 10:, 0], a[:, -30:, 0], a[:, :-30, 0]


def strided_slices(a: T) -> object:
    # test_slice2
    return a[:-1, ::2, -1] + a[-1:, 1::2, -2], (a + 1)[:-1, ::2, -1]


def clamped_empty_slices(a: T) -> object:
    # test_slice4
    return (
        aten.slice.Tensor(a, 0, 2, 0, 1),
        aten.slice.Tensor(a, 0, a.shape[0], a.shape[0] + 10, 1),
        aten.slice.Tensor(a, 0, -20, 0, 1),
        aten.slice.Tensor(a, 0, -20, -16, 1),
    )


def split_parts(a: T) -> object:
    # test_split
    t = torch.split(a, 3, -1)
    return t[0], t[1], t[2], t[3]


def unbind_both_ways(a: T) -> object:
    # test_unbind
    return torch.unbind(a), torch.unbind(a, -1)


def expands(a: T) -> object:
    # test_expand
    return ((a + 1).expand(3, 4, 2, 3, 2) + 2, a.expand(2, 1, 2, 3, 2) + 2), a.expand(2, -1, 5, -1)


def narrows(x: T) -> object:
    # test_narrow (a 64x64 input there, 24x24 here)
    return aten.narrow(x, 1, 10, 8), aten.narrow(x + 2, 0, 10, 8) + 1, aten.narrow_copy(x, 1, 10, 8)


def as_strided_of_input(x: T) -> object:
    # test_as_strided (a 64x64 input there, 16x16 here)
    return aten.as_strided(x, (4, 4, 16), (4 * 16, 16, 1), 0), aten.as_strided(x + 1, (4, 4, 16), (64, 16, 1), 0) + 2


def permute_contiguous_view(x: T) -> object:
    # test_output_strides (the graph break between them there)
    y = x.permute(0, 2, 3, 1).contiguous()
    return y.view(-1, 4)


def chained_views(x: T) -> object:
    # test_output_strides (foo: no copy, the input's storage)
    return x[0:2:2].T[3:].squeeze(0)


def slice_of_offset_input(x: T) -> object:
    # test_adding_tensor_offsets: the input is a view at an offset
    return x[16:32]


def rows_but_last_contiguous(a: T) -> object:
    # test_dtype_sympy_expr
    return a[..., :-1, :].contiguous()


def complex_real_views(x: T) -> object:
    # test_reuse_buffers_with_aliasing (f)
    z = x + 1
    z = torch.view_as_complex(z)
    a = torch.view_as_real(z)
    out = a + 1
    return out, torch.view_as_real(z + 1)


def complex_real_views_twice(x: T) -> object:
    # test_reuse_buffers_with_aliasing (f2)
    z = x + 1
    z = torch.view_as_complex(z)
    z = torch.view_as_real(z)
    z = torch.view_as_complex(z)
    a = torch.view_as_real(z)
    out = a + 1
    return out, torch.view_as_real(z + 1)


def max_values_cat_round(a: T, b: T) -> object:
    # test_view_on_aliased (fn1)
    a = a.max(0).values
    c = torch.cat((a, b))
    c = c.round()
    b >= a[0]  # noqa: B015
    return c


def double_and_detached(x: T) -> object:
    # test_inductor_detach_view
    a = x * 2
    return a, a.detach()


def cat_view_slice_flip(u: T, u1: T) -> object:
    # test_flip_cat
    cat_1 = aten.cat.default([u, u1], 1)
    view = aten.view.default(cat_1, [4])
    slice_5 = aten.slice.Tensor(view, 0, 0, 3)
    return (aten.flip.default(slice_5, [0]),)


def strided_result_assigned(x: T) -> object:
    # test_exact_stride: an empty_strided tensor of the input's layout assigned whole
    result = x + x
    result_strided = torch.empty_strided(x.size(), x.stride())
    result_strided[:] = result
    return result_strided


def _half_columns(t: T) -> T:
    return torch.as_strided(t, (16, 8), t.stride())


def longformer_window(query: T, scores: T) -> object:
    # test_AllenaiLongformerBase_repro (window_overlap 256 and a 4x1024x12x64 query there; 2 and 1x8x2x4 here; the
    # chunk count by // of Python ints): a fresh tensor written by slices, then through a transposed view of it
    window_overlap = 2
    batch_size, seq_len, num_heads, _ = query.size()
    chunks_count = seq_len // window_overlap - 1
    diagonal = scores.new_zeros((batch_size * num_heads, chunks_count + 1, window_overlap, window_overlap * 2 + 1))
    diagonal[:, :-1, :, window_overlap:] = scores[:, :, :window_overlap, : window_overlap + 1]
    input_tensor = diagonal.view(batch_size, num_heads, seq_len, 2 * window_overlap + 1).transpose(2, 1)
    beginning = input_tensor[:, :window_overlap, :, : window_overlap + 1]
    input_tensor[:, :window_overlap, :, : window_overlap + 1] = torch.full_like(beginning, -float("inf"))
    return input_tensor


VIEWS = [
    *both("views5", flat_view_of_slice, randn(4, 4, 4, 4)),
    *both("views6", empty_slices_of_relu, randn(4, 2, 4, 4)),
    plain(
        "views7",  # TwoTensor: its view(dtype) of an int32 wrapper raises in eager
        dtype_views_of_intermediates,
        _inputs(lambda: torch.rand(2, 3), lambda: torch.randint(10, (2, 3), dtype=torch.int32)),
    ),
    *both("unsqueeze_inplace", unsqueeze_in_place, randn(2, 2, 2, 2)),
    *both("aliased_buffer_reuse", mm_slice_plus, randn(4, 2), randn(4, 2)),
    # test_slice_view_with_graph_break runs test_alias_inputs' program (a squeezed view of a fresh tensor, the tensor
    # written around a value read): part 11's, under this test's name
    plain("slice_view_with_graph_break", write_then_read_fresh, lambda two: ()),
    *both("view_detach", detached_row, randn(4, 4)),
    *both("slice1", slices_out_of_range, randn(2, 20, 2)),
    *both("slice2", strided_slices, randn(2, 20, 2)),
    *both("slice4", clamped_empty_slices, lambda: torch.rand(10)),
    *both("split", split_parts, randn(2, 2, 10)),
    *both("unbind", unbind_both_ways, randn(4, 4, 4)),
    *both("expand", expands, randn(2, 1, 2)),
    *both("narrow", narrows, randn(24, 24)),
    *both("as_strided", as_strided_of_input, randn(16, 16)),
    *both("output_strides", permute_contiguous_view, lambda: torch.rand(4, 4, 4, 4)),
    *both("output_strides_views", chained_views, lambda: torch.rand(4, 4, 4, 4)),
    *both("adding_tensor_offsets", slice_of_offset_input, randn(256), then=(lambda t: t[128:],)),
    *both("dtype_sympy_expr", rows_but_last_contiguous, randn(1, 2, 16, 4)),
    *both("reuse_buffers_with_aliasing", complex_real_views, lambda: torch.zeros(4, 2)),
    *both("reuse_buffers_with_aliasing2", complex_real_views_twice, lambda: torch.zeros(4, 2)),
    *both("view_on_aliased", max_values_cat_round, lambda: torch.tensor([[4.0]]), lambda: torch.tensor([5.0])),
    *both("inductor_detach_view", double_and_detached, ones(2, 2)),
    *both("flip_cat", cat_view_slice_flip, randn(2, 1), randn(2, 1)),
    *both("exact_stride", strided_result_assigned, randn(16, 16), then=(_half_columns,)),
    *both("longformer_window", longformer_window, randn(1, 8, 2, 4), randn(2, 3, 4, 5)),
]


# ---------------------------------------------------------------------------------------------------------------
# test_torchinductor.py: scatters, index_put, setitem by index tensors


def gather_then_scatter_add_(node_feat: T, edge_index: T) -> object:
    # test_gather_scatter
    src = node_feat[edge_index[0]]
    dst = node_feat[edge_index[1]]
    edge_feat = src - dst + 1
    new_node_feat = torch.zeros_like(node_feat)
    new_node_feat.scatter_add_(0, edge_index[1].unsqueeze(-1).expand_as(edge_feat), edge_feat)
    return new_node_feat


def fill_functional(x: T) -> object:
    # test_fill1
    tmp = torch.ones_like(x)
    return tmp, aten.fill.Scalar(tmp, 2)


def index_put_accumulate(a: T, b: T, c: T) -> object:
    # test_index_put2 (100x256x7x7 there; 10x3x2 here)
    return torch.index_put(a, [b], c, True)


def index_put_by_mask(a: T, b: T, c: T) -> object:
    # test_index_put4: a mask that does not broadcast with a
    return torch.index_put(a, [b], c)


def index_put_mask_into_clone(accumulate: bool) -> Callable[..., object]:
    def fn(a: T, b: T, c: T) -> object:
        # test_index_put_fallback1
        a = a.clone()
        aten.index_put_(a, [b], c, accumulate)
        return a

    return fn


def index_put_then_index(ind: T, x: T, src: T) -> object:
    # test_index_put_index
    y = aten.index_put.default(x, [ind], src)
    return aten.index.Tensor(y, [ind])


def index_put_input_then_expand(x: T, idx: T) -> object:
    # test_index_put_reinplace: the input written, an expand of it returned
    src = torch.ones(idx.size(0))
    x.index_put_((idx,), src)
    return x.expand((2, x.shape[0]))


def index_put_beside_input(x: T, idx: T) -> object:
    # test_index_put_failed_reinplace: the input returned beside its index_put
    src = torch.ones(idx.size(0))
    y = x.index_put((idx,), src)
    return x, y


def index_put_accumulate_4d(a: T, z: T, b: T, idx0: T, idx1: T) -> object:
    # TritonCodeGenTests.test_optimize_indexing_assert (its index_put_ program; 1x32x32x4 and 33 rows there,
    # 1x8x8x4 and 9 rows here)
    idx2 = torch.arange(a.shape[-1])
    a.index_put_((z, idx0, idx1, idx2), b, accumulate=True)
    return a


def index_put_slice(version: int) -> Callable[[T], object]:
    def fn(a: T) -> object:
        # test_tensor_index_put_slice: `a[index] = zeros_like(a[index])` by index tensors made in the program
        x = torch.tensor([1, 2], dtype=torch.int32)
        y = torch.tensor([2, 3], dtype=torch.int32)
        xx = torch.tensor([1, 2]).view(1, 2)
        yy = torch.tensor([1, 2, 3]).view(3, 1)
        index: tuple[T | slice, ...] = {
            0: (x, y),
            2: (slice(None), x, y, slice(None)),
            4: (slice(None), x, slice(None), y, slice(None)),
            5: (xx, yy),
            9: (slice(None), xx, slice(None), yy),
        }[version]
        a[index] = torch.zeros_like(a[index])
        return a

    return fn


def _arange_5d() -> T:
    return torch.arange(3 * 4 * 5 * 6 * 7, dtype=torch.int32).view(3, 4, 5, 6, 7)


def setitem_mask_of_view(x: T, mask: T) -> object:
    # TritonCodeGenTests.test_ctr_not_moved_to_cuda_when_used_in_index_put (512x19 there, 32x5 here)
    x[:, mask] = -float("inf")
    return x


def _permuted_window(t: T) -> T:
    return t.permute(1, 0).view(-1, 8, 4)[:, :, 1:]


def as_strided_scatter_half(a: T, b: T) -> object:
    # test_as_strided_scatter (10x1024 there, 4x16 here)
    return aten.as_strided_scatter(
        a * 8 + 10, b * 2 - 4, size=(a.shape[0], a.shape[1] // 2), stride=(a.shape[1], 2), storage_offset=0
    )


def select_scatters(x: T, a: T, b: T) -> object:
    # test_select_scatter (8x197x38 there, 2x5x3 here)
    return aten.select_scatter(x, a, 1, 0), aten.select_scatter(x, b, 0, 1)


def slice_scatters(x: T, a: T) -> object:
    # test_slice_scatter (4x8x100 there, 2x3x30 here)
    return aten.slice_scatter(x, a, 2, 5, -5), aten.slice_scatter(x, a[:, :, :10], 2, 5, -5, 2)


def slice_scatters_stepped(a: T, b: T, c: T) -> object:
    # test_slice_scatter2, test_slice_scatter3, test_slice_scatter4
    return (
        aten.slice_scatter(b, b * 2, 0, 0, 9223372036854775807),
        aten.slice_scatter.default(a, a[:, :2] + 1, 1, 1, 9223372036854775807, 2),
        aten.slice_scatter.default(c, c[:, :3] - 1, 1, 2, 9223372036854775807, 3),
    )


def slice_scatters_empty(a: T, b: T) -> object:
    # test_slice_scatter5
    return (
        aten.slice_scatter.default(a, b, 0, 2, 0, 1),
        aten.slice_scatter.default(a, b, 0, a.shape[0], a.shape[0] + 10, 1),
        aten.slice_scatter.default(a, b, 0, -20, 0, 1),
        aten.slice_scatter.default(a, b, 0, -20, -16, 1),
    )


def scatter_into_clone(reduce: str) -> Callable[..., object]:
    def fn(a: T, index: T, b: T) -> object:
        # test_scatter5
        a = a.clone()
        a.scatter_(0, index, b, reduce=reduce)
        a1 = a + 1.0
        a1.scatter_(0, index, b, reduce=reduce)
        return a, a1

    return fn


def scatter_reduce_into_clone(reduce: str) -> Callable[..., object]:
    def fn(a: T, index: T, b: T) -> object:
        # test_scatter_reduce3
        a = a.clone()
        a.scatter_reduce_(0, index, b, reduce=reduce)
        a1 = a + 1.0
        a1.scatter_reduce_(0, index, b, reduce=reduce)
        return a, a1

    return fn


def masked_scatter_of(value: T, mask: T, source: T) -> object:
    # test_masked_scatter
    return torch.masked_scatter(value, mask, source)


def diagonal_copies(x: T) -> object:
    # test_diagonal_copy
    return torch.diagonal_copy(x)


def index_add_halved(tensor: T, index: T, source: T) -> object:
    # test_mutations_loop_fusion
    return tensor.index_add(0, index, source, alpha=2.0) / 2


def _mask_8x3() -> T:
    return torch.arange(24).view(8, 3) % 3 != 1


def _index_rows() -> T:
    return torch.tensor([3, 0, 7, 3, 9, 1, 3, 0, 5, 9, 2, 2])


def _scatter_index() -> T:
    return torch.tensor([[1], [2], [3]])


SCATTERS = [
    *both("gather_scatter", gather_then_scatter_add_, randn(16, 8), lambda: torch.randint(0, 16, (2, 40))),
    *both("fill1", fill_functional, randn(16, 16)),
    *both("index_put2", index_put_accumulate, randn(10, 3, 2), _index_rows, randn(12, 3, 2)),
    *both(
        "index_put4", index_put_by_mask, lambda: torch.rand(8, 2), lambda: torch.rand(8) > 0.5, lambda: torch.randn(())
    ),
    *both(
        "index_put_fallback1",
        index_put_mask_into_clone(False),
        randn(3),
        lambda: torch.tensor([True, True, False]),
        randn(2),
    ),  # fmt: skip
    *both(
        "index_put_fallback1_acc",
        index_put_mask_into_clone(True),
        randn(3),
        lambda: torch.tensor([True, True, False]),
        randn(2),
    ),  # fmt: skip
    *both("index_put_index", index_put_then_index, longs(1), randn(8, 4), randn(4)),
    *both("index_put_reinplace", index_put_input_then_expand, randn(64), lambda: torch.arange(10), writes=True),
    *both("index_put_failed_reinplace", index_put_beside_input, randn(64), lambda: torch.arange(10)),
    *both(
        "index_put_accumulate_4d",
        index_put_accumulate_4d,
        randn(1, 8, 8, 4),
        lambda: torch.zeros((), dtype=torch.int64),
        randn(9, 1),
        lambda: torch.randint(8, (9,)).view(9, 1, 1),
        lambda: torch.randint(8, (9,)).view(9, 1),
        writes=True,
    ),
    *[c for v in (0, 2, 4, 5, 9) for c in both(f"tensor_index_put_slice{v}", index_put_slice(v), _arange_5d)],
    *both(
        "index_put_mask_of_view", setitem_mask_of_view, randn(32, 5), _mask_8x3, then=(_permuted_window,), writes=True
    ),  # fmt: skip
    *both("as_strided_scatter", as_strided_scatter_half, randn(4, 16), randn(4, 8)),
    *both("select_scatter", select_scatters, randn(2, 5, 3), randn(2, 3), randn(5, 3)),
    *both("slice_scatter", slice_scatters, randn(2, 3, 30), randn(2, 3, 20)),
    *both("slice_scatter_steps", slice_scatters_stepped, randn(1, 4), randn(4, 5, 6), randn(1, 9)),
    *both("slice_scatter5", slice_scatters_empty, lambda: torch.arange(10, dtype=torch.float), lambda: torch.empty(0)),
    *both("scatter5_add", scatter_into_clone("add"), ones(4, 5), _scatter_index, randn(4, 5), train=False),
    *both("scatter5_multiply", scatter_into_clone("multiply"), ones(4, 5), _scatter_index, randn(4, 5), train=False),
    *both("scatter_reduce3_sum", scatter_reduce_into_clone("sum"), ones(4, 5), _scatter_index, randn(4, 5)),
    *both("scatter_reduce3_prod", scatter_reduce_into_clone("prod"), ones(4, 5), _scatter_index, randn(4, 5)),
    plain(
        "masked_scatter",  # TwoTensor: masked_scatter's output size comes from the mask's values
        masked_scatter_of,
        _inputs(randn(10, 10), lambda: torch.arange(100).view(10, 10) % 3 == 0, randn(34)),
    ),
    *both("diagonal_copy", diagonal_copies, randn(2, 3)),
    *both(
        "mutations_loop_fusion",
        index_add_halved,
        lambda: torch.rand(1, dtype=torch.double),
        longs(0),
        lambda: torch.rand(1, dtype=torch.double),
    ),  # fmt: skip
]


# ---------------------------------------------------------------------------------------------------------------
# test_torchinductor.py: modules whose buffers (or plain tensor attributes) the forward writes


class BufferAddOne(torch.nn.Module):
    # test_buffer_copied_in_graph
    def __init__(self) -> None:
        super().__init__()
        self.buf = torch.nn.Buffer(torch.zeros(1))
        self.w1 = torch.nn.Parameter(torch.zeros(1))
        self.w2 = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x: T) -> T:
        self.buf.add_(1)
        return (self.w1 * x * self.w2).sum() + self.buf.sum()


class BufferAddOneMatmul(torch.nn.Module):
    # test_buffer_copied_in_graph_with_different_shapes
    def __init__(self) -> None:
        super().__init__()
        self.buf = torch.nn.Buffer(torch.ones(4, 4))
        self.w = torch.nn.Parameter(torch.tensor([[4.0, 5], [1, 2], [6, 7], [8, 9]]))

    def forward(self, x: T) -> T:
        self.buf.add_(1)
        return (self.w @ x).sum() + self.buf.sum()


class KvCache(torch.nn.Module):
    # test_slice_scatter_reinplace (a 56x384x8x64 cache and a 1x32x8x64 input there; 4x16x2x8 and 1x4x2x8 here): a
    # plain tensor attribute (not a buffer) written under no_grad, then read
    def __init__(self) -> None:
        super().__init__()
        self.linear1 = torch.nn.Linear(8, 8, bias=False)
        self.cache_k = torch.zeros((4, 16, 2, 8))

    def forward(self, x: T, start_pos: int) -> T:
        bsz, seqlen, _, _ = x.shape
        xk = self.linear1(x)
        with torch.no_grad():
            self.cache_k[:bsz, start_pos : start_pos + seqlen] = xk
        keys = self.cache_k[:bsz, : start_pos + seqlen]
        return torch.matmul(xk.transpose(1, 2), keys.transpose(1, 2).transpose(2, 3))


def _seeded(make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    torch.manual_seed(0)
    return make()


def _clone_of_leaf(*shape: int) -> Callable[[], tuple[object, ...]]:
    return lambda: (torch.ones(*shape, requires_grad=True).clone(),)


MODULES = [
    Case(
        name="ti_buffer_copied_in_graph_train", fn=_seeded(BufferAddOne), make_inputs=_clone_of_leaf(1), inductor=True
    ),
    Case(
        name="ti_buffer_copied_in_graph_with_different_shapes_train",
        fn=_seeded(BufferAddOneMatmul),
        make_inputs=_clone_of_leaf(2, 4),
        inductor=True,
    ),
    Case(
        name="ti_buffer_batch_norm_train",  # test_buffer_batch_norm (BatchNorm1d(100) on 20x100 there; 8 on 4x8 here)
        fn=_seeded(lambda: torch.nn.BatchNorm1d(8)),
        make_inputs=_clone_of_leaf(4, 8),
        inductor=True,
    ),
    Case(
        name="ti_slice_scatter_reinplace",
        fn=_seeded(KvCache),
        make_inputs=lambda: (torch.randn(1, 4, 2, 8), 1),
        inductor=True,
    ),  # fmt: skip
]


# ---------------------------------------------------------------------------------------------------------------
# test_torchinductor.py: mutable ops declared by a schema (test_fallback_mutable_op_*, test_mutable_custom_op_*)

_LIB = torch.library.Library("corpus14", "DEF")  # type: ignore[no-untyped-call]
for _schema in (
    "inplace_(Tensor(a!) a, Tensor[] b, SymInt c, *, Tensor(b!)? d, SymInt e=2) -> ()",
    "inplace_ret(Tensor(a!) a, Tensor[] b, SymInt c, *, Tensor(b!)? d, SymInt e=2) -> Tensor",
    "inplace_opt(Tensor a, Tensor(b!)? b) -> ()",
    "inplace_list(Tensor a, Tensor(a!)[] b) -> ()",
    "copy_(Tensor(a!) dst, Tensor src) -> ()",
):
    _LIB.define(_schema)  # type: ignore[no-untyped-call]


def _add_scaled(a: T, b: Sequence[T], c: int, d: T | None, e: int = 2) -> None:
    a.add_(b[0] * c * e)
    if d is not None:
        d.add_(b[1])


def _add_scaled_returning(a: T, b: Sequence[T], c: int, d: T | None, e: int = 2) -> T:
    _add_scaled(a, b, c, d, e)
    return b[0] + b[1]


def _add_one_if_given(a: T, b: T | None) -> None:
    if b is not None:
        b.add_(1)


def _add_to_each(a: T, b: Sequence[T]) -> None:
    for bi in b:
        bi.add_(a)


def _copy_into(dst: T, src: T) -> None:
    dst.copy_(src)


for _name, _impl in (
    ("inplace_", _add_scaled),
    ("inplace_ret", _add_scaled_returning),
    ("inplace_opt", _add_one_if_given),
    ("inplace_list", _add_to_each),
    ("copy_", _copy_into),
):
    _LIB.impl(_name, _impl, "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]


def mutable_op_on_clones(a: T, b1: T, b2: T, c: int, d: T) -> object:
    # test_fallback_mutable_op_basic: the op writes clones, copied back into the inputs
    a_ = a.clone()
    d_ = d.clone()
    torch.ops.corpus14.inplace_(a_, (b1, b2), c, d=d_)
    a.copy_(a_)
    d.copy_(d_)
    return ()


def mutable_op_on_clones_returning(a: T, b0: T, b1: T, c: int, d: T) -> object:
    # test_fallback_mutable_op_with_return
    a_ = a.clone()
    d_ = d.clone()
    res = torch.ops.corpus14.inplace_ret(a_, (b0, b1), c, d=d_)
    a.copy_(a_)
    d.copy_(d_)
    return (res,)


def mutable_op_writing_inputs(a: T, b1: T, b2: T, c: int, d: T) -> object:
    # test_fallback_mutable_op_basic's op, on the inputs themselves
    torch.ops.corpus14.inplace_(a, (b1, b2), c, d=d)
    return a + d


def mutable_op_none_written(a: T) -> object:
    # test_fallback_mutable_op_no_mutated_tensors
    torch.ops.corpus14.inplace_opt(a, None)
    return ()


def mutable_op_list_written(a: T, b0: T, b1: T) -> object:
    # test_fallback_mutable_op_list
    torch.ops.corpus14.inplace_list(a, [b0, b1])
    return None


def mutable_copy_into_full(x: T) -> object:
    # test_mutable_custom_op_fixed_layout
    full = torch.full([3], 7.0)
    torch.ops.corpus14.copy_.default(full, x)
    return torch.mul(full, full)


def _vec(*values: float) -> New:
    return lambda: torch.tensor(values)


_A, _B0, _B1, _D = _vec(0.0, 1.0, 2.0), _vec(2.0, 3.0, 5.0), _vec(1.0, 4.0, 6.0), _vec(2.0, 1.0, 0.0)

MUTABLE_OPS = [
    *both("fallback_mutable_op_basic", mutable_op_on_clones, _A, _B0, _B1, lambda: 4, _D, train=False),
    *both("fallback_mutable_op_with_return", mutable_op_on_clones_returning, _A, _B0, _B1, lambda: 4, _D, train=False),
    *both("fallback_mutable_op_on_inputs", mutable_op_writing_inputs, _A, _B0, _B1, lambda: 4, _D, train=False),
    *both("fallback_mutable_op_no_mutated_tensors", mutable_op_none_written, _A, train=False),
    *both("fallback_mutable_op_list", mutable_op_list_written, _A, _B0, _B1, train=False),
    *both("mutable_custom_op_fixed_layout", mutable_copy_into_full, lambda: torch.arange(3, dtype=torch.float)),
]


# ---------------------------------------------------------------------------------------------------------------
# test_inplacing_pass.py: index_put of live values, custom ops writing fresh outputs

CONST = torch.tensor(0.0)


def index_put_of_live(x: T, y: T) -> object:
    # test_dont_modify_live: the value before the index_put is returned too
    x = x.cos()
    x2 = x.index_put((y,), CONST)
    return x2, x


def index_put_of_alias_of_live(x: T, y: T) -> object:
    # test_dont_modify_view_of_live
    x = x.cos()
    x2 = aten.alias(x)
    x2 = x2.index_put((y,), CONST)
    return x2 + x.cos()


def index_put_of_input(x: T, y: T) -> object:
    # test_dont_modify_input
    return x.index_put((y,), CONST)


def index_put_of_inner(x: T, y: T) -> object:
    # test_should_modify_inner
    x = x.cos()
    return x.index_put((y,), CONST)


def index_put_into_input(x: T, y: T) -> object:
    # test_should_modify_input
    return x.index_put_((y,), CONST)


@torch.library.custom_op("corpus14::sin_into", mutates_args={"result"})
def sin_into(x: T, result: T) -> None:
    result.copy_(x.sin())


@sin_into.register_fake
def _sin_into_fake(x: T, result: T) -> None:
    return None


@torch.library.custom_op("corpus14::sin_cos_into", mutates_args={"out_sin", "out_cos"})
def sin_cos_into(x: T, out_sin: T, out_cos: T) -> None:
    out_sin.copy_(x.sin())
    out_cos.copy_(x.cos())


@sin_cos_into.register_fake
def _sin_cos_into_fake(x: T, out_sin: T, out_cos: T) -> None:
    return None


@torch.library.custom_op("corpus14::add_two_three", mutates_args={"y"})
def add_two_three(y: list[T]) -> None:
    y[0].add_(2)
    y[1].add_(3)


@add_two_three.register_fake
def _add_two_three_fake(y: list[T]) -> None:
    return None


def sin_cos_into_fresh(x: T) -> object:
    # test_multi_output_intermediate
    out1 = torch.empty_like(x)
    out2 = torch.empty_like(x)
    sin_cos_into(x, out1, out2)
    return out1, out2, x**2


def sin_thrice_into_input(x: T, out: T) -> object:
    # test_multiple_mutations
    sin_into(x, out)
    sin_into(out, out)
    sin_into(out, out)
    return out


def sin_thrice_into_fresh(x: T) -> object:
    # test_multiple_intermediate
    out = torch.empty_like(x)
    sin_into(x, out)
    sin_into(out, out)
    sin_into(out, out)
    return out


def list_of_rows_written(b: T) -> object:
    # test_lists_functionalize_v2 / test_lists_old_functionalize
    add_two_three([b[0], b[1]])
    return None


class SinIntoFresh(torch.autograd.Function):
    # test_partitioner_recomputes_factory (ones_like, the custom op)
    @staticmethod
    def forward(ctx: FunctionCtx, x: T) -> T:
        out = torch.ones_like(x)
        sin_into(x, out)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: FunctionCtx, grad: T) -> T:
        (saved,) = ctx.saved_tensors  # type: ignore[attr-defined]
        out = torch.ones_like(grad)
        sin_into(saved, out)
        return out


def sin_function(x: T) -> object:
    return SinIntoFresh.apply(x)  # type: ignore[no-untyped-call]


def _x_and_int_ones() -> tuple[New, New]:
    return randn(4), lambda: torch.ones(2, dtype=torch.int)


INPLACING = [
    *both("reinplace_dont_modify_live", index_put_of_live, *_x_and_int_ones()),
    *both("reinplace_dont_modify_view_of_live", index_put_of_alias_of_live, *_x_and_int_ones()),
    *both("reinplace_dont_modify_input", index_put_of_input, *_x_and_int_ones()),
    *both("reinplace_should_modify_inner", index_put_of_inner, *_x_and_int_ones()),
    *both("reinplace_should_modify_input", index_put_into_input, *_x_and_int_ones(), writes=True),
    *both("reinplace_multi_output_intermediate", sin_cos_into_fresh, randn(3)),
    *both("reinplace_multiple_mutations", sin_thrice_into_input, randn(3), randn(3), train=False),
    *both("reinplace_multiple_intermediate", sin_thrice_into_fresh, randn(3), train=False),
    *both("reinplace_lists", list_of_rows_written, lambda: torch.tensor([0.3, 0.4]), train=False),
    plain("reinplace_partitioner_recomputes_factory_train", sin_function, _inputs(randn(3), rg=True)),
]

CASES14 = IN_PLACE + VIEWS + SCATTERS + MODULES + MUTABLE_OPS + INPLACING
