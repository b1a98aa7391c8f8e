"""Corpus, PyTorch's own programs, twelfth part (held out: written from PyTorch's test/test_view_ops.py, not from ours):
TestViewOps' views of one tensor written through and read back (diagonal, select, unbind, expand, narrow, permute,
transpose and its in-place forms, t/T/H/mT/mH, unfold, squeeze/unsqueeze and their in-place forms, as_strided and
as_strided_, view, view_as, reshape's view-or-copy, flatten, basic and advanced indexing, chunk, split, movedim,
view(dtype), view_as_real/complex, real/imag, conj and its negative bit, tensor_split/hsplit/vsplit/dsplit, the
*_copy ops and their out= forms) and TestOldViewOps' shape programs (ravel, expand, empty views, reshape, narrow,
split/chunk sizes, resize_/resize_as_ with memory formats, broadcast_tensors/broadcast_to, view over non-contiguous
strides, tensor_split, set_ with new strides). Each program runs twice: as written (`vo_<name>`), and on torch's
TwoTensor (`vo_two_<name>`: each tensor input a TwoTensor of it and its clone, with its requires_grad). A `_train`
variant takes inputs that require grad: leaves where the program only reads them, non-leaves (a clone of a leaf)
where it writes through their views, as eager allows.

As written: the test's tensor (its shape, dtype, where it is a view of another), handed to the program as its input
where the test makes it first (the program writes the input through the view the test takes; the oracle compares the
input after the call, the output's `_base` and its storage); sizes the test picks only to be large (40x30, 456x789,
5x5x5x5) are smaller here (said where). Programs the test expects to raise are `eager_raises` cases.

Input: nothing. Output: `CASES12` for tests/pipeline/test_corpus_pytorch.py and test_dynamo_corpus.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus (prefix
`vo_`); each program names the PyTorch test it ports.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from tests.pipeline.corpus import Case, inp, ported_as

T = torch.Tensor
Make = Callable[[bool], tuple[object, ...]]
New = Callable[[], T]

ported = ported_as("vo")


def _inputs(*makers: New, rg: bool = False, then: Callable[[T], T] | None = None) -> Make:
    """Inputs made by `makers` (each a leaf); with `rg`, leaves that require grad. `then` maps each (a view the
    test takes of its tensor before the program)."""

    def make(two: bool) -> tuple[object, ...]:
        made = [inp(m(), two, rg=rg) for m in makers]
        return tuple(then(t) if then else t for t in made)

    return make


def _nonleaf(*makers: New, then: Callable[[T], T] | None = None) -> Make:
    """Inputs that require grad and are not leaves (a clone of a leaf): the program may write them through views."""
    return _inputs(*makers, rg=True, then=lambda t: then(t.clone()) if then else t.clone())


def plain(name: str, fn: Callable[..., object], make: Make, **kwargs: object) -> Case:
    """The program as written only: torch's TwoTensor cannot run it in eager (its conj views lose the conjugate bit
    on the wrapper; its members' strides disagree after an expand or reshape of a non-contiguous view; a view of it
    laid out anew in place, in training, indexes the wrapper's old sizes)."""
    return Case(name=f"vo_{name}", fn=fn, make_inputs=lambda: make(False), **kwargs)  # type: ignore[arg-type]


def written(
    name: str, fn: Callable[..., object], *makers: New, raises_train: bool = False, two_train: bool = True
) -> list[Case]:
    """The program on plain inputs, and (`_train`) on non-leaf inputs that require grad (as written only where not
    `two_train`)."""
    train = f"{name}_train"
    return [
        *ported(name, fn, _inputs(*makers)),
        *(
            ported(train, fn, _nonleaf(*makers), eager_raises=raises_train)
            if two_train
            else [plain(train, fn, _nonleaf(*makers), eager_raises=raises_train)]
        ),
    ]


def ones(*shape: int) -> New:
    return lambda: torch.ones(*shape)


def zeros(*shape: int) -> New:
    return lambda: torch.zeros(*shape)


def randn(*shape: int, dtype: torch.dtype = torch.float32) -> New:
    return lambda: torch.randn(*shape, dtype=dtype)


# ---------------------------------------------------------------------------------------------------------------
# TestViewOps: a view of the input, written through, and returned


def conj_of_real(t: T) -> object:
    # test_conj_self: a real tensor's conj() is the tensor itself
    return t.conj()


def view_dtype_same_size(a: T) -> object:
    # test_view_dtype_new (a dtype of the same element size: the same sizes and strides)
    return a.view(torch.int32)


def view_dtype_smaller(a: T) -> object:
    # test_view_dtype_new (a smaller element: the last dimension twice as long)
    return a.view(torch.float16)


