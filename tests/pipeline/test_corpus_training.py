"""Corpus, training: programs whose inputs (or module parameters) require grad; gradients are compared too.

A mutated input that requires grad must be a non-leaf in eager (`leaf.clone()`); the oracle retains and compares
its gradient. Ports TestAOTAutograd's training variants (`create_inp(req_grad=True)`), the no_grad / `.detach()` /
`.data` mutation tests, the multi-output-view autograd errors, the backward-mutation tests and BatchNorm.
"""

from __future__ import annotations

import pytest
import torch

from tests.oracle import CompileFn
from tests.pipeline.corpus import Case, params, run_case, set_to

T = torch.Tensor


def leaf(*shape: int) -> T:
    return torch.randn(*shape, requires_grad=True)


def nonleaf(*shape: int) -> T:
    """A tensor that requires grad and may be mutated in place (as TestAOTAutograd's `.add(1)`/`.clone()`)."""
    return torch.randn(*shape, requires_grad=True).clone()


# ---------------------------------------------------------------------------------------------------------------
# Mutations of inputs that require grad


def mul_then_use(a: T) -> object:
    a.mul_(2)
    return a * 3


def transpose_then_mul(a: T) -> object:
    a.transpose_(1, 0)
    a.mul_(2)
    return a + 1


def batch_norm_functional(x: T, weight: T, bias: T, running_mean: T, running_var: T) -> object:
    return torch._native_batch_norm_legit(x, weight, bias, running_mean, running_var, True, 0.5, 1e-5)


def mutate_then_view(a: T) -> object:
    a.add_(1)
    return a.view(-1)


def input_output_view_mutate_multiple(a: T, b: T, c: T) -> object:
    a.mul_(2)
    c.mul_(3)
    return b.view(2, 2), c.view(2, 2)


def input_output_view_metadata_mutate_multiple(a: T, b: T, c: T) -> object:
    b.mul_(3)
    c.t_()
    return a.view(2, 2), b.view(2, 2), c.view(2, 2)


def input_mutation_output_view_multiple(a: T, b: T, c: T, d: T) -> object:
    b.transpose_(1, 0)
    c.add_(1)
    return d + 1, b.diagonal(), a + c


def data_and_metadata(a: T) -> object:
    a.t_()
    a[0].mul_(2)
    return a.view(a.shape)


def output_all_alias_types(a: T) -> object:
    a.transpose_(1, 0)
    tmp = a.mul(2)
    return tmp.squeeze(), tmp.transpose(1, 0), a.unsqueeze(0)


def view_detach(a: T) -> object:
    tmp = a.detach()
    a.mul_(2)
    return a, tmp


def requires_grad_in_place(a: T, b: T) -> object:
    a.requires_grad_(True)
    return a.mul(3), b.mul(4)


def data_and_metadata_aliases_other(a: T, b: T) -> object:
    a.mul_(2)
    b.t_()
    return a.mul(b)


def noncontiguous_mutation(a: T) -> object:
    a.mul_(2)
    return a + 1


def detached_mutation(a: T) -> object:
    a.detach().mul_(2)
    return a + 3


def no_grad_mutation(a: T) -> object:
    with torch.no_grad():
        a.mul_(2)
    return a + 3


def no_grad_everything(a: T) -> object:
    with torch.no_grad():
        a.mul_(2)
        return a + 3


def mixed_hidden_mutations(a: T) -> object:
    a.detach().mul_(2)
    a.mul_(3)
    with torch.no_grad():
        a.mul_(4)
    return a + 5


def set_under_no_grad(a: T) -> object:
    b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
    with torch.no_grad():
        set_to(a, b)
    return a * b


def set_then_data_mutation(a: T, b: T) -> object:
    with torch.no_grad():
        set_to(a, b)
    b.mul_(2)
    return a + b


def set_nop(a: T) -> object:
    b = torch.arange(9, dtype=a.dtype)
    a_old = torch.ops.aten.alias.default(a)
    with torch.no_grad():
        set_to(a, b)
        set_to(a, a_old)
    return a + b.reshape(3, 3)


def data_mul(x: T) -> object:
    x.data.mul_(2)
    return x * 3


