"""Ops the pipeline traces as opaque ops of its own, so that a backend keeps eager's semantics for them.

Random draws: a backend's decomposition table maps every random aten op of `_DRAWS` to an opaque op
(`subclassaot::<name>`) that calls the aten op itself, and drops the table's own decompositions of those ops. The
opaque op has the aten op's schema (under a name fx can print), eager's strides under fake tensors and the
`nondeterministic_seeded` tag; it is only ever dispatched below autograd (the trace's proxy mode, the backend), so it
has no derivative of its own: autograd differentiates the aten op, as in eager.

Ordered effects (torch's effect registry): torch.linalg's error check is traced as an opaque op of our own that the
graph keeps; any other effectful op is refused. native_batch_norm in training, whose schema does not say it writes
its running statistics, is run as the `_native_batch_norm_legit` the trace's Python dispatcher makes of it.

Running statistics in their own layout: eager's CPU batch norm picks its arithmetic by layout (input, weight, bias
and both running statistics contiguous: `x * alpha + beta`; else `((x - mean) * invstd) * weight + bias`), and the
functional `_native_batch_norm_legit_functional` that functionalization records clones the statistics contiguous. On
a batch of equal rows (variance 0, its rounding magnified by 1/sqrt(eps)) the two differ by far more than rounding.
So for every backend but inductor (whose decomposition computes its own way) the trace maps it, where a statistic is
non-contiguous, to an opaque op that runs `_native_batch_norm_legit` on non-contiguous copies of them (its fake: the
aten op's). It runs below autograd only; a program through it trains through the Function, not natively.

Workspaces (an op's scratch output that only its backward reads, of a size only its kernel knows: oneDNN's LSTM
layer `aten.mkldnn_rnn_layer`): for inductor the op returns an empty workspace and its backward recomputes the
workspace from the inputs it is given, both running eager's kernels.

Invariants: Note [What A Backend Receives And Returns] (random draws; "Ordered effects"; "Unannotated writes").
"""

from __future__ import annotations

import functools
import keyword
import re
from collections.abc import Callable, Mapping, Sequence

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.torch_internals import define_op, has_ordered_effect, keep_in_graphs

_aten = torch.ops.aten
_DRAWS: tuple[torch._ops.OpOverload, ...] = (
    # the functional variants of the in-place fills (`x.bernoulli_(p)` -> `bernoulli.p(x, p)`)
    _aten.bernoulli.default,
    _aten.bernoulli.p,
    _aten.bernoulli.Tensor,
    _aten.uniform.default,
    _aten.normal_functional.default,
    _aten.exponential.default,
    _aten.geometric.default,
    _aten.log_normal.default,
    _aten.cauchy.default,
    _aten.random.default,
    getattr(_aten.random, "from"),
    _aten.random.to,
    # draws from tensors
    _aten.normal.Tensor_float,
    _aten.normal.float_Tensor,
    _aten.normal.Tensor_Tensor,
    _aten.multinomial.default,
    _aten.poisson.default,
    _aten._standard_gamma.default,
    _aten.rand_like.default,
    _aten.randn_like.default,
    _aten.randint_like.default,
    _aten.randint_like.low_dtype,
    _aten.randint_like.Tensor,
    _aten.native_dropout.default,
    _aten._fused_dropout.default,
    _aten.rrelu_with_noise_functional.default,
    # factories
    _aten.rand.default,
    _aten.randn.default,
    _aten.randint.default,
    _aten.randint.low,
    _aten.randperm.default,
    _aten.normal.float_float,
)


def with_printable_names(
    table: Mapping[torch._ops.OperatorBase, Callable[..., object]] | None,
) -> dict[torch._ops.OperatorBase, Callable[..., object]]:
    """`table` with `random.from` traced as its opaque op, on every backend: fx prints a node by its op's qualified
    name, and `torch.ops.aten.random.from(...)` is no Python (Note [What A Backend Receives And Returns])."""
    return {**(table or {}), **{op: _opaque(op) for op in _DRAWS if keyword.iskeyword(op._overloadname)}}


def with_eager_draws(
    table: Mapping[torch._ops.OperatorBase, Callable[..., object]] | None,
) -> dict[torch._ops.OperatorBase, Callable[..., object]]:
    """`table` with every op of `_DRAWS` traced as its opaque op (Note [What A Backend Receives And Returns])."""
    return {**(table or {}), **{op: _opaque(op) for op in _DRAWS}}