def view_dtype_of_offset(a: T) -> object:
    # test_view_dtype_upsize_errors: eager raises (storage_offset not divisible by the size ratio)
    return a[:, :, 1:].view(torch.float64)


def view_dtype_drops_grad(t: T) -> object:
    # test_view_dtype_new: requires_grad is dropped for floating point casts
    return t.view(torch.float16), t * 2


def as_complex(t: T) -> object:
    # test_view_as_complex
    return torch.view_as_complex(t)


def as_complex_written(t: T) -> object:
    # test_view_as_complex's view, written through (the input's pairs rotate)
    c = torch.view_as_complex(t)
    c.mul_(1j)
    return c


def as_complex_of_empty(x: T) -> object:
    # test_view_as_complex (a tensor with zero elements, reshaped to (0, 2))
    y = x.reshape(0, 2)
    return torch.view_as_complex(y)


def as_real(t: T) -> object:
    # test_view_as_real
    return torch.view_as_real(t)


def as_real_imag_zeroed(t: T) -> object:
    # test_view_as_real's view, its imaginary parts written
    r = torch.view_as_real(t)
    r[..., 1].zero_()
    return r


def hsplit_then_write(t: T) -> object:
    # test_view_tensor_hsplit
    parts = torch.hsplit(t, 2)
    t[2, 2, 2] = 7
    return parts[1]


def vsplit_then_write(t: T) -> object:
    # test_view_tensor_vsplit
    parts = torch.vsplit(t, 2)
    t[2, 2, 2] = 7
    return parts


def dsplit_then_write(t: T) -> object:
    # test_view_tensor_dsplit
    parts = torch.dsplit(t, 2)
    t[2, 2, 2] = 7
    return parts[1][2, 2, 0]


def tensor_split_both_dims(a: T) -> object:
    # test_view_tensor_split (a 40x30 tensor in 7 sections there; 10x9 in 4 here)
    return a.tensor_split(4, 0) + a.tensor_split(4, 1)


def real_imag_of_transposed(t: T) -> object:
    # test_real_imag_view (its non-contiguous input)
    u = t.T
    return u.real, u.imag


def real_imag_offset(a: T) -> object:
    # test_real_imag_view: the storage offset
    return a[5:].real, a.real[5:], a[5:].imag


def imag_of_real(t: T) -> object:
    # test_imag_noncomplex: eager raises
    return torch.imag(t)


def conj_and_its_imag(t: T) -> object:
    # test_conj_imag_view: the conj view, and its imag (a view with the negative bit set)
    v = t.conj()
    return v, v.imag, v.is_conj(), v.imag.is_neg()


def conj_shared_add_(a: T) -> object:
    # test_conj_view_with_shared_memory: a written from its own conj view
    b = a.conj()
    r = torch.add(a, b)
    a.add_(b)
    return r, b


def conj_add_out(a: T) -> object:
    # test_conj_view_with_shared_memory: out= the base of both operands
    b = a.conj()
    c = a.conj()
    torch.add(b, c, out=a)
    return a, b


def conj_view_add_(a: T) -> object:
    # test_conj_view_with_shared_memory: written through a conj view
    b = a.conj()
    c = a.conj()
    b.add_(c)
    return b


def set_real_imag(x: T, new_real: T, new_imag: T) -> object:
    # test_set_real_imag
    x.real = new_real
    x.imag = new_imag
    return x.real, x.imag


def diagonal_written(t: T) -> object:
    # test_diagonal_view
    v = torch.diagonal(t)
    v[0] = 0
    return v


def diagonal_offset_written(t: T) -> object:
    # test_diagonal_view (offset=1, dim1=1, dim2=2)
    v = torch.diagonal(t, offset=1, dim1=1, dim2=2)
    v[0, 0] = 0
    return v


def select_written(t: T) -> object:
    # test_select_view
    v = t.select(0, 2)
    v[0] = 0
    return v


def unbind_written(t: T) -> object:
    # test_unbind_view (eager raises with grad: a view of several written in place)
    tup = torch.unbind(t)
    for idx, v in enumerate(tup):
        v[0] = idx + 1
    return tup


def unbind_all(stacked: T) -> object:
    # test_unbind (a 3x10x10 input there, 3x4x4 here)
    x, y, z = stacked.unbind()
    return x, y, z


def expand_written(t: T) -> object:
    # test_expand_view: one element of the expanded view
    v = t.expand(5, 5)
    v[2, 2] = 0
    return v


def expand_as_written(t: T, e: T) -> object:
    # test_expand_as_view
    v = t.expand_as(e)
    v[2, 2] = 0
    return v


def narrow_written(t: T) -> object:
    # test_narrow_view
    v = torch.narrow(t, 1, 2, 2)
    v[0, 0] = 0
    return v


def permute_written(t: T) -> object:
    # test_permute_view
    v = t.permute(1, 0)
    v[0, 1] = 0
    return v