def data_assign(x: T, y: T) -> object:
    x.data = y
    return x * 2


def grad_free_input_mutated_with_grad_data(a: T, b: T) -> object:
    b.mul_(a)
    return b + 1


def grad_free_input_mutated_with_detached_data(a: T, b: T) -> object:
    b.add_(a.detach())
    return a * b


def through_select(a: T) -> object:
    a[0].mul_(2)
    return a.sum()


def detach_in_place(x: T) -> object:
    x.detach_()
    return x * 2


def modifies_autograd_meta_of_aliases(a: T, a_view: T) -> object:
    a.mul_(2)
    out = a + 1
    return out.detach()


def squeeze_mutation(a: T) -> object:
    b = a.clone().squeeze(-1)
    b.add_(1.0)
    return a + b


def leaf_in_place(a: T) -> object:
    a.mul_(2)
    return a


def leaf_metadata_in_place(a: T) -> object:
    a.t_()
    return a


INPUT_MUTATIONS = [
    Case(name="mul_then_use", fn=mul_then_use, make_inputs=lambda: (nonleaf(3, 3),), inductor=True),
    Case(name="transpose_then_mul", fn=transpose_then_mul, make_inputs=lambda: (nonleaf(3, 3),)),
    Case(
        name="batch_norm_functional",
        fn=batch_norm_functional,
        make_inputs=lambda: (leaf(2, 5, 3, 3), leaf(5), leaf(5), torch.ones(5), torch.ones(5)),
    ),
    Case(name="mutate_then_view", fn=mutate_then_view, make_inputs=lambda: (nonleaf(2, 2),)),
    Case(
        name="input_output_view_mutate_multiple",
        fn=input_output_view_mutate_multiple,
        make_inputs=lambda: (nonleaf(4), nonleaf(4), nonleaf(4)),
    ),
    Case(
        name="input_output_view_metadata_mutate_multiple",
        fn=input_output_view_metadata_mutate_multiple,
        make_inputs=lambda: (nonleaf(2, 2), nonleaf(2, 2), nonleaf(2, 2)),
    ),
    Case(
        name="input_mutation_output_view_multiple",
        fn=input_mutation_output_view_multiple,
        make_inputs=lambda: (nonleaf(2, 2), nonleaf(2, 2), nonleaf(2, 2), nonleaf(2, 2)),
    ),
    Case(name="data_and_metadata", fn=data_and_metadata, make_inputs=lambda: (nonleaf(3, 3),)),
    Case(
        name="output_all_alias_types", fn=output_all_alias_types, make_inputs=lambda: (nonleaf(1, 2, 4),), inductor=True
    ),
    Case(name="view_detach", fn=view_detach, make_inputs=lambda: (nonleaf(3, 3),)),
    Case(
        name="requires_grad_in_place",
        fn=requires_grad_in_place,
        make_inputs=lambda: (torch.randn(3, 3), leaf(3, 3)),
    ),
    Case(
        name="data_and_metadata_aliases_other",
        fn=data_and_metadata_aliases_other,
        make_inputs=lambda: (x := leaf(2, 2).add(1), x[0], x[0])[1:],
    ),
    Case(name="noncontiguous_mutation", fn=noncontiguous_mutation, make_inputs=lambda: (leaf(2, 2).add(1)[:, 0],)),
    Case(name="detached_mutation_of_leaf", fn=detached_mutation, make_inputs=lambda: (leaf(4),)),
    Case(name="detached_mutation_of_nonleaf", fn=detached_mutation, make_inputs=lambda: (nonleaf(4),)),
    Case(name="no_grad_mutation_of_leaf", fn=no_grad_mutation, make_inputs=lambda: (leaf(4),), inductor=True),
    Case(name="no_grad_everything", fn=no_grad_everything, make_inputs=lambda: (leaf(4),)),
    Case(name="mixed_hidden_mutations", fn=mixed_hidden_mutations, make_inputs=lambda: (nonleaf(4),)),
    Case(name="set_under_no_grad", fn=set_under_no_grad, make_inputs=lambda: (leaf(3, 3),)),
    Case(name="set_then_data_mutation", fn=set_then_data_mutation, make_inputs=lambda: (leaf(3, 3), nonleaf(3, 3))),
    Case(name="set_nop", fn=set_nop, make_inputs=lambda: (leaf(3, 3),)),
    Case(name="data_mul_of_leaf", fn=data_mul, make_inputs=lambda: (leaf(3),)),
    Case(name="data_assign_to_leaf", fn=data_assign, make_inputs=lambda: (leaf(3), torch.randn(3))),
    Case(
        name="grad_free_input_mutated_with_grad_data",
        fn=grad_free_input_mutated_with_grad_data,
        make_inputs=lambda: (leaf(3), torch.randn(3)),
    ),
    Case(
        name="grad_free_input_mutated_with_detached_data",
        fn=grad_free_input_mutated_with_detached_data,
        make_inputs=lambda: (leaf(3), torch.randn(3)),
    ),
    Case(name="through_select", fn=through_select, make_inputs=lambda: (nonleaf(3, 2),)),
    Case(name="detach_in_place", fn=detach_in_place, make_inputs=lambda: (nonleaf(3),)),
    Case(
        name="modifies_autograd_meta_of_aliases",
        fn=modifies_autograd_meta_of_aliases,
        make_inputs=lambda: (x := nonleaf(3, 3), x.view(3, 3)),
    ),
    Case(name="squeeze_mutation", fn=squeeze_mutation, make_inputs=lambda: (leaf(3, 1),)),
    Case(name="leaf_in_place", fn=leaf_in_place, make_inputs=lambda: (leaf(3),), eager_raises=True),
]


