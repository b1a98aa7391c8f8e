"""Corpus, PyTorch's own programs, third part: the aliasing and mutation programs hidden in test_aotdispatch.py's
export, partitioner, python-key and module-simplified tests (and dynamo's functionalization test), written fresh,
plain and PairTensor, inference and training.

Input: nothing. Output: `CASES3` for tests/pipeline/test_corpus_pytorch.py.
Invariants: every case passes `pytest tests/pipeline --identity-compile`; names are unique across the corpus.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.pipeline import corpus_pytorch as plain
from tests.pipeline.corpus import Case
from tests.pipeline.corpus_pytorch2 import MakeOne, SavesAndWritesInBackward, both_kinds, kinds
from tests.pipeline.corpus_pytorch_subclass import pair, pair_leaf

T = torch.Tensor


def mutate_then_detached_result(a: T, a_view: T) -> object:
    a.mul_(2)
    out = a + 1
    return out.detach()


def mutate_input_then_read_unbind_grad_fn(out: object, args: tuple[object, ...]) -> None:
    a = args[0]
    assert isinstance(a, torch.Tensor) and isinstance(out, list)
    a.mul_(2)
    _ = out[0].grad_fn  # eager raises: a multi-output view whose base was written


def unbind_list(a: T) -> object:
    return list(a.unbind(0))


def write_first(x: T, y: T) -> object:
    x.mul_(2)
    return x + y


def dropout_eval_then_write(x: T) -> object:
    y = torch.ops.aten.dropout.default(x, 0.1, False)
    y.add_(1)
    return (y,)


def functional_dropout_eval_then_write(x: T) -> object:
    y = F.dropout(x, 0.1, training=False)
    y.add_(1)
    return y


def absolute_of_clone(x: T) -> object:
    return (torch.ops.aten.absolute_.default(x.clone()),)


def reshape_of_input(x: T) -> object:
    return x.reshape(4, 4), x.reshape(4, 4).sum()


def split_view_and_product(a: T, b: T) -> object:
    add = a + a
    pieces = torch.split(add, [4, 4], dim=1)
    second = pieces[1]
    return second, second.unsqueeze(-1) * b


def view_then_t(x: T) -> object:
    return x.view(2, 3).t()


def row_write_then_double(x: T) -> object:
    x_view = x[0]
    x_view.mul_(2)
    return (x + x,)


def times_fresh_constant(x: T) -> object:
    c = torch.tensor([2.0])
    return (x.mul(torch.ops.aten.lift_fresh_copy.default(c)),)


def relu_of_intermediate(a: T) -> object:
    a = a * 2
    a.relu_()
    return a


def add_then_relu_inplace(x: T) -> object:
    return x.add_(1.0) + F.relu_(x)


def reassign_dict_entry(d: dict[str, T]) -> object:
    d["a"] = d["a"] * 2
    return d


def sum_and_passthrough(x: T, y: T) -> object:
    return x + y, y


def cat_size_input_and_mm(a: T, b: T, c: T, d: T) -> object:
    sb, sc = b.size(), c.size()
    cat = torch.cat([a.expand((sb[0] + sc[0], a.size(0))), b, c])
    mm = torch.mm(cat, d)
    mm2 = torch.mm(mm, a.view(mm.size(1), a.size(0)))
    return cat, sb, c, mm2


class ParamWrittenUnderNoGrad(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.p = torch.nn.Parameter(torch.ones(2))

    def forward(self, x: T) -> T:
        with torch.no_grad():
            self.p.mul_(2)
        return self.p + x


class ParamWritten(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.p = torch.nn.Parameter(torch.ones(2))

    def forward(self, x: T) -> T:
        self.p.mul_(2)
        return self.p + x


class ProductAndSum(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.p = torch.nn.Parameter(torch.ones(2))

    def forward(self, x: T) -> tuple[T, T]:
        out = self.p * x
        return out, out.sum()


def inference_mode_input_write(x: T) -> object:
    with torch.inference_mode():
        x.add_(1)
    return x * 2


def data_write_of_leaf(x: T) -> object:
    x.data.mul_(2)
    return x * 3


def data_assigned_from_other(x: T, y: T) -> object:
    x.data = y * 2
    return x + 1


class BufferWrittenInBackward(torch.nn.Module):
    def __init__(self, *, also_in_forward: bool) -> None:
        super().__init__()
        self.register_buffer("buf", torch.ones(3))
        self.also_in_forward = also_in_forward

    def forward(self, x: T) -> T:
        buf = self.get_buffer("buf")
        if self.also_in_forward:
            buf.add_(1)
        out: T = SavesAndWritesInBackward.apply(buf)  # type: ignore[no-untyped-call]
        return x * out


def _alias_and_view(rg: bool) -> tuple[object, ...]:
    x = plain.t(3, 3, rg=rg)
    return x, x.view(3, 3)


def _flat_alias(new: MakeOne, rg: bool) -> tuple[object, ...]:
    x = new(2, rg=rg)
    return x, x.view(-1)


def _same(new: MakeOne, rg: bool) -> tuple[object, ...]:
    x = new(2, rg=rg)
    return x, x


def _shape_inputs() -> tuple[object, ...]:
    return plain.leaf(10), plain.leaf(3, 10), plain.leaf(2, 10), plain.leaf(10, 1)


CASES3 = [
    *plain.both("input_mutation_modifies_autograd_meta_of_aliases", mutate_then_detached_result, _alias_and_view),
    Case(
        name="output_aliases_input_multi_output_view_base_written_after",
        fn=unbind_list,
        make_inputs=lambda: (plain.t(3, 3, rg=True),),
        after_call=mutate_input_then_read_unbind_grad_fn,
    ),
    Case(
        name="pair_output_aliases_input_multi_output_view_base_written_after",
        fn=unbind_list,
        make_inputs=lambda: (pair(3, 3, rg=True),),
        after_call=mutate_input_then_read_unbind_grad_fn,
    ),
    *both_kinds("aot_export_synthetic_bases_mutated", write_first, _flat_alias),
    *both_kinds("aot_export_input_dupes_mutated", write_first, _same),
    *kinds("aot_export_ban_dropout_mut", dropout_eval_then_write, (2, 2)),
    *kinds("functional_dropout_eval_then_write", functional_dropout_eval_then_write, (2, 2)),
    *kinds("predispatch_composite_implicit_inplace", absolute_of_clone, (2, 2)),
    *kinds("predispatch_reshape", reshape_of_input, (2, 8), after_call=plain.mul_out(0)),
    *both_kinds("predispatch_reshape_noncontiguous", reshape_of_input, lambda new, rg: (new(8, 2, rg=rg).t(),)),
    *kinds("mem_leak_from_save_for_bw", split_view_and_product, (8, 8), (1, 4, 1)),
    *kinds("contiguous_view_t", view_then_t, (6,)),
    *kinds("preserves_stack_trace_from_mutation", row_write_then_double, (4, 5)),
    *kinds("lift_fresh_copy_in_graph", times_fresh_constant, (4,)),
    *kinds("make_fx_functionalize", relu_of_intermediate, (3,)),
    *kinds("compile_with_functionalization", add_then_relu_inplace, (3, 4)),
    Case(
        name="nnc_passthrough_dict", fn=reassign_dict_entry, make_inputs=lambda: ({"a": plain.t(3), "b": plain.t(3)},)
    ),
    Case(name="pair_nnc_passthrough_dict", fn=reassign_dict_entry, make_inputs=lambda: ({"a": pair(3), "b": pair(3)},)),
    *kinds("nnc_passthrough", sum_and_passthrough, (3,), (3,)),
    Case(name="output_tensor_shape_tensor", fn=cat_size_input_and_mm, make_inputs=_shape_inputs),
    Case(name="param_written_under_no_grad", fn=ParamWrittenUnderNoGrad(), make_inputs=lambda: (plain.leaf(2),)),
    Case(
        name="input_mutation_on_parameter",
        fn=ParamWritten(),
        make_inputs=lambda: (plain.t(2),),
        eager_raises=True,
    ),
    *kinds("inference_mode_input_write", inference_mode_input_write, (3,)),
    Case(name="data_write_of_leaf", fn=data_write_of_leaf, make_inputs=lambda: (plain.leaf(3),)),
    *both_kinds("data_assigned_from_other", data_assigned_from_other, lambda new, rg: (new(3, rg=rg), new(3))),
    Case(
        name="pair_data_assigned_from_other_leaf",
        fn=data_assigned_from_other,
        make_inputs=lambda: (pair_leaf(3), pair(3)),
    ),
    Case(
        name="buffer_written_in_backward",
        fn=BufferWrittenInBackward(also_in_forward=False),
        make_inputs=lambda: (plain.leaf(3),),
    ),
    Case(
        name="buffer_written_in_both_passes",
        fn=BufferWrittenInBackward(also_in_forward=True),
        make_inputs=lambda: (plain.leaf(3),),
    ),
    Case(name="multiple_outputs_require_grad", fn=ProductAndSum(), make_inputs=lambda: (plain.t(2),)),
]
