"""Workspaces: an op's scratch output that only its backward reads, of a size only its kernel knows.

Input: a backend's decomposition table. Output: the table with each such op (`aten.mkldnn_rnn_layer`) and its
backward mapped to opaque ops (`subclassaot::<name>`): the forward returns an empty workspace, the backward recomputes
the workspace from the inputs it is given. Invariants: the opaque ops run eager's kernels (eager's values); they are
only dispatched below autograd (the trace's proxy mode, the backend), so autograd differentiates the aten op, as in
eager.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import torch

from subclassaot.torch_internals import define_op

_aten = torch.ops.aten

# See Note [What A Backend Receives And Returns] (workspaces).


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