# ---------------------------------------------------------------------------------------------------------------
# Outputs: aliasing, requires_grad, autograd errors on later in-place use


def view_of_input(a: T) -> object:
    return a.view(-1)


def view_of_intermediate(a: T) -> object:
    out = torch.mul(a, 3)
    return out.view(-1)


def intermediate_and_view(a: T) -> object:
    out = torch.mul(a, 3)
    return out, out.view(-1)


def view_and_intermediate_and_detached(a: T) -> object:
    out = torch.mul(a, 3)
    return out.view(-1), out, out[0].detach()


def outputs_are_aliased(a: T) -> object:
    b = a.mul(2)
    c = b.view(-1)
    return b, c


def some_outputs_dont_require_grad_view(a: T, b: T) -> object:
    return a.detach(), b


def some_outputs_dont_require_grad_non_view(a: T, b: T) -> object:
    return a.add(1).detach(), b


def mixed_requires_grad(a: T) -> object:
    return a * 2, a.detach() + 1, a > 0


def no_grad_block_output(a: T) -> object:
    with torch.no_grad():
        y = a * 2
    return y, a * 3


def intermediate_aliases_output(a: T) -> object:
    y = a * 2
    z = y.view(-1)
    z.add_(1)
    return y


def unbind_outputs(a: T) -> object:
    return list(a.unbind(0))


def unbind_and_view(a: T) -> object:
    return *a.unbind(0), a.view(a.shape)


def unbind_of_intermediate_and_it(a: T) -> object:
    out = torch.mul(a, 3)
    return *out.unbind(0), out


def no_grad_view(a: T) -> object:
    with torch.no_grad():
        v = a.view(-1)
    return v


def sin_cos(a: T, b: T) -> object:
    return (a.sin() * b).cos()


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: T) -> T:
        return x

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, gx: T) -> T:
        return gx * 0.5


def custom_function_returns_input(x: T) -> object:
    return Identity.apply(x)  # type: ignore[no-untyped-call]


class MutatesInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: T) -> T:
        ctx.save_for_backward(x)
        return x.clone()

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad_output: T) -> T:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        x.mul_(2)
        return grad_output.clone()


def backward_mutation(a: T, b: T) -> object:
    return a * MutatesInBackward.apply(b)  # type: ignore[no-untyped-call]


def mul_out0(out: object, args: tuple[object, ...]) -> None:
    assert isinstance(out, (tuple, list))
    out[0].mul_(2)


