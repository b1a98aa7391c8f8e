"""Mutations, views, aliasing and autograd reads as users write them, over subclasses we did not write: torch's
jagged NestedTensor (NJT), DTensor (a one-rank gloo mesh), TwoTensor, and torchao's Float8TrainingTensor, NF4Tensor
and Int8Tensor. Each program runs through the parity oracle on both entries, `subclassaot.compile` and
`torch.compile(fn, backend=subclassaot)` (where at least one captured graph must run through the pipeline).

Covered: in-place ops on the subclass input (add_, mul_, copy_, zero_), views of inputs returned or written through,
in-place metadata ops (t_, transpose_, unsqueeze_: TwoTensor only, the other classes reject them in eager), outputs
aliasing inputs, a mutation read by another op, training on a leaf subclass input, no_grad blocks, detach, `.data`
reads and writes, inference_mode. Programs eager rejects for a class (torchao's tensors implement few ops, NJT cannot
slice dim 0) are not listed for it. Expected outcomes: a match, or an UnsupportedError naming the input and the rule
(`REFUSED`).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from torch.distributed.tensor import Shard, distribute_tensor
from torch.testing._internal.two_tensor import TwoTensor

import subclassaot
from subclassaot.authoring.wrapper_tensor import implements
from subclassaot.errors import UnsupportedError
from subclassaot.tools.dynamo_backend import recording, subclassaot_backend
from subclassaot.tools.parity import write_outputs
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.subclasses.dtensor_factory import one_rank_mesh

logging.getLogger("torchao").setLevel(logging.ERROR)  # harmless load failures of its optional CUDA kernels

T = torch.Tensor
aten = torch.ops.aten
Make = Callable[[bool], T]  # requires_grad -> a fresh instance
Other = Callable[[T], T]  # the first input -> a fresh second input that eager can combine with it


# ----------------------------------------------------------------------------- the subclasses


def _njt(requires_grad: bool) -> T:
    rows = [torch.randn(n, 4) for n in (2, 3, 4)]
    return torch.nested.nested_tensor(rows, layout=torch.jagged, requires_grad=requires_grad)


def _njt_other(x: T) -> T:
    """An NJT over x's offsets (the same ragged dim: eager combines them)."""
    offsets = x.offsets()  # type: ignore[attr-defined]  # NestedTensor's method; torch types its NJTs as Tensor
    return torch.nested.nested_tensor_from_jagged(torch.randn(9, 4), offsets)


def _dtensor(requires_grad: bool) -> T:
    out: T = distribute_tensor(torch.randn(4, 6), one_rank_mesh(), [Shard(0)])
    return out.requires_grad_(requires_grad)


def _two(requires_grad: bool) -> T:
    out: T = TwoTensor(torch.randn(4, 6), torch.randn(4, 6))  # type: ignore[no-untyped-call]
    return out.requires_grad_(requires_grad)


def _torchao() -> None:
    pytest.importorskip("torchao")


def _float8(requires_grad: bool) -> T:
    _torchao()
    from torchao.float8.float8_training_tensor import GemmInputRole, LinearMMConfig, hp_tensor_and_scale_to_float8

    out = hp_tensor_and_scale_to_float8(
        torch.randn(4, 8), torch.tensor(2.0), torch.float8_e4m3fn, LinearMMConfig(), GemmInputRole.INPUT
    )
    return out.requires_grad_(requires_grad)


def _nf4(requires_grad: bool) -> T:
    _torchao()
    from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import to_nf4

    out: T = to_nf4(torch.randn(128, 128))  # default block sizes (64, 256)
    return out.requires_grad_(requires_grad)


def _int8(requires_grad: bool) -> T:
    _torchao()
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    linear = torch.nn.Sequential(torch.nn.Linear(64, 32))
    quantize_(linear, Int8WeightOnlyConfig(set_inductor_config=False))
    weight = copy.deepcopy(linear.get_submodule("0").get_parameter("weight").detach())
    return weight.requires_grad_(requires_grad)


SUBCLASSES: dict[str, tuple[Make, Other]] = {
    "njt": (_njt, _njt_other),
    "dtensor": (_dtensor, lambda x: _dtensor(False)),
    "two": (_two, lambda x: _two(False)),
    "float8": (_float8, lambda x: _float8(False)),
    "nf4": (_nf4, lambda x: torch.randn(128, 128)),  # a state-dict value loaded with copy_
    "int8": (_int8, lambda x: _int8(False)),
}


# ----------------------------------------------------------------------------- the programs