def transposes_written(a: T, b: T, c: T) -> object:
    # test_transpose_view (swapdims, swapaxes, transpose: one input each)
    views = (torch.swapdims(a, 0, 1), torch.swapaxes(b, 0, 1), torch.transpose(c, 0, 1))
    for v in views:
        v[0, 1] = 0
    return views


def inplace_transposes_of_views(a: T, b: T, c: T) -> object:
    # test_transpose_inplace_view: swapdims_, swapaxes_, transpose_ of a view_as of each input, written
    out = (a.view_as(a).swapdims_(0, 1), b.view_as(b).swapaxes_(0, 1), c.view_as(c).transpose_(0, 1))
    for v in out:
        v[0, 1] = 0
    return out


def t_written(t: T) -> object:
    # test_t_view
    v = t.t()
    v[0, 1] = 0
    return v


def t_inplace_of_view(t: T) -> object:
    # test_t_inplace_view
    v = t.view_as(t)
    v = v.t_()
    v[0, 1] = 0
    return v


def T_H_mT_mH_written(a: T, b: T, c: T, d: T) -> object:
    # test_T_view: each attribute a view of its own input, written
    views = (a.T, b.H, c.mT, d.mH)
    for v in views:
        v[0, 1] = 0
    return views


def unfold_written(t: T) -> object:
    # test_unfold_view
    v = t.unfold(0, 3, 2)
    v[1, 0] = 0
    return v


def unfold_past_windows_written(t: T) -> object:
    # test_unfold_view's view, in windows apart (step 3 > size 2) that leave elements 2, 5 and 8-9 out
    v = t.unfold(0, 2, 3)
    v.mul_(2)
    return v


def squeeze_written(t: T) -> object:
    # test_squeeze_view
    v = torch.squeeze(t)
    v[0, 1] = 0
    return v


def squeeze_inplace_of_view(t: T) -> object:
    # test_squeeze_inplace_view (a 5x1x5 input here, so squeeze_ changes the view)
    v = t.view_as(t)
    v = v.squeeze_()
    v[0, 1] = 0
    return v


def unsqueeze_written(t: T) -> object:
    # test_unsqueeze_view
    v = torch.unsqueeze(t, 1)
    v[0, 0, 1] = 0
    return v


def unsqueeze_inplace_of_view(t: T) -> object:
    # test_unsqueeze_inplace_view
    v = t.view_as(t)
    v = v.unsqueeze_(1)
    v[0, 0, 1] = 0
    return v


def as_strided_written(t: T) -> object:
    # test_as_strided_view
    v = torch.as_strided(t, (25,), (1,))
    v[6] = 0
    return v


def as_strided_inplace_of_view(t: T) -> object:
    # test_as_strided_inplace_view
    v = t.view_as(t)
    v = v.as_strided_((25,), (1,))
    v[6] = 0
    return v


def view_written(t: T) -> object:
    # test_view_view
    v = t.view(25)
    v[6] = 0
    return v


def view_as_written(t: T, e: T) -> object:
    # test_view_as_view
    v = t.view_as(e)
    v[6] = 0
    return v


def contiguous_is_self(t: T) -> object:
    # test_contiguous_self
    return t.contiguous()


def contiguous_copy_written(t: T) -> object:
    # test_contiguous_nonview: a copy, written apart from its input
    nv = t.t().contiguous()
    nv[0, 0] = 0
    return nv


def reshape_written(t: T) -> object:
    # test_reshape_view
    v = torch.reshape(t, (25,))
    v[6] = 0
    return v


def reshape_as_written(t: T, e: T) -> object:
    # test_reshape_as_view
    v = t.reshape_as(e)
    v[6] = 0
    return v


def reshape_copy_written(t: T) -> object:
    # test_reshape_nonview
    nv = torch.reshape(t.t(), (25,))
    nv[6] = 0
    return nv


def flatten_written(t: T) -> object:
    # test_flatten_view (a 1x2x3x4 input; and a 0-dim one)
    v = t.flatten()
    v[(0,) * v.ndim] = 0
    return v


def flatten_groups_written(t: T) -> object:
    # test_flatten_view: three flattens of an as_strided view whose strides allow them, each written
    v1 = t.flatten(0, 1)
    v2 = v1.flatten(1, 3)
    v3 = v2.flatten(2, 2)
    for v in (v1, v2, v3):
        v[(0,) * v.ndim] = 0
    return v1, v2, v3


def _strided_720(t: T) -> T:
    return t.as_strided((2, 3, 2, 3, 5, 4), (6, 2, 15, 5, 1, 0))


def flatten_copy_written(t: T) -> object:
    # test_flatten_nonview: a copy
    nv = t.flatten(1, 3) if t.ndim == 4 else t.flatten()
    nv[(0,) * nv.ndim] = 0
    return nv