def mul_last(out: object, args: tuple[object, ...]) -> None:
    assert isinstance(out, (tuple, list))
    out[-1].mul_(2)


def mul_out(out: object, args: tuple[object, ...]) -> None:
    assert isinstance(out, torch.Tensor)
    out.mul_(2)


def mutate_input_then_read_grad_fn(out: object, args: tuple[object, ...]) -> None:
    assert isinstance(out, (tuple, list))
    a = args[0]
    assert isinstance(a, torch.Tensor)
    a.mul_(2)
    _ = out[0].grad_fn


OUTPUTS = [
    Case(name="view_of_nonleaf_input", fn=view_of_input, make_inputs=lambda: (nonleaf(2, 2),)),
    Case(name="view_of_leaf_input", fn=view_of_input, make_inputs=lambda: (leaf(2, 2),)),
    Case(name="view_of_intermediate", fn=view_of_intermediate, make_inputs=lambda: (leaf(3, 3),), inductor=True),
    Case(name="intermediate_and_view", fn=intermediate_and_view, make_inputs=lambda: (leaf(3, 3),)),
    Case(
        name="view_and_intermediate_and_detached",
        fn=view_and_intermediate_and_detached,
        make_inputs=lambda: (leaf(3, 3),),
    ),
    Case(name="outputs_are_aliased", fn=outputs_are_aliased, make_inputs=lambda: (leaf(3),), after_call=mul_out0),
    Case(
        name="some_outputs_dont_require_grad_view",
        fn=some_outputs_dont_require_grad_view,
        make_inputs=lambda: (leaf(2, 2), leaf(2, 2)),
    ),
    Case(
        name="some_outputs_dont_require_grad_non_view",
        fn=some_outputs_dont_require_grad_non_view,
        make_inputs=lambda: (leaf(2, 2), leaf(2, 2)),
    ),
    Case(name="mixed_requires_grad", fn=mixed_requires_grad, make_inputs=lambda: (leaf(3),)),
    Case(name="no_grad_block_output", fn=no_grad_block_output, make_inputs=lambda: (leaf(3),)),
    Case(name="intermediate_aliases_output", fn=intermediate_aliases_output, make_inputs=lambda: (leaf(2, 2),)),
    Case(name="unbind_outputs", fn=unbind_outputs, make_inputs=lambda: (nonleaf(3, 3),)),
    Case(
        name="unbind_outputs_mutated_after_call",
        fn=unbind_outputs,
        make_inputs=lambda: (nonleaf(3, 3),),
        after_call=mul_out0,
    ),
    Case(
        name="unbind_outputs_input_mutated_after_call",
        fn=unbind_outputs,
        make_inputs=lambda: (nonleaf(3, 3),),
        after_call=mutate_input_then_read_grad_fn,
    ),
    Case(name="unbind_and_view", fn=unbind_and_view, make_inputs=lambda: (nonleaf(3, 3),), after_call=mul_last),
    Case(
        name="unbind_of_intermediate_and_it",
        fn=unbind_of_intermediate_and_it,
        make_inputs=lambda: (leaf(3, 3),),
        after_call=mul_last,
    ),
    Case(
        name="view_of_leaf_mutated_after_call",
        fn=view_of_input,
        make_inputs=lambda: (leaf(3),),
        after_call=mul_out,
    ),
    Case(
        name="no_grad_view_mutated_after_call", fn=no_grad_view, make_inputs=lambda: (nonleaf(3),), after_call=mul_out
    ),
    Case(name="sin_cos", fn=sin_cos, make_inputs=lambda: (leaf(3, 2), leaf(3, 2)), inductor=True),
    Case(name="custom_function_returns_input", fn=custom_function_returns_input, make_inputs=lambda: (leaf(2, 2),)),
    Case(name="backward_mutation", fn=backward_mutation, make_inputs=lambda: (leaf(3, 3), torch.ones(3, 3))),
]


# ---------------------------------------------------------------------------------------------------------------
# Modules: parameters, and buffers mutated in the forward


class Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: T) -> T:
        count = self.get_buffer("count")
        count.add_(1)
        out: T = self.lin(x) * count
        return out


