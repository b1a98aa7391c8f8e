"""Ops with an ordered side effect (torch's effect registry), given eager semantics in a traced graph.

Input: an op the program dispatches. Output: the op to trace in its place: torch.linalg's error check as an opaque
op of our own that the graph keeps, or an UnsupportedError for any other effectful op. Invariants: see
Note [Ordered Effects In The Graph].
"""

from __future__ import annotations

import functools

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.torch_internals import define_op, has_ordered_effect, keep_in_graphs

# Note [Ordered Effects In The Graph]
# Some ops are registered in torch as having a side effect (torch._higher_order_ops.effects): functionalization
# wraps each in the `with_effects` higher-order op, threading a token through the graph that torch's own AOT
# compile adds as an input and output. The pipeline threads no tokens, and its modes take no higher-order op: such
# an op crashed the trace (NotImplementedError). The everyday one is `aten._linalg_check_errors`, which
# torch.linalg.solve, cholesky, inv, ... call on their `info` result: eager raises torch.linalg.LinAlgError there
# for a singular or non-positive-definite input. It writes nothing and returns nothing, so its order against the
# graph's ops does not change a value: it is traced as `subclassaot::linalg_check_errors`, the same arguments, a
# kernel that calls the aten op, no effect registered, and kept in the graph (our dead-code pass and fx's, which
# inductor runs, drop a node without users). The compiled call raises eager's LinAlgError with eager's message;
# where eager raised after writing an input in place, the compiled call, whose input writes follow the graph, has
# not written it. Any other effectful op (aten._print, a torchbind method, a custom op registered as effectful) is
# refused by name.

_aten = torch.ops.aten


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


def traced_in_place_of(func: object) -> object:
    """The op to trace for `func`: `func` itself, or its stand-in (Note [Ordered Effects In The Graph]); raises for
    an effectful op the pipeline cannot trace."""
    if func is _aten._linalg_check_errors.default:
        return _linalg_check()
    if has_ordered_effect(func):
        raise UnsupportedError(
            f"the program calls {func}, an op torch registers as having a side effect (it orders it by a token "
            "through the graph); subclassaot does not trace such ops. Call it outside the compiled function"
        )
    return func


def kept_in_graph(target: object) -> bool:
    """Is `target` an op the dead-code pass keeps though nothing reads its result?"""
    return target is _linalg_check()