def flatten_one_dim_is_self(t: T) -> object:
    # test_flatten_nonview: flatten(1, 1) returns the tensor itself
    return t.flatten(1, 1)


def basic_indexing_written(t: T) -> object:
    # test_basic_indexing_slice_view, _ellipses_view, _newaxis_view
    views = (t[:2, :3], t[..., :2], t[None, :2, 3])
    views[0][0, 0] = 2
    views[1][1, 1] = 3
    views[2][0, 1] = 4
    return views


def advanced_indexing_copy(t: T) -> object:
    # test_advanced_indexing_nonview
    rows = torch.tensor([[0, 0], [2, 2]])
    cols = torch.tensor([[0, 1], [2, 2]])
    nv = t[rows, cols]
    nv[1, 1] = 0
    return nv


def advanced_indexing_assignment(t: T) -> object:
    # test_advanced_indexing_assignment
    rows = torch.tensor([[0, 0], [2, 2]])
    cols = torch.tensor([[0, 1], [2, 2]])
    t[rows, cols] = 0
    return t


def chunk_written(t: T) -> object:
    # test_chunk_view (eager raises with grad: a view of several written in place)
    chunks = torch.chunk(t, 3)
    for idx, v in enumerate(chunks):
        v[0, 0] = idx + 1
    return chunks


def split_written(t: T) -> object:
    # test_split_view
    parts = torch.split(t, [1, 1, 1])
    for idx, v in enumerate(parts):
        v[0, 0] = idx + 1
    return parts


def movedim_written(a: T, b: T) -> object:
    # test_movedim_view (movedim and moveaxis, the source and destination as tuples and as ints)
    out = (torch.movedim(a, (0, 1), (1, 0)), torch.moveaxis(b, 0, 1))
    for v in out:
        v[0, 2] = 0.5
        v[1, 0] = 0.25
    return out


def view_copy_of(a: T) -> object:
    # test_view_copy: view_copy is not a view; its gradient is view's
    return torch.view_copy(a, (2, 2)), a.view(2, 2)


def diagonal_copy_out(a: T, out: T) -> object:
    # test_view_copy_out
    torch.diagonal_copy(a, out=out)
    return out


def split_copy_out(a: T, out1: T, out2: T) -> object:
    # test_view_copy_out
    torch.split_copy(a, 2, out=(out1, out2))
    return out1, out2


def view_of_view_written(t: T) -> object:
    # (views of views, written through the last: test_view_ops.py's is_view_of_same_base)
    v = t[1:]
    w = v.view(-1)
    w2 = w[::2]
    w2.mul_(2)
    return v, w, w2


def data_view_written(x: T) -> object:
    # (a view of .data written: the input's values change, its history does not)
    v = x.data.view(-1)
    v.add_(1)
    return x * 1


def unsafe_view_of_clone(t: T) -> object:
    # (_unsafe_view: the storage is shared, the result is not a view)
    c = t.clone()
    u = torch.ops.aten._unsafe_view(c, [c.numel()])
    u[0] = 5
    return c, u


