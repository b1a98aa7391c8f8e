"""The runtime plan: what one compiled entry's per-call path needs, and the small evaluators both the epilogue
(runtime.py) and output regeneration (regenerate.py) use.

Input: built by api.py from the analysis, the layout and the graph outputs.
Output: `RuntimePlan`, `MetaEvaluator` (size/stride/offset expressions over the guards' symbols), `GraphCall`.
Invariants: the plan holds no fake tensors, no ShapeEnv and no graph it does not run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import CodeType
from typing import cast

import sympy
import torch

from subclassaot.authoring.protocol import SubclassNode
from subclassaot.schemas import (
    Analysis,
    DenseLayout,
    FlatInputs,
    GraphOutputs,
    Meta,
)
from subclassaot.torch_internals import (
    is_nested_expr,
    python_source,
)


def wrapper_write_recorded(analysis: Analysis, layout: DenseLayout, t: int) -> bool:
    """Whether the program wrote tensor subclass input `t` where autograd records it: else the epilogue's
    wrapper-level copy_ of its new value runs under no_grad, and no gradient flows through that value
    (runtime._copy_wrapper, Note [Unreached Inputs Are Detached])."""
    return any(analysis.mutations[j].autograd_visible for j in layout.leaves_of_input[t])


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimePlan:
    flat: FlatInputs  # structure only at run time: leaf kinds, tensor indices, output spec
    layout: DenseLayout
    analysis: Analysis
    graph_outputs: GraphOutputs
    leaf_attr_paths: tuple[tuple[str, ...], ...]  # per dense leaf: attribute names from its owner input
    input_requires_grad: tuple[bool, ...]  # per tensor input: requires_grad when compiled (a guard holds it)
    # per output (OutputIndex): the torch-function subclass eager returns it as, or None (Note [Torch Function
    # Subclass Outputs]); () when no input is such a subclass
    output_types: tuple[type[torch.Tensor] | None, ...] = ()


def leaf_attr_paths(layout: DenseLayout) -> tuple[tuple[str, ...], ...]:
    out: list[tuple[str, ...]] = []
    for tree in layout.trees:
        out.extend(_attr_paths(tree) if tree is not None else [()])
    return tuple(out)


def _attr_paths(node: SubclassNode) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for attr, child in zip(node.attrs, node.children, strict=True):
        out.extend([(attr, *p) for p in _attr_paths(child)] if isinstance(child, SubclassNode) else [(attr,)])
    return out


_EVAL_GLOBALS: dict[str, object] = {"math": math, "floor": math.floor, "ceil": math.ceil}


class MetaEvaluator:
    """Evaluates (size, stride, offset) expressions over symbols; compiled once per expression."""

    def __init__(self) -> None:
        self._cache: dict[object, CodeType] = {}  # keyed by the sympy expression: printed and compiled once

    def dim(self, d: object, symbols: dict[str, int]) -> int:
        if isinstance(d, int):
            return d
        if is_nested_expr(d):
            # A nested int (Note [Nested Int Dims]) is rebuilt by its subclass from the offsets it is given; -1 is
            # torch's convention for "not checked" in an outer size (see protocol's unflatten check).
            return -1
        code = self._cache.get(d)
        if code is None:
            code = compile(python_source(cast(sympy.Expr, d)), "<shape expr>", "eval")
            self._cache[d] = code
        return int(eval(code, _EVAL_GLOBALS, dict(symbols)))

    def meta(self, meta: Meta, symbols: dict[str, int]) -> tuple[list[int], list[int], int]:
        size, stride, offset = meta
        return (
            [self.dim(s, symbols) for s in size],
            [self.dim(s, symbols) for s in stride],
            self.dim(offset, symbols),
        )

    def arg(self, a: object, symbols: dict[str, int]) -> object:
        """A recorded op argument with its symbolic ints evaluated (lists and tuples elementwise)."""
        if isinstance(a, list | tuple):
            return type(a)(self.arg(x, symbols) for x in a)
        if isinstance(a, sympy.Expr):
            return self.dim(a, symbols)
        return a


# (values, graph inputs, dense inputs) -> (graph outputs, prewrapped fresh outputs by OutputIndex, new values of
# subclass inputs mutated in training by tensor-input position: Note [Subclass Inputs Mutated In Training],
# intermediate subclass roots by Replay.root_bases: Note [Subclass Intermediate Roots])
GraphCall = Callable[
    [Sequence[object], list[torch.Tensor], list[torch.Tensor], dict[str, int]],
    tuple[list[object], dict[int, torch.Tensor], dict[int, torch.Tensor], dict[tuple[int, ...], torch.Tensor]],
]


def probed_stride(
    plan: RuntimePlan, outs: Sequence[object], probe: int | None, size: list[int], stride: list[int]
) -> list[int]:
    """Note [Strides Of Assigned Tensors]: the real strides of the stride probe the analysis named, if any."""
    if probe is None:
        return stride
    gout = plan.graph_outputs
    leaf = outs[len(gout.updates) + gout.num_fresh + gout.num_bases + gout.num_symints + probe]
    assert isinstance(leaf, torch.Tensor)
    return list(leaf.stride()) if list(leaf.shape) == size else stride


def fresh_output(value: torch.Tensor) -> torch.Tensor:
    # A fresh output is never a view in eager; the eager backend may return a view of a graph temporary.
    return non_view_alias(value) if value._is_view() and not value.requires_grad else value


def non_view_alias(t: torch.Tensor) -> torch.Tensor:
    """A tensor sharing `t`'s storage and metadata that is not a view (no `._base`)."""
    alias = torch.empty((0,), dtype=t.dtype, device=t.device)
    with torch.no_grad():
        alias.set_(t.untyped_storage(), t.storage_offset(), t.size(), t.stride())
    return alias