def _tr(x: T) -> T:
    return x.transpose(-1, -2)  # the one transpose NJT (ragged dim 1) and the others all support


def add_other_in_place(x: T, y: T) -> object:
    x.add_(y)
    return x * 2


def zero_then_read(x: T) -> object:
    x.zero_()
    return x + 1


def copy_other_in(x: T, y: T) -> object:
    x.copy_(y)
    return x


def in_place_result_returned(x: T) -> object:
    return x.mul_(3)


def slices_returned(x: T) -> object:
    return x[1:], x[:, 1:]


def write_through_slice(x: T) -> object:
    x[1:].mul_(2)
    return x + 0


def write_through_transpose(x: T) -> object:
    _tr(x).add_(1)
    return x


def view_returned_then_input_written(x: T) -> object:
    v = _tr(x)
    x.add_(1)
    return v


def t_in_place(x: T) -> object:
    x.t_()
    return x, x + 1  # Dynamo runs t_() eagerly (a graph break): `x + 1` is the graph that reaches the pipeline


def transpose_in_place(x: T) -> object:
    x.transpose_(-1, -2)
    return x * 2


def unsqueeze_in_place(x: T) -> object:
    x.unsqueeze_(0)
    return x * 2


def outputs_alias_input(x: T) -> object:
    return x, _tr(x), x.detach()


def mutation_read_by_other(x: T, y: T) -> object:
    x.mul_(2)
    return y * x


def read_before_other_written(x: T, y: T) -> object:
    z = x + y
    y.mul_(2)
    return z, y


def clone_written_input_kept(x: T) -> object:
    c = x.clone()
    c.add_(1)
    return c, x


def detach_written_returned(x: T) -> object:
    d = x.detach()
    d.add_(1)
    return d, x


def no_grad_write_through_view(x: T) -> object:
    with torch.no_grad():
        x.view_as(x).add_(1)
    return x


def inference_mode_block(x: T) -> object:
    with torch.inference_mode():
        y = x * 2
    return y


def grad_of_leaf(x: T) -> object:
    return (x * x).sin()


def view_of_leaf_returned(x: T) -> object:
    return _tr(x), x * 2


def no_grad_write_to_leaf(x: T) -> object:
    with torch.no_grad():
        x.mul_(2)
    return x * 3


def detach_write_to_leaf(x: T) -> object:
    x.detach().add_(1)
    return x * 2


def data_read(x: T) -> object:
    return x.data * 2, x * 2


def data_write(x: T) -> object:
    x.data.mul_(2)
    return x + 1


def no_grad_view_of_leaf_returned(x: T) -> object:
    with torch.no_grad():
        v = _tr(x)
    return v, x * 1


def leaf_grad_through_written_input(x: T, y: T) -> object:
    y.mul_(2)  # y does not require grad; x does
    return (x * y).sin()


# torchao: the programs its tensors run in eager (few ops: loading weights with copy_, slicing, upcasting, linear).


def float8_loaded_then_upcast(a: T, b: T) -> object:
    a.copy_(b)
    return a.to_original_precision()  # type: ignore[attr-defined]  # Float8TrainingTensor's method


def float8_views_and_upcast(a: T) -> object:
    return a.detach(), a[1:], a.to_original_precision() * 2  # type: ignore[attr-defined]  # as above


def nf4_loaded_then_linear(w: T, new: T, x: T) -> object:
    from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import linear_nf4

    w.copy_(new)
    return linear_nf4(x, w).relu()


def nf4_views_returned(w: T) -> object:
    return w.detach(), w.view(-1), w.get_original_weight()  # type: ignore[attr-defined]  # NF4Tensor's method


def int8_loaded_then_linear(w: T, new: T, x: T) -> object:
    w.copy_(new)
    return F.linear(x, w).sum(), w[0:8]


def int8_slice_detached(w: T) -> object:
    return w[8:16].detach(), F.linear(torch.ones(2, 64), w[0:8])


Program = Callable[..., object]
REFUSED = "refused"