VIEW_OPS = [
    *ported("conj_self", conj_of_real, _inputs(ones(5, 5))),
    *ported("view_dtype_same_size", view_dtype_same_size, _inputs(randn(4, 4, 8))),
    *ported("view_dtype_permuted", view_dtype_same_size, _inputs(randn(4, 4, 8), then=lambda t: t.permute(1, 0, 2))),
    *ported("view_dtype_smaller", view_dtype_smaller, _inputs(randn(2, 5, 8))),
    *ported("view_dtype_of_offset", view_dtype_of_offset, _inputs(randn(4, 4, 3)), eager_raises=True),
    *ported("view_dtype_drops_grad_train", view_dtype_drops_grad, _inputs(randn(5, 5, 8), rg=True)),
    *ported("view_as_complex", as_complex, _inputs(randn(3, 2, 2))),
    *ported("view_as_complex_transposed", as_complex, _inputs(randn(3, 2, 2), then=lambda t: t.transpose(0, 1))),
    *ported(
        "view_as_complex_last_stride",
        as_complex,
        _inputs(randn(3, 2, 2), then=lambda t: t.transpose(1, 2)),
        eager_raises=True,
    ),
    *written("view_as_complex_written", as_complex_written, randn(3, 2, 2)),
    *ported("view_as_complex_of_empty", as_complex_of_empty, _inputs(lambda: torch.tensor([]))),
    *ported("view_as_real", as_real, _inputs(randn(3, 4, dtype=torch.cfloat))),
    *ported("view_as_real_transposed", as_real, _inputs(randn(3, 4, dtype=torch.cdouble), then=lambda t: t.T)),
    *ported("view_as_real_zero_dim", as_real, _inputs(lambda: torch.tensor(2 + 3j))),
    *written("view_as_real_written", as_real_imag_zeroed, randn(3, 4, dtype=torch.cfloat)),
    *ported("view_tensor_hsplit", hsplit_then_write, _inputs(randn(4, 4, 4))),
    *ported("view_tensor_vsplit", vsplit_then_write, _inputs(randn(4, 4, 4))),
    *ported("view_tensor_dsplit", dsplit_then_write, _inputs(randn(4, 4, 4))),
    *ported("view_tensor_split", tensor_split_both_dims, _inputs(randn(10, 9))),
    *ported("real_imag_view", real_imag_of_transposed, _inputs(randn(3, 3, dtype=torch.cfloat))),
    *ported("real_imag_offset", real_imag_offset, _inputs(randn(10, dtype=torch.cdouble))),
    *ported("imag_noncomplex", imag_of_real, _inputs(ones(5, 5)), eager_raises=True),
    plain("conj_imag_view", conj_and_its_imag, _inputs(randn(4, 5, dtype=torch.cfloat))),
    plain("conj_shared_memory_add_", conj_shared_add_, _inputs(randn(4, 5, dtype=torch.cfloat))),
    plain("conj_shared_memory_out", conj_add_out, _inputs(randn(4, 5, dtype=torch.cfloat))),
    *ported("conj_shared_memory_view_add_", conj_view_add_, _inputs(randn(4, 5, dtype=torch.cfloat))),
    *ported("set_real_imag", set_real_imag, _inputs(randn(10, dtype=torch.cfloat), randn(10), randn(10))),
    *written("diagonal_view", diagonal_written, ones(5, 5)),
    *ported("diagonal_offset_view", diagonal_offset_written, _inputs(ones(3, 3, 3))),
    *written("select_view", select_written, ones(5, 5)),
    *written("unbind_view", unbind_written, zeros(5, 5), raises_train=True),
    *ported("unbind_train", unbind_all, _inputs(randn(3, 4, 4), rg=True)),
    *written("expand_view", expand_written, ones(5, 1)),
    *ported("expand_as_view", expand_as_written, _inputs(ones(5, 1), zeros(5, 5))),
    *ported("narrow_view", narrow_written, _inputs(ones(5, 5))),
    *ported("permute_view", permute_written, _inputs(ones(5, 5))),
    *written("transpose_view", transposes_written, ones(5, 5), ones(5, 5), ones(5, 5)),
    *written("transpose_inplace_view", inplace_transposes_of_views, ones(5, 5), ones(5, 5), ones(5, 5)),
    *ported("t_view", t_written, _inputs(ones(5, 5))),
    *written("t_inplace_view", t_inplace_of_view, randn(5, 5)),
    *ported("T_view", T_H_mT_mH_written, _inputs(ones(5, 5), ones(5, 5), ones(5, 5), ones(5, 5))),
    *written("unfold_view", unfold_written, ones(10)),
    *written("unfold_view_apart", unfold_past_windows_written, randn(10)),
    *ported("squeeze_view", squeeze_written, _inputs(ones(5, 1, 5))),
    *written("squeeze_inplace_view", squeeze_inplace_of_view, randn(5, 1, 5), two_train=False),
    *ported("unsqueeze_view", unsqueeze_written, _inputs(ones(5, 5))),
    *written("unsqueeze_inplace_view", unsqueeze_inplace_of_view, randn(5, 5), two_train=False),
    *ported("as_strided_view", as_strided_written, _inputs(ones(5, 5))),
    *written("as_strided_inplace_view", as_strided_inplace_of_view, randn(5, 5), two_train=False),
    *written("view_view", view_written, randn(5, 5)),
    *ported("view_as_view", view_as_written, _inputs(ones(5, 5), zeros(25))),
    *ported("contiguous_self", contiguous_is_self, _inputs(ones(5, 5))),
    *ported("contiguous_nonview", contiguous_copy_written, _inputs(ones(5, 5))),
    *written("reshape_view", reshape_written, randn(5, 5)),
    *ported("reshape_as_view", reshape_as_written, _inputs(ones(5, 5), zeros(25))),
    *written("reshape_nonview", reshape_copy_written, randn(5, 5)),
    *ported("flatten_view", flatten_written, _inputs(ones(1, 2, 3, 4))),
    *ported("flatten_view_zero_dim", flatten_written, _inputs(lambda: torch.tensor(1.0))),
    *ported("flatten_view_transposed", flatten_written, _inputs(ones(1, 2, 3, 4), then=lambda t: t.transpose(2, 3))),
    *ported("flatten_view_groups", flatten_groups_written, _inputs(ones(720), then=_strided_720)),
    *ported("flatten_nonview", flatten_copy_written, _inputs(ones(2, 3, 2, 3), then=lambda t: t.transpose(2, 3))),
    *ported("flatten_nonview_T", flatten_copy_written, _inputs(ones(2, 2), then=lambda t: t.T)),
    *ported("flatten_nonview_self", flatten_one_dim_is_self, _inputs(ones(2, 2))),
    *written("basic_indexing_view", basic_indexing_written, randn(5, 5)),
    *ported("advanced_indexing_nonview", advanced_indexing_copy, _inputs(ones(3, 3))),
    *written("advanced_indexing_assignment", advanced_indexing_assignment, randn(3, 3)),
    *written("chunk_view", chunk_written, zeros(3, 3), raises_train=True),
    *written("split_view", split_written, zeros(3, 3), raises_train=True),
    *written("movedim_view", movedim_written, zeros(3, 3), zeros(3, 3)),
    *ported("view_copy_train", view_copy_of, _inputs(randn(4), rg=True)),
    *ported("view_copy_out", diagonal_copy_out, _inputs(randn(2, 2), lambda: torch.empty(2))),
    *ported("split_copy_out", split_copy_out, _inputs(randn(4), lambda: torch.empty(2), lambda: torch.empty(2))),
    *written("view_of_view_written", view_of_view_written, randn(4, 6)),
    *ported("data_view_written_train", data_view_written, _inputs(randn(3, 4), rg=True)),
    *ported("unsafe_view_of_clone", unsafe_view_of_clone, _inputs(randn(3, 4))),
]


