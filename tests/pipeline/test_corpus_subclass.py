"""Corpus, subclasses: the mutation/aliasing programs again with `PairTensor` inputs (torch's TwoTensor tests).

Covers PairTensor-only and mixed PairTensor + plain inputs, PairTensor outputs that alias PairTensor inputs,
metadata mutations of PairTensor inputs (#114975, #186515), wrapper-level aliased inputs, aliasing only below the
wrapper (`PairTensor(x, x)`, #114415), nested PairTensors, and gradients that are PairTensors.
"""

from __future__ import annotations

import pytest
import torch

from subclasses.pair import PairTensor, example, nested_example
from tests.oracle import Call, CompileFn
from tests.pipeline.corpus import Case, params, run_case, set_to

T = torch.Tensor


def pair(*shape: int, requires_grad: bool = False) -> T:
    return PairTensor(torch.randn(shape), torch.randn(shape), requires_grad=requires_grad)


def pair_nonleaf(*shape: int) -> T:
    return pair(*shape, requires_grad=True).clone()


def mul(x: T) -> object:
    return x * 2


def add_then_use(x: T) -> object:
    x.add_(1)
    return x + 1


def mutation_is_output(x: T) -> object:
    x.mul_(2)
    return x


def through_view(x: T) -> object:
    x.view(-1).add_(1)
    return x * 2


def through_select(x: T) -> object:
    x[0].mul_(2)
    return x.sum()


def through_transpose(x: T) -> object:
    x.t().add_(1)
    return x + 0


def through_diagonal(x: T) -> object:
    x.diagonal().zero_()
    return x * 1


def pair_mutated_by_plain(x: T, y: T) -> object:
    x.add_(y)
    return x * y


def plain_mutated_by_pair(x: T, y: T) -> object:
    y.mul_(2)
    return x + y


def both_mutated(x: T, y: T) -> object:
    x.mul_(3)
    y.add_(1)
    return x, y * 2


def transpose_in_place(x: T) -> object:
    x.t_()
    return x + 1


def unsqueeze_in_place(x: T) -> object:
    x.unsqueeze_(0)
    return x * 2


def data_and_metadata(x: T) -> object:
    x.transpose_(0, 1)
    x.mul_(2)
    return x.view(x.shape)


def set_to_other(x: T, y: T) -> object:
    set_to(x, y)
    y.mul_(2)
    return x + y


def metadata_then_view_output(x: T) -> object:
    x.t_()
    tmp = x.mul(2)
    return tmp.transpose(1, 0), x.unsqueeze(0)


def mixed_outputs(x: T, y: T) -> object:
    return {"pair": x * y, "plain": y + 1, "view": x.view(-1)}


def view_of_intermediate(x: T) -> object:
    return (x * 3).view(-1)


def intermediate_and_view(x: T) -> object:
    out = x * 3
    return out, out.t()


def mutate_then_views(x: T) -> object:
    x.add_(1)
    return x[0], x.t()


def same_pair_twice(a: T, b: T) -> object:
    a.add_(1)
    return a + b


def pair_and_its_view(a: T, b: T) -> object:
    b.mul_(2)
    return a + 1


def grad_through(x: T, y: T) -> object:
    return (x * y).sin()


def dict_of_pairs(d: dict[str, T]) -> object:
    d["a"].add_(d["b"])
    return d["a"] * 2


def with_kwargs(x: T, *, scale: float, y: T) -> object:
    x.mul_(scale)
    return x + y


def mutate_output_after(out: object, args: tuple[object, ...]) -> None:
    assert isinstance(out, torch.Tensor)
    out.mul_(3)


def pair_views(name: str) -> object:
    views = {
        "itself": lambda x: x,
        "view": lambda x: x.view(-1),
        "transpose": lambda x: x.t(),
        "select": lambda x: x[1],
        "slice": lambda x: x[:, 1:3],
        "unsqueeze": lambda x: x.unsqueeze(0),
        "unbind": lambda x: x.unbind(0),
        "detach": lambda x: x.detach(),
    }
    return views[name]


VIEW_NAMES = ("itself", "view", "transpose", "select", "slice", "unsqueeze", "unbind", "detach")

