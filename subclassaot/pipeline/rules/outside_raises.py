"""Part of stage `trace` (training): eager backward errors raised only by nodes the compiled program shares.

Input: a `JointSetup` of a program that assigned `.data` and whose traced backward ran.
Output: `raises_outside_program(setup)`: whether every backward of eager's that fails, through any set of the
program's outputs, fails at a node the compiled program keeps as eager's (Note [Probing Eager's Backward]).
Invariants: runs the probe of Note [Probing Eager's Backward] (static fakes; no real tensor read, no guard added).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import torch

from subclassaot.pipeline.backward_probe import MAX_PROBED_OUTPUTS, SHAPE_CHECK_ERROR, BackwardEnd, _trial
from subclassaot.pipeline.joint import JointSetup
from subclassaot.schemas import OutputKind

_ROOT_INDEX = re.compile(r"^invalid gradient at index (\d+) ")


class _Watch:
    """The roots of one probed backward and the nodes it entered, in order (Note [Probing Eager's
    Backward])."""

    def __init__(self) -> None:
        self.roots: list[int] = []
        self.entered: list[str] = []  # the type names of the nodes entered
        self.keep: list[torch.Tensor] = []  # views keeping leaf roots' accumulators alive

    def install(self, positions: list[int], roots: list[torch.Tensor]) -> None:
        self.roots = positions
        todo = []
        for r in roots:
            if r.grad_fn is None:  # a leaf: its AccumulateGrad, found through (never run) the node of a view of it
                self.keep.append(r.view_as(r))
                r = self.keep[-1]
            todo.append(r.grad_fn)
        seen: set[int] = set()
        while todo:
            node = todo.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            node.register_prehook(self._entered(node))
            todo.extend(n for n, _ in node.next_functions)

    def _entered(self, node: torch.autograd.graph.Node) -> Callable[[object], None]:
        # the hook holds neither the node nor the watch (which holds views of the roots): the node holds the hook, so
        # either would be a cycle, keeping the probe's graph until a collection (Note [Gradient Accumulators Of Leaves])
        entered, name = self.entered, type(node).__name__

        def hook(_: object) -> None:
            entered.append(name)

        return hook


def raises_outside_program(setup: JointSetup) -> bool:
    """Note [Probing Eager's Backward]."""
    try:
        grad_outputs, _ = _trial(setup.call, setup.flat, None)
        if not 0 < len(grad_outputs) <= MAX_PROBED_OUTPUTS:
            return False
        for mask in range(1, 1 << len(grad_outputs)):
            chosen = frozenset(p for k, p in enumerate(grad_outputs) if mask >> k & 1)
            errors: list[RuntimeError] = []
            watch = _Watch()
            _, end = _trial(setup.call, setup.flat, chosen, errors, before_backward=watch.install)
            if end is BackwardEnd.COMPLETES:
                continue
            if end is not BackwardEnd.RAISES or not errors or not _shared_node_raised(setup, str(errors[0]), watch):
                return False
    except Exception:  # a program the probe cannot run: it stays refused
        return False
    return True


def _shared_node_raised(setup: JointSetup, error: str, watch: _Watch) -> bool:
    if watch.entered:
        # the CPU engine runs one node at a time: the one that raised is the last one entered
        return watch.entered[-1] == "AccumulateGrad" and _single_grad_leaf(setup)
    found = _ROOT_INDEX.match(error)
    if found is None or SHAPE_CHECK_ERROR not in error or int(found.group(1)) >= len(watch.roots):
        return False
    return _caller_node(setup, watch.roots[int(found.group(1))])


def _single_grad_leaf(setup: JointSetup) -> bool:
    leaves = {id(v) for v in setup.flat.values if isinstance(v, torch.Tensor) and v.requires_grad and v.is_leaf}
    return len(leaves) == 1


def _caller_node(setup: JointSetup, position: int) -> bool:
    """Is output `position` a plain input returned as itself whose grad_fn the compiled program leaves the caller's?"""
    analysis, layout, flat = setup.analysis, setup.layout, setup.flat
    info = analysis.outputs[position]
    if info.kind is not OutputKind.IS_INPUT or info.input_index is None:
        return False
    t = flat.tensor_indices.index(int(info.input_index))
    if layout.trees[t] is not None:
        return False  # a tensor subclass: its `.data` is assigned as Note [Wrapper Data Assignment] says
    muts = [analysis.mutations[j] for j in layout.leaves_of_input[t]]
    return all(m.swapped_by_data_only and not m.autograd_visible and not m.set_under_grad for m in muts)