# ---------------------------------------------------------------------------------------------------------------
# TestOldViewOps: shapes, sizes and copies


def ravel_of(src: T) -> object:
    # test_ravel: a view of a contiguous tensor (its _base the input), a copy of a non-contiguous one
    return src.ravel()


def ravel_of_transposed(src: T) -> object:
    # test_ravel: the non-contiguous case
    return src.t().ravel()


def reshape_of_empty(x: T) -> object:
    # test_empty_reshape, test_view_empty
    return x.reshape(1, 0, 6, 1, 1), x.view(1, 0, 6, 1, 1), x.view(-1)


def expands(t: T, t2: T, noncontig: T) -> object:
    # test_expand (a double expand, -1 as a size, a non-contiguous input, and unsqueeze's strides)
    return (
        t.expand(4, -1, 5),
        t2.expand(1, 5).expand(2, 2, 5),
        noncontig.expand(2, 5, 4, 3),
        t2.expand(1, 1, 5),
        t2.unsqueeze(0).unsqueeze(1),
    )


def reshapes(x: T, y: T, s: T) -> object:
    # test_reshape: views where strides allow, copies where not
    return x.reshape(-1), x.reshape(1, 9, 1), y.reshape(-1), y.reshape(2, 2, 4), s.reshape(()), s.reshape(-1)


def reshapes_of_empty(e: T) -> object:
    # test_reshape (the empty tensor's)
    return e.reshape(-1), e.reshape([0]), e.reshape([0, 1]), e.reshape([1, -1])


def flattens(src: T) -> object:
    # test_flatten (a 5x5x5x5 input there, 2x3x4x5 here)
    return src.flatten(0, -1), src.flatten(0, 2), src.flatten(1, 2), src.flatten(-2, -1), src.flatten(2, 2)


def narrows(x: T) -> object:
    # test_narrow (negative starts)
    return x.narrow(0, -1, 1), x.narrow(0, -2, 2), x.narrow(-1, -1, 1), x.narrow(-2, -1, 1)


def narrow_by_tensor(x: T) -> object:
    # test_narrow_tensor (the start a 0-dim tensor)
    return x.narrow(0, torch.tensor(1), 1)


def t_of_small(s: T, v: T, m: T) -> object:
    # test_t (0-dim, 1-dim and 2-dim)
    return s.t(), v.t(), m.t(), m.transpose(0, 1)


def splits_and_chunks(a: T, b: T, c: T) -> object:
    # test_split, test_chunk (7x4 in sections of 3; 20x10 by [5, 5, 10] there, 8x6 by [2, 2, 4] here; 4x7 in 3)
    return a.split(3, 0), b.split([2, 2, 4], 0), b.split([1, 1, 4], 1), c.chunk(3, 1)  # type: ignore[no-untyped-call]


def unsqueezes(x: T) -> object:
    # test_unsqueeze (a contiguous input and a non-contiguous one)
    return x.unsqueeze(1), x.clone().unsqueeze_(2)


def transposed_copy(t: T) -> object:
    # test_big_transpose (456x789 there, 45x78 here)
    return t.t().contiguous()


def T_of_3d(a: T) -> object:
    # test_T
    return a.T, a.permute(2, 1, 0)