@functools.cache  # (an op is defined once a process)
def _opaque(op: torch._ops.OpOverload) -> torch._ops.OpOverload:
    """`aten::bernoulli.p(...)` -> `subclassaot::bernoulli_p(...)`: the same arguments and returns, one overload, an
    argument named by a Python keyword renamed (`uniform`'s `from` -> `from_`: inductor's code passes it by name)."""
    name = op._opname if op._overloadname == "default" else f"{op._opname}_{op._overloadname}"
    _, arguments = str(op._schema).split("(", 1)
    renamed = {a.name + "_": a.name for a in op._schema.arguments if keyword.iskeyword(a.name)}
    for new, old in renamed.items():
        arguments = re.sub(rf"\b{old}(?=[=,)])", new, arguments)

    def kernel(*args: object, **kwargs: object) -> object:
        return op(*args, **{renamed.get(k, k): v for k, v in kwargs.items()})

    # (the aten op's own meta kernel on meta and fake tensors; torch.library.register_fake reads the caller's source
    # file, ~10 ms an op)
    keys = ("CompositeExplicitAutograd", "Meta")
    return define_op("subclassaot", f"{name}({arguments}", kernel, keys=keys, tags=(torch.Tag.nondeterministic_seeded,))


# --- ordered effects ---


@functools.cache  # (defined once a process)
def _linalg_check() -> torch._ops.OpOverload:
    def kernel(info: torch.Tensor, api_name: str, *, is_matrix: bool) -> None:
        _aten._linalg_check_errors.default(info, api_name, is_matrix=is_matrix)

    op = define_op(
        "subclassaot",
        "linalg_check_errors(Tensor info, str api_name, *, bool is_matrix) -> ()",
        kernel,
        keys=("CompositeExplicitAutograd", "Meta"),
        tags=(),
    )
    keep_in_graphs(op)
    return op


def traced_in_place_of(func: object, args: Sequence[object] = ()) -> object:
    """The op to trace for `func` called on `args`: `func` itself, or its stand-in (Note [What A Backend Receives And
    Returns], "Ordered effects", "Unannotated writes"); raises for an effectful op the pipeline cannot trace."""
    if func is _aten._linalg_check_errors.default:
        return _linalg_check()
    if func is _aten.native_batch_norm.default and _updates_running_stats(args):
        return _aten._native_batch_norm_legit.default
    if has_ordered_effect(func):
        raise UnsupportedError(
            f"the program calls {func}, an op torch registers as having a side effect (it orders it by a token "
            "through the graph); subclassaot does not trace such ops. Call it outside the compiled function"
        )
    return func


def check_higher_order(func: torch._ops.HigherOrderOperator) -> None:
    """Raise for a higher-order op whose outputs' view relation eager decides inside its own implementation, which the
    compiled graph (one op, its outputs fresh) cannot reproduce: torch's map (eager returns views of the stacked
    result) and while_loop where autograd records it (while_loop_stack_output: eager's results are views of the
    stacked iterations). cond, and while_loop without grad, return what the compiled graph returns."""
    why = {"map_impl": "its stacked result", "while_loop_stack_output": "the iterations it stacks for autograd"}
    name = str(func._name)
    if name in why:
        raise UnsupportedError(
            f"the program calls torch's {name} higher-order op (map, or while_loop over tensors that require "
            f"grad): eager returns views of {why[name]}, whose ._base the compiled graph, running it as one op, "
            "cannot reproduce. Call it outside the compiled function, or use torch.cond"
        )


def _updates_running_stats(args: Sequence[object]) -> bool:
    """native_batch_norm(input, weight, bias, running_mean, running_var, training, ...) in training with both running
    statistics given, which it writes (the case torch's Python-dispatcher rewrite sends to _native_batch_norm_legit)."""
    return len(args) > 5 and args[3] is not None and args[4] is not None and bool(args[5])


def kept_in_graph(target: object) -> bool:
    """Is `target` an op the dead-code pass keeps though nothing reads its result?"""
    return target is _linalg_check()


# --- workspaces ---


def with_recomputed_workspaces(
    table: Mapping[torch._ops.OperatorBase, Callable[..., object]] | None,
) -> dict[torch._ops.OperatorBase, Callable[..., object]]:
    """`table` with each op that returns a workspace, and its backward, traced as opaque ops (Note [What A Backend
    Receives And Returns])."""
    forward, backward = _rnn_layer_ops()
    return {**(table or {}), _aten.mkldnn_rnn_layer.default: forward, _aten.mkldnn_rnn_layer_backward.default: backward}


def _schema_tail(op: torch._ops.OpOverload) -> str:
    """`(arguments) -> returns` of `op`'s schema."""
    return "(" + str(op._schema).split("(", 1)[1]