# (program, requires_grad of the subclass input, inputs: "x" | "xy" | "loaded") per name.
PROGRAMS: dict[str, tuple[Program, bool, str]] = {
    "add_other_in_place": (add_other_in_place, False, "xy"),
    "zero_then_read": (zero_then_read, False, "x"),
    "copy_other_in": (copy_other_in, False, "xy"),
    "in_place_result_returned": (in_place_result_returned, False, "x"),
    "slices_returned": (slices_returned, False, "x"),
    "write_through_slice": (write_through_slice, False, "x"),
    "write_through_transpose": (write_through_transpose, False, "x"),
    "view_returned_then_input_written": (view_returned_then_input_written, False, "x"),
    "t_in_place": (t_in_place, False, "x"),
    "transpose_in_place": (transpose_in_place, False, "x"),
    "unsqueeze_in_place": (unsqueeze_in_place, False, "x"),
    "outputs_alias_input": (outputs_alias_input, False, "x"),
    "mutation_read_by_other": (mutation_read_by_other, False, "xy"),
    "read_before_other_written": (read_before_other_written, False, "xy"),
    "clone_written_input_kept": (clone_written_input_kept, False, "x"),
    "detach_written_returned": (detach_written_returned, False, "x"),
    "no_grad_write_through_view": (no_grad_write_through_view, False, "x"),
    "inference_mode_block": (inference_mode_block, False, "x"),
    "grad_of_leaf": (grad_of_leaf, True, "x"),
    "view_of_leaf_returned": (view_of_leaf_returned, True, "x"),
    "no_grad_write_to_leaf": (no_grad_write_to_leaf, True, "x"),
    "detach_write_to_leaf": (detach_write_to_leaf, True, "x"),
    "data_read": (data_read, True, "x"),
    "data_write": (data_write, True, "x"),
    "no_grad_view_of_leaf_returned": (no_grad_view_of_leaf_returned, True, "x"),
    "leaf_grad_through_written_input": (leaf_grad_through_written_input, True, "xy"),
    "float8_loaded_then_upcast": (float8_loaded_then_upcast, False, "xy"),
    "float8_views_and_upcast": (float8_views_and_upcast, False, "x"),
    "nf4_loaded_then_linear": (nf4_loaded_then_linear, False, "loaded"),
    "nf4_views_returned": (nf4_views_returned, False, "x"),
    "int8_loaded_then_linear": (int8_loaded_then_linear, False, "loaded"),
    "int8_slice_detached": (int8_slice_detached, False, "x"),
}

COMMON = [name for name in PROGRAMS if not name.startswith(("float8", "nf4", "int8"))]
NOT_IN_EAGER = {  # eager raises: NJT cannot slice its batch dim; NJT and DTensor have no in-place metadata ops
    "njt": {"slices_returned", "write_through_slice", "t_in_place", "transpose_in_place", "unsqueeze_in_place"},
    "dtensor": {"t_in_place", "transpose_in_place", "unsqueeze_in_place"},
}
# (subclass, program, entry) -> the expected refusal's pattern; every other case matches eager.
REFUSALS: dict[tuple[str, str, str], str] = {
    # Float8TrainingTensor's copy_ compares the two scales as Python numbers; Dynamo breaks the graph there.
    ("float8", "float8_loaded_then_upcast", "direct"): r"reads a tensor's value as a Python number",
}


def _cases() -> Iterator[tuple[str, str]]:
    for sub in ("njt", "dtensor", "two"):
        yield from ((sub, p) for p in COMMON if p not in NOT_IN_EAGER.get(sub, set()))
    yield from (("float8", p) for p in ("float8_loaded_then_upcast", "float8_views_and_upcast", "slices_returned"))
    yield from (("float8", "outputs_alias_input"),)
    yield from (("nf4", p) for p in ("copy_other_in", "nf4_loaded_then_linear", "nf4_views_returned"))
    yield from (("int8", p) for p in ("copy_other_in", "slices_returned", "int8_loaded_then_linear"))
    yield from (("int8", "int8_slice_detached"),)


CASES = list(_cases())


def _inputs(sub: str, program: str) -> Callable[[], tuple[object, ...]]:
    make, other = SUBCLASSES[sub]
    _, requires_grad, kind = PROGRAMS[program]

    def make_inputs() -> tuple[object, ...]:
        x = make(requires_grad)
        if kind == "x":
            return (x,)
        if kind == "xy":
            return (x, other(x))
        rows = 128 if sub == "nf4" else 64
        return (x, other(x), torch.randn(4, rows, requires_grad=True))

    return make_inputs


def dynamo_compile(fn: Program, *, backend: object = "eager") -> Program:
    compiled: Program = torch.compile(fn, backend=subclassaot_backend, options={"backend": str(backend)})
    return compiled