def matrix_transposes(a: T) -> object:
    # test_transposes (mT, mH, adjoint of a batch of matrices; conj views where complex)
    return a.mT, a.mH, a.adjoint(), a.mH.is_conj()


def H_of_vector(a: T) -> object:
    # test_transposes_errors: eager raises ("only supported on matrices")
    return a.H


def resize_as_self(x: T) -> object:
    # test_resize_as_preserves_strides
    x.resize_as_(x)
    return x


def resize_as_channels_last(flat: T, xc: T) -> object:
    # test_memory_format_resize_as (10x3x32x32 there, 2x3x4x4 here)
    flat.resize_as_(xc, memory_format=torch.preserve_format)
    return flat


def resize_channels_last(flat: T) -> object:
    # test_memory_format_resize_ (10x3x32x32 there, 2x3x4x4 here)
    flat.resize_((2, 3, 4, 4), memory_format=torch.channels_last)
    return flat


def resize_smaller(x: T, y: T) -> object:
    # test_resize_all_dtypes_and_devices, test_resize_as_all_dtypes_and_devices
    x.resize_((2, 2))
    y.resize_as_(x)
    return x, y


def broadcasts(x0: T, x1: T, x2: T) -> object:
    # test_broadcast_tensors, test_broadcast_to
    return torch.broadcast_tensors(x0, x1, x2), torch.broadcast_to(x2, (4, 3, 2))  # type: ignore[no-untyped-call]


def views_and_fill(t: T, template: T) -> object:
    # test_view (size inference; a view filled in place)
    out = (t.view_as(template), t.view(3, 5), t.view(-1, 5), t.view(3, -1))
    t.view(5, 3).fill_(0.5)
    return out


def _noncontiguous_8d(t: T) -> T:
    return t.transpose(-1, 2).transpose(-2, 3)


def views_of_noncontiguous(t: T) -> object:
    # test_view: views touching only the contiguous groups of a non-contiguous input
    return t.view(8, 1, 3, 3, 3, 4, 1, 3, 5), t.view(2, 4, 3, 1, 9, 2, 2, 3, 5, 1)


def view_crossing_groups(t: T) -> object:
    # test_view: eager raises (the view crosses [4, 2] and [3])
    return t.view(24, 9, 6, 2, 1, 5)


def views_of_stride_zero(t: T) -> object:
    # test_view: a view of an expanded tensor (stride 0 in every dimension)
    return t.view(-1), t.view(1, -1, 1), t.view(6, 2, 1)


def reshape_view_semantics(t: T) -> object:
    # test_reshape_view_semantics
    return t.reshape(20, 3), t.transpose(0, 1).reshape(20, 3)


def set_strides_of_size_one(x: T) -> object:
    # test_contiguous: set_ to new strides (dimension 0 of size 1): still contiguous
    stride = list(x.stride())
    stride[0] = 20
    x.set_(x.untyped_storage(), 0, x.size(), stride)
    return x, x.is_contiguous()


def tensor_splits(a: T) -> object:
    # test_tensor_split_sections, test_tensor_split_indices (a 4x10 tensor and its transpose)
    return torch.tensor_split(a, 3, 1), torch.tensor_split(a, (1, 5, 2, 8), -1), torch.tensor_split(a.t(), (2, -1), 0)


def tensor_split_by_tensor(a: T) -> object:
    # test_tensor_split_sections: the sections a 0-dim tensor
    return torch.tensor_split(a, torch.tensor(3, dtype=torch.int64), 1)


def views_of_ints(x: T) -> object:
    # test_view_all_dtypes_and_devices
    return x.view(6)


def conj_view_dtype(x: T) -> object:
    # test_conj_neg_view_numpy_error: eager raises (view(dtype) of a conj view)
    return x.conj().view(torch.float64)


def atleasts(s: T, a: T, b: T) -> object:
    # test_atleast_gradient
    one, two, three = torch.atleast_1d, torch.atleast_2d, torch.atleast_3d
    return one(s), two(a), three(b), three(s, a, b)  # type: ignore[no-untyped-call]


def _float_3x2() -> T:
    return torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])