@functools.cache  # (defined once a process)
def _rnn_layer_ops() -> tuple[torch._ops.OpOverload, torch._ops.OpOverload]:
    def forward(*args: object, **kwargs: object) -> tuple[torch.Tensor, ...]:
        output, hy, cy, _ = _aten.mkldnn_rnn_layer.default(*args, **kwargs)
        return output, hy, cy, output.new_empty(0, dtype=torch.uint8)

    def backward(
        input: torch.Tensor,
        weight1: torch.Tensor,
        weight2: torch.Tensor,
        weight3: torch.Tensor,
        weight4: torch.Tensor,
        hx_: torch.Tensor,
        cx_tmp: torch.Tensor,
        output: torch.Tensor,
        hy_: torch.Tensor,
        cy_: torch.Tensor,
        grad_output: torch.Tensor | None,
        grad_hy: torch.Tensor | None,
        grad_cy: torch.Tensor | None,
        reverse: bool,
        mode: int,
        hidden_size: int,
        num_layers: int,
        has_biases: bool,
        train: bool,
        bidirectional: bool,
        batch_sizes: Sequence[int],
        batch_first: bool,
        workspace: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        weights = (weight1, weight2, weight3, weight4)
        with torch.enable_grad():  # (the kernel fills a workspace only where grad mode is on)
            recomputed = _aten.mkldnn_rnn_layer.default(
                input,
                *weights,
                hx_,
                cx_tmp,
                reverse,
                batch_sizes,
                mode,
                hidden_size,
                num_layers,
                has_biases,
                bidirectional,
                batch_first,
                train,
            )[3]
        grads: tuple[torch.Tensor, ...] = _aten.mkldnn_rnn_layer_backward.default(
            input,
            *weights,
            hx_,
            cx_tmp,
            output,
            hy_,
            cy_,
            grad_output,
            grad_hy,
            grad_cy,
            reverse,
            mode,
            hidden_size,
            num_layers,
            has_biases,
            train,
            bidirectional,
            batch_sizes,
            batch_first,
            recomputed,
        )
        return grads

    # (the aten ops' own meta kernels on meta and fake tensors: the forward's says a 0-byte workspace)
    keys = ("CompositeExplicitAutograd", "Meta")
    fw = _aten.mkldnn_rnn_layer.default
    bw = _aten.mkldnn_rnn_layer_backward.default
    return (
        define_op("subclassaot", "mkldnn_rnn_layer" + _schema_tail(fw), forward, keys=keys, tags=()),
        define_op("subclassaot", "mkldnn_rnn_layer_backward" + _schema_tail(bw), backward, keys=keys, tags=()),
    )


# --- batch norm's running statistics in their own layout ---


def with_statistics_kept(
    table: Mapping[torch._ops.OperatorBase, Callable[..., object]] | None,
) -> dict[torch._ops.OperatorBase, Callable[..., object]]:
    """`table` with `_native_batch_norm_legit_functional` over running statistics eager's CPU kernel finds
    non-contiguous traced as the opaque op that keeps them so (module docstring), where `table` decomposes it not."""
    return {_aten._native_batch_norm_legit_functional.default: _statistics_kept, **(table or {})}


def _statistics_kept(*args: object) -> object:
    """At the trace: the opaque op where a running statistic is non-contiguous, else the aten op itself."""
    mean, var = args[3], args[4]
    if (
        isinstance(mean, torch.Tensor)
        and isinstance(var, torch.Tensor)
        and mean.is_contiguous()
        and var.is_contiguous()
    ):
        return NotImplemented  # (make_fx traces the op as it is)
    return _batch_norm_keeping_statistics()(*args)


@functools.cache  # (defined once a process)
def _batch_norm_keeping_statistics() -> torch._ops.OpOverload:
    functional = _aten._native_batch_norm_legit_functional.default

    def kernel(
        input: torch.Tensor,
        weight: torch.Tensor | None,
        bias: torch.Tensor | None,
        running_mean: torch.Tensor,
        running_var: torch.Tensor,
        training: bool,
        momentum: float,
        eps: float,
    ) -> tuple[torch.Tensor, ...]:
        mean, var = _non_contiguous_copy(running_mean), _non_contiguous_copy(running_var)
        legit = _aten._native_batch_norm_legit.default(input, weight, bias, mean, var, training, momentum, eps)
        # (the statistics as the aten op returns them: clones of the arguments, each laid out as its clone())
        return *legit, torch.empty_like(running_mean).copy_(mean), torch.empty_like(running_var).copy_(var)

    def fake(*args: object) -> object:  # (the aten op on fakes, in the fake mode: eager's CPU layouts)
        return functional(*args)

    schema = "batch_norm_keeping_statistics" + _schema_tail(functional)
    op = define_op("subclassaot", schema, kernel, keys=("CompositeExplicitAutograd",), tags=())
    torch.library.register_fake(op)(fake)  # (~10 ms, once: it reads this file)
    return op


def _non_contiguous_copy(t: torch.Tensor) -> torch.Tensor:
    """A copy of `t`, non-contiguous where `t` is (every element apart: `t` may repeat one, an expand())."""
    if t.is_contiguous():
        return t.clone()
    return t.new_empty((*t.shape, 2))[..., 0].copy_(t)
