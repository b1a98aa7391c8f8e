"""Ops with an ordered side effect (torch's effect registry), given eager semantics in a traced graph.

Input: an op the program dispatches. Output: the op to trace in its place: torch.linalg's error check as an opaque
op of our own that the graph keeps, or an UnsupportedError for any other effectful op. Invariants: see
Note [What A Backend Receives And Returns], "Ordered effects".
"""

from __future__ import annotations

import functools

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.torch_internals import define_op, has_ordered_effect, keep_in_graphs

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
    """The op to trace for `func`: `func` itself, or its stand-in (Note [What A Backend Receives And Returns],
    "Ordered effects"); raises for an effectful op the pipeline cannot trace."""
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