OLD_VIEW_OPS = [
    *ported("ravel_view", ravel_of, _inputs(randn(2, 3, 4, 5))),
    *ported("ravel_zero_dim", ravel_of, _inputs(lambda: torch.tensor(123))),
    *ported("ravel_strided", ravel_of, _inputs(ones(10), then=lambda t: t[::2])),
    *ported("ravel_empty", ravel_of, _inputs(randn(3, 0, 2))),
    *ported("ravel_nonview", ravel_of_transposed, _inputs(randn(5, 5))),
    *ported("ravel_train", ravel_of, _inputs(randn(2, 3), rg=True)),
    *ported("empty_reshape", reshape_of_empty, _inputs(randn(0, 6))),
    plain("expand", expands, _inputs(randn(1, 8, 1), randn(5), lambda: torch.randn(5, 2, 1, 3)[:, 0])),
    *ported("expand_train", expands, _inputs(randn(1, 8, 1), randn(5), randn(5, 1, 3), rg=True)),
    plain("reshape", reshapes, _inputs(randn(3, 3), lambda: torch.randn(4, 4, 4)[:, 0, :], lambda: torch.randn(()))),
    *ported("reshape_empty", reshapes_of_empty, _inputs(lambda: torch.tensor([]))),
    *ported("flatten", flattens, _inputs(randn(2, 3, 4, 5))),
    *ported("narrow", narrows, _inputs(lambda: torch.arange(9).view(3, 3))),
    *ported("narrow_tensor", narrow_by_tensor, _inputs(lambda: torch.arange(9).view(3, 3))),
    *ported("t", t_of_small, _inputs(lambda: torch.randn(()), lambda: torch.arange(4.0), randn(2, 2))),
    *ported("split_chunk", splits_and_chunks, _inputs(randn(7, 4), randn(8, 6), randn(4, 7))),
    *ported("split_chunk_train", splits_and_chunks, _inputs(randn(7, 4), randn(8, 6), randn(4, 7), rg=True)),
    *ported("unsqueeze", unsqueezes, _inputs(randn(2, 3, 4))),
    *ported("unsqueeze_noncontiguous", unsqueezes, _inputs(randn(2, 3, 4), then=lambda t: t[:, 1])),
    *ported("big_transpose", transposed_copy, _inputs(randn(45, 78))),
    *ported("T", T_of_3d, _inputs(randn(2, 3, 4))),
    *ported("transposes", matrix_transposes, _inputs(randn(2, 3, 4, dtype=torch.cfloat))),
    *ported("transposes_train", matrix_transposes, _inputs(randn(2, 3, 4, dtype=torch.cdouble), rg=True)),
    *ported("transposes_errors", H_of_vector, _inputs(randn(2)), eager_raises=True),
    *ported("resize_as_preserves_strides", resize_as_self, _inputs(zeros(2, 3), then=lambda t: t.t())),
    *ported(
        "memory_format_resize_as",
        resize_as_channels_last,
        _inputs(randn(96), lambda: torch.randn(2, 3, 4, 4).contiguous(memory_format=torch.channels_last)),
    ),
    *ported("memory_format_resize_", resize_channels_last, _inputs(randn(96))),
    *ported("resize_all_dtypes", resize_smaller, _inputs(_float_3x2, lambda: torch.tensor([[1, 2, 3], [4, 5, 6]]))),
    *ported("broadcast_tensors", broadcasts, _inputs(randn(2, 1, 3), randn(3), randn(3, 1))),
    *ported("broadcast_tensors_train", broadcasts, _inputs(randn(2, 1, 3), randn(3), randn(3, 1), rg=True)),
    *ported("view", views_and_fill, _inputs(lambda: torch.rand(15), lambda: torch.rand(3, 5))),
    *ported(
        "view_noncontiguous",
        views_of_noncontiguous,
        _inputs(lambda: torch.rand(4, 2, 5, 1, 6, 2, 9, 3), then=_noncontiguous_8d),
    ),
    *ported(
        "view_crossing",
        view_crossing_groups,
        _inputs(lambda: torch.rand(4, 2, 5, 1, 6, 2, 9, 3), then=_noncontiguous_8d),
        eager_raises=True,
    ),
    *ported("view_stride_zero", views_of_stride_zero, _inputs(ones(1, 1), then=lambda t: t.expand(3, 4))),
    *ported("reshape_view_semantics", reshape_view_semantics, _inputs(randn(15, 4))),
    *ported("reshape_view_semantics_train", reshape_view_semantics, _inputs(randn(15, 4), rg=True)),
    *ported("contiguous", set_strides_of_size_one, _inputs(randn(1, 16, 5, 5))),
    *ported("tensor_split", tensor_splits, _inputs(randn(4, 10))),
    *ported("tensor_split_by_tensor", tensor_split_by_tensor, _inputs(randn(4, 10))),
    *ported("view_all_dtypes", views_of_ints, _inputs(lambda: torch.tensor([[1, 2], [3, 4], [5, 6]]))),
    *ported("conj_neg_view_error", conj_view_dtype, _inputs(lambda: torch.tensor([1 + 2j])), eager_raises=True),
    *ported(
        "atleast_train",
        atleasts,
        _inputs(
            lambda: torch.tensor(0.5, dtype=torch.double),
            randn(4, dtype=torch.double),
            randn(4, 3, dtype=torch.double),
            rg=True,
        ),
    ),
]

CASES12 = VIEW_OPS + OLD_VIEW_OPS