ENTRIES: dict[str, CompileFn | None] = {"direct": None, "dynamo": dynamo_compile}


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize(("sub", "program"), CASES, ids=[f"{s}-{p}" for s, p in CASES])
def test_real_subclass_program_matches_eager_or_is_refused(sub: str, program: str, entry: str) -> None:
    fn = PROGRAMS[program][0]
    make_inputs = _inputs(sub, program)
    refusal = REFUSALS.get((sub, program, entry))
    if refusal is not None:
        with torch.enable_grad(), pytest.raises(UnsupportedError, match=refusal):
            assert_matches_eager(fn, make_inputs, compile_fn=ENTRIES[entry])
        return
    with torch.enable_grad(), recording() as graphs:
        assert_matches_eager(fn, make_inputs, compile_fn=ENTRIES[entry])
    if entry == "dynamo":
        assert graphs, "no graph captured by Dynamo ran through subclassaot"


def test_subclass_dispatch_to_returning_its_input_compiles() -> None:
    """NF4Tensor's linear calls `.to(dtype)` on its inner tensors inside __torch_dispatch__, which returns its input
    itself: the record of views made the tensor its own source and the backward trace looped forever (on a weight
    loaded by copy_ before the linear). An aliasing op that returns its input makes no view."""
    assert_matches_eager(nf4_loaded_then_linear, _inputs("nf4", "nf4_loaded_then_linear"))


# ----------------------------------------------------------------------------- writes of some inner tensors


class WritesAOnly(PairTensor):
    """In-place add_/mul_ write `a` and leave `b` alone (as NJT's write its values, never its offsets)."""

    @implements(aten.add_, aten.mul_)
    def _write_a(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        x, other = args[0], args[1]
        func(x.a, other.a if isinstance(other, PairTensor) else other, **kwargs)
        return x


class RebindsB(PairTensor):
    """In-place add_/mul_ write `a` and rebind `b` to a new tensor (an authoring error the checker flags)."""

    @implements(aten.add_, aten.mul_)
    def _write_a_rebind_b(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        x, other = args[0], args[1]
        func(x.a, other.a if isinstance(other, PairTensor) else other, **kwargs)
        x.b = x.b * 1
        return x


def _pair_leaf(cls: type[PairTensor]) -> Callable[[], tuple[object, ...]]:
    return lambda: (cls(torch.randn(3, 4), torch.randn(3, 4), requires_grad=True),)


LEAVES: dict[str, Callable[[], tuple[object, ...]]] = {
    "pair": _pair_leaf(PairTensor),
    "a_only": _pair_leaf(WritesAOnly),
    "two": lambda: (_two(True),),
}


# A leaf requiring grad written without grad, then read (NJT above: its offsets stay the input's own). The inner
# tensors the class's write leaves alone keep their tensor, values and counter, as in eager.
@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("program", ["no_grad_write_to_leaf", "detach_write_to_leaf"])
@pytest.mark.parametrize("sub", list(LEAVES))
def test_leaf_written_without_grad_in_some_inner_tensors_matches_eager(sub: str, program: str, entry: str) -> None:
    with torch.enable_grad():
        assert_matches_eager(PROGRAMS[program][0], LEAVES[sub], compile_fn=ENTRIES[entry])


def test_leaf_written_in_one_inner_tensor_and_another_rebound_refused() -> None:
    """The class's write rebinds `b` (a storage change of that leaf): no new value of the input is rebuilt from `a`'s
    write and the input's own `b`; the input stays refused."""
    with torch.enable_grad(), pytest.raises(UnsupportedError, match=r"args\[0\].*metadata or storage changed"):
        subclassaot.compile(no_grad_write_to_leaf)(RebindsB(torch.randn(3, 4), torch.randn(3, 4), requires_grad=True))


# ----------------------------------------------------------------------------- inner tensors of views taken out


def inner_of_view_and_row(x: Any) -> object:
    a = x[1:].a
    return a[0], a


def inner_of_view_written(x: Any) -> object:
    a = x[1:].a
    a.mul_(2)
    return a, a[0]


def row_of_inner_of_view_written(x: Any) -> object:
    a = x[1:].a
    a[0].mul_(2)
    return a, x.t().b


# The inner tensor of a view the class's dispatch made is a plain alias of the input's, made below autograd (Note
# [Autograd Sees The Wrapper]): no `._base`, no history, and a counter of its own, which writes through it (or views
# of it) bump and the input's inner tensor's does not; outputs written after the call too.
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("program", [inner_of_view_and_row, inner_of_view_written, row_of_inner_of_view_written])
@pytest.mark.parametrize("sub", ["pair", "two"])
def test_inner_tensor_of_a_view_taken_out_matches_eager(sub: str, program: Program, grad: bool) -> None:
    with torch.set_grad_enabled(grad):
        assert_matches_eager(program, LEAVES[sub], after_call=write_outputs)