CASES = [
    Case(name="mul", fn=mul, make_inputs=lambda: (pair(3, 4),), inductor=True),
    Case(name="example", fn=mul, make_inputs=lambda: (example(),)),
    Case(name="add_then_use", fn=add_then_use, make_inputs=lambda: (pair(3, 4),), inductor=True),
    Case(name="mutation_is_output", fn=mutation_is_output, make_inputs=lambda: (pair(3),)),
    Case(name="through_view", fn=through_view, make_inputs=lambda: (pair(2, 3),)),
    Case(name="through_select", fn=through_select, make_inputs=lambda: (pair(3, 2),)),
    Case(name="through_transpose", fn=through_transpose, make_inputs=lambda: (pair(2, 3),)),
    Case(name="through_diagonal", fn=through_diagonal, make_inputs=lambda: (pair(3, 3),)),
    Case(name="pair_mutated_by_plain", fn=pair_mutated_by_plain, make_inputs=lambda: (pair(3), torch.randn(3))),
    Case(name="plain_mutated_by_pair", fn=plain_mutated_by_pair, make_inputs=lambda: (pair(3), torch.randn(3))),
    Case(name="both_mutated", fn=both_mutated, make_inputs=lambda: (pair(2, 2), torch.randn(2, 2))),
    Case(name="transpose_in_place", fn=transpose_in_place, make_inputs=lambda: (pair(2, 3),)),
    Case(name="unsqueeze_in_place", fn=unsqueeze_in_place, make_inputs=lambda: (pair(3),)),
    Case(name="data_and_metadata", fn=data_and_metadata, make_inputs=lambda: (pair(2, 3),)),
    Case(name="set_to_other", fn=set_to_other, make_inputs=lambda: (pair(3), pair(3))),
    Case(name="metadata_then_view_output", fn=metadata_then_view_output, make_inputs=lambda: (pair(2, 4),)),
    *(
        Case(name=f"output_is_{name}_of_input", fn=pair_views(name), make_inputs=lambda: (pair(3, 4),))  # type: ignore[arg-type]
        for name in VIEW_NAMES
    ),
    Case(
        name="output_view_mutated_after_call",
        fn=pair_views("view"),  # type: ignore[arg-type]
        make_inputs=lambda: (pair(2, 3),),
        after_call=mutate_output_after,
    ),
    Case(name="mixed_outputs", fn=mixed_outputs, make_inputs=lambda: (pair(2, 2), torch.randn(2, 2))),
    Case(name="view_of_intermediate", fn=view_of_intermediate, make_inputs=lambda: (pair(3, 3),)),
    Case(name="intermediate_and_view", fn=intermediate_and_view, make_inputs=lambda: (pair(2, 3),)),
    Case(name="mutate_then_views", fn=mutate_then_views, make_inputs=lambda: (pair(2, 3),)),
    Case(name="same_pair_twice", fn=same_pair_twice, make_inputs=lambda: (p := pair(3), p)),
    Case(name="pair_and_its_view", fn=pair_and_its_view, make_inputs=lambda: (p := pair(2, 2), p.view(-1))),
    Case(name="inner_tensors_alias_no_mutation", fn=mul, make_inputs=lambda: (PairTensor(x := torch.randn(3), x),)),
    Case(
        name="inner_tensors_alias_mutated",
        fn=add_then_use,
        make_inputs=lambda: (PairTensor(x := torch.randn(3), x),),
    ),
    Case(
        name="two_pairs_share_inner_storage",
        fn=pair_mutated_by_plain,
        make_inputs=lambda: (PairTensor(x := torch.randn(3), torch.randn(3)), x),
    ),
    Case(
        name="noncontiguous_pair",
        fn=add_then_use,
        make_inputs=lambda: (PairTensor(torch.randn(4, 4)[:, 1], torch.randn(4, 4)[:, 1]),),
    ),
    Case(name="nested_pair", fn=mul, make_inputs=lambda: (nested_example(),)),
    Case(name="nested_pair_mutated", fn=add_then_use, make_inputs=lambda: (nested_example(),)),
    Case(name="zero_dim_pair", fn=add_then_use, make_inputs=lambda: (pair(),)),
    Case(
        name="int_pair",
        fn=add_then_use,
        make_inputs=lambda: (PairTensor(torch.arange(4), torch.arange(4) * 2),),
    ),
    Case(name="dict_of_pairs", fn=dict_of_pairs, make_inputs=lambda: ({"a": pair(2), "b": pair(2)},)),
    Case(
        name="with_kwargs",
        fn=with_kwargs,
        make_inputs=lambda: Call(args=(pair(3),), kwargs={"scale": 0.5, "y": torch.randn(3)}),
    ),
    # training
    Case(
        name="grad_through_pairs",
        fn=grad_through,
        make_inputs=lambda: (pair(3, requires_grad=True), pair(3, requires_grad=True)),
        inductor=True,
    ),
    Case(
        name="grad_through_pair_and_plain",
        fn=grad_through,
        make_inputs=lambda: (pair(3, requires_grad=True), torch.randn(3, requires_grad=True)),
    ),
    Case(name="training_mutation", fn=add_then_use, make_inputs=lambda: (pair_nonleaf(2, 2),)),
    Case(name="training_view_output", fn=pair_views("view"), make_inputs=lambda: (pair_nonleaf(2, 3),)),  # type: ignore[arg-type]
    Case(name="training_metadata_mutation", fn=transpose_in_place, make_inputs=lambda: (pair_nonleaf(2, 3),)),
    # Aliased subclass inputs that require grad and that the program leaves untouched: traced as separate inputs
    # (Note [Synthetic Bases]), gradients reach the shared leaf through both wrappers' grad_fns.
    Case(
        name="training_untouched_aliases",
        fn=lambda a, b: a * 2 + b.view(a.shape).sin(),
        make_inputs=lambda: (p := pair(2, 3, requires_grad=True), p.view(-1)),
    ),
    Case(
        name="training_untouched_same_pair_twice",
        fn=lambda a, b: (a * b, a.t()),
        make_inputs=lambda: (p := pair(3, requires_grad=True), p),
    ),
    Case(
        name="training_untouched_inner_alias",
        fn=lambda a: a.cos() * 3,
        make_inputs=lambda: (PairTensor(x := torch.randn(4), x, requires_grad=True),),
    ),
    Case(
        name="training_untouched_slices_view_output",
        fn=lambda a, b: (a + b, b.view(-1)),
        make_inputs=lambda: ((p := pair_nonleaf(4, 2))[0:2], p[1:3]),
    ),
]


@pytest.mark.parametrize(("case", "backend"), params(CASES, "subclass"))
def test_subclass_program_matches_eager(case: Case, backend: str, compile_fn: CompileFn | None) -> None:
    run_case(case, backend, compile_fn)