class DecayedWeight(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self, x: T) -> T:
        with torch.no_grad():
            self.w.mul_(0.9)
        return x * self.w


def batch_norm_module() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.BatchNorm1d(3)


def linear_relu() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


def counter() -> torch.nn.Module:
    torch.manual_seed(0)
    return Counter()


def decayed() -> torch.nn.Module:
    torch.manual_seed(0)
    return DecayedWeight()


MODULES = [
    Case(name="batch_norm_train", fn=batch_norm_module(), make_inputs=lambda: (leaf(4, 3),), inductor=True),
    Case(name="batch_norm_train_plain_input", fn=batch_norm_module(), make_inputs=lambda: (torch.randn(4, 3),)),
    Case(name="batch_norm_eval", fn=batch_norm_module().eval(), make_inputs=lambda: (leaf(4, 3),)),
    Case(name="linear_relu", fn=linear_relu(), make_inputs=lambda: (torch.randn(5, 4),)),
    Case(name="buffer_counter", fn=counter(), make_inputs=lambda: (torch.randn(2, 3),)),
    Case(name="parameter_decayed_under_no_grad", fn=decayed(), make_inputs=lambda: (torch.randn(3),)),
]

CASES = INPUT_MUTATIONS + OUTPUTS + MODULES


@pytest.mark.parametrize(("case", "backend"), params(CASES, "training"))
def test_training_program_matches_eager(case: Case, backend: str, compile_fn: CompileFn | None) -> None:
    run_case(case, backend, compile_fn)


# Aliased inputs in training (Note [Aliased Inputs In Training]), in the spirit of TestAOTAutograd's
# test_input_mutation_aliases_other_input* programs, plus in-place view ops on views of inputs.
def _nl(*shape: int) -> T:
    return torch.randn(*shape, requires_grad=True).clone()


def _overlapping_add(a: T, b: T) -> object:
    a.add_(1)
    return a + b


def _mutate_view_read_base(a: T, b: T) -> object:
    b.add_(1)
    return a + 1


def _mutate_and_return_alias(a: T, b: T) -> object:
    a.mul_(2)
    return b.view(-1)


def _bases_out_of_order(a: T, b: T, c: T) -> object:
    c.mul_(2)
    return a * b + c


def _view_t_(x: T) -> object:
    v = x.view(2, 2)
    v.t_()
    return v * torch.arange(4.0).view(2, 2)


def _view_unsqueeze_(x: T) -> object:
    v = x[0]
    v.unsqueeze_(0)
    return v * 3


ALIASED_TRAINING = [
    Case(name="aliases_overlapping_add", fn=_overlapping_add, make_inputs=lambda: (x := _nl(4), x[0:2], x[1:3])[1:]),
    Case(
        name="aliases_mutate_view", fn=_mutate_view_read_base, make_inputs=lambda: (x := _nl(2, 2), x, x.view(-1))[1:]
    ),
    Case(name="aliases_output_alias", fn=_mutate_and_return_alias, make_inputs=lambda: (x := _nl(4), x, x.view(4))[1:]),
    Case(
        name="aliases_out_of_order",
        fn=_bases_out_of_order,
        make_inputs=lambda: (x := _nl(4), y := _nl(4), x.view(-1), y, x)[2:],
    ),
    Case(
        name="aliases_untouched_leaf_twice",
        fn=lambda a, b: (a * b).sum(dim=0),
        make_inputs=lambda: (x := leaf(3, 2), x),
    ),
    Case(
        name="aliases_untouched_view_output",
        fn=lambda a, b: (a.exp() + b.view(2, 2), b.t()),
        make_inputs=lambda: (x := _nl(4), x.view(2, 2), x)[1:],
    ),
    Case(name="inplace_view_op_on_view", fn=_view_t_, make_inputs=lambda: (_nl(4),)),
    Case(name="unsqueeze_on_select", fn=_view_unsqueeze_, make_inputs=lambda: (_nl(2, 3),)),
]


@pytest.mark.parametrize(("case", "backend"), params(ALIASED_TRAINING, "training-aliases"))
def test_aliased_training_program_matches_eager(case: Case, backend: str, compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        run_case(case, backend, compile_fn)
