"""Views whose `._base` is on another storage than their own (and the Note on intermediates that views share).

Input: output leaves of a functional run (at analysis and trace), or real tensors (at run time).
Output: `foreign_root` and `foreign_base` (eager's `._base` of an output view that set_() left on another storage,
and where the runtime finds it; the run-time rebuild of such a view is runtime/output_steps.py's `view_onto`),
and the refusal of such views
that require grad (`check_grad_view_of_moved_input`, `check_view_of_input_set_off_it`) or that view an
intermediate with history (`check_moved_view_of_grad_intermediate`).
Invariants: analysis and trace decide the same foreign roots (the graph returns them as intermediate bases, numbered
after the others, in output order); regeneration never writes data and leaves every version counter as it found it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.schemas import LeafSource
from subclassaot.torch_internals import storage_key

# Note [Views Set Onto Another Storage]
# A view keeps its `._base` when set_() moves it, or its base, to another storage: after `t1 = t0.diagonal();
# t1.set_(x)` (fuzz seed 3000 #3421, #9980) t1 lives on x's storage and `t1._base` is t0, an intermediate on a
# storage of its own; after `x1.set_(x0); t1 = x1.unsqueeze(1); x1.set_(t0)` (#9510) t1 lives on x0's storage and
# `t1._base` is x1. Regenerated as `x.as_strided(...)`, the output would be a view of the wrong tensor. So such a
# root is found at analysis (`foreign_root`): an input the program returns views of, or an intermediate, which the
# graph then returns as an intermediate base (its values are eager's). An input that is itself a view stands for
# its own `._base` (`input_root`), which its views share: after `t3 = x1.expand(...).select(0, -1); t3.set_(t2)`,
# x1 a view of b0, `t3._base` is b0, taken at run time as `x1._base` (fuzz seed 49000 #4037). The output is rebuilt as a view of that
# root, empty, then set_() onto the storage, size, stride and offset it has in eager (`view_onto`), as the program
# did; the set_() is the runtime's own, so the shared version counter is put back. Only for outputs that do not
# require grad: a set_() on a view that does rewrites its history, which eager's never had, unless the program's
# own set_() with grad moved it there (Note [Views Of Inputs set_() Under Grad]: then the set_ runs with grad).
# A view set_() back onto its root's storage keeps that root as `._base` too (`t1 = t0.select(2, 0); t2 = t1[:, 1:1];
# t2.set_(t1)`: `t2._base` is t0, not t1 nor t2): the intermediate base of that storage is the root of the chain
# through the set_(), not the view it stops at (`intermediate_bases`).
#
# Note [Views Sharing An Intermediate]
# Two outputs made by view chains through one eager intermediate (`t0 = x.detach(); return t0.view(...), t0.t()`,
# fuzz seed 3000 #9902) have one `._base`. Each replays its own chain at run time, so the analysis names each
# intermediate object a chain passes through (Replay.marks), and a memo that lives for one call hands the first
# rebuild of each to every later chain through it (runtime `_replay`). An object that in-place view ops changed is
# named only by chains that pass through it after all of them, and only where no chain names it as it was before
# them (it is a view, or no view was taken from it before them: Note [In-Place View Ops On A Base After Its Views]);
# fuzz seed 13000 #6810: else the returned `t0` of `t0.t_(); t1 = t0.unsqueeze(0)` replayed its t_() again after t1
# was made, advancing the counter t1 shares. The same holds for the hidden bases of Note [Output Regeneration]
# (OutputLeaf.hidden_key).


def foreign_root(
    leaf: torch.Tensor, final_storages: set[object], original_storages: set[object]
) -> torch.Tensor | None:
    """Eager's `._base` of a plain output view that does not require grad, where that base is on another storage
    than the view (Note [Views Set Onto Another Storage]) and is an intermediate (not on any input's storage)."""
    root = None if leaf.requires_grad else _moved_root(leaf)
    if root is None or root.requires_grad:
        # (an intermediate with history would come out of the compiled autograd.Function as a base: not done)
        return None
    key = storage_key(root)
    return None if key in final_storages or key in original_storages else root


def foreign_base(
    leaf: torch.Tensor,
    finals: Sequence[torch.Tensor],
    original_storages: set[object],
    bases: dict[object, tuple[int, torch.Tensor]],
    grad_set: bool = False,
) -> tuple[LeafSource, int] | None:
    """Where eager's `._base` of a plain output view on another storage is at run time: an input's dense leaf
    (INPUT_ALIAS, its DenseIndex: the leaf's autograd root, `input_root`) or an intermediate base (INTERMEDIATE_ALIAS, its number); None when it is neither
    or the view is on its base's storage (Note [Views Set Onto Another Storage]). `grad_set`: a view of an input the
    program set_() there with grad on, which requires grad (Note [Views Of Inputs set_() Under Grad])."""
    root = None if leaf.requires_grad and not grad_set else _moved_root(leaf)
    if root is None:
        return None
    # the input itself, or the base an input is a view of (fuzz seed 49000 #4037): its autograd root
    inputs = [j for j, f in enumerate(finals) if f is root or f._base is root]
    if inputs:
        return LeafSource.INPUT_ALIAS, inputs[0]
    found = bases.get(storage_key(root))
    intermediate = foreign_root(leaf, {storage_key(f) for f in finals}, original_storages)
    if found is not None and intermediate is not None and found[1] is root:
        return LeafSource.INTERMEDIATE_ALIAS, found[0]
    return None


def check_grad_view_of_moved_input(path: str, leaf: torch.Tensor, finals: Sequence[torch.Tensor]) -> None:
    """A plain output view that requires grad whose eager `._base` is an input now on another storage (fuzz seed 3000
    #9510 in training): its history runs through the input as it was when the view was taken (its set_() under
    grad, say), which a view rebuilt after the call cannot have (Note [Views Set Onto Another Storage])."""
    found = _index_of(_moved_root(leaf) if leaf.requires_grad else None, finals)
    if found is not None:
        raise UnsupportedError(
            f"{path} is a view that requires grad of input {found}, taken while the input was on another storage "
            "than the one it ends on (set_() or `.data =` moved it after): eager's view keeps the autograd history the "
            "input had then, which a compiled output rebuilt after the call cannot have. Return a clone (.clone())"
        )


def check_view_of_input_set_off_it(
    path: str, value: torch.Tensor, user_tensors: Sequence[torch.Tensor], rebuilt_onto_base: bool
) -> None:
    """Refuse a plain output view with no replay that requires grad and whose eager `._base` is an input on another
    storage than the view (`t1 = x.view(16); with no_grad(): t1.set_(y); return t1.view(-1)`, found beside fuzz seed
    43000): rebuilt from its storage, it would be no view of the input, or a view of another (Note [Views Set Onto
    Another Storage])."""
    found = _index_of(_moved_root(value) if value.requires_grad and not rebuilt_onto_base else None, user_tensors)
    if found is not None:
        raise UnsupportedError(
            f"{path} is a view that requires grad of tensor input {found}, taken from a view of it that the program "
            "set_() (or assigned `.data`) onto another storage: eager's `._base` is the input, on another storage "
            "than the view, which a compiled output rebuilt with autograd history cannot be (Note [Views Set Onto "
            "Another Storage]). Return the set_() view itself, or a clone"
        )


def check_moved_view_of_grad_intermediate(
    path: str, leaf: torch.Tensor, finals: Sequence[torch.Tensor], input_storages: set[object], bases: set[object]
) -> None:
    """Refuse a plain output view whose eager `._base` is an intermediate with autograd history on another storage,
    that the graph does not return as an intermediate base (`bases`: their storages): `t1 = t0.as_strided(...)` under
    no_grad, then `t1.data = x` (fuzz seed 46000 #590). That base is eager's to read, but `foreign_root` gives none
    that requires grad, and a view rebuilt over the output's storage has the wrong `._base` (Note [Views Set Onto
    Another Storage])."""
    root = _moved_root(leaf)
    if root is None or not root.requires_grad or any(f is root for f in finals):
        return
    key = storage_key(root)
    if key not in input_storages and key not in bases:
        raise UnsupportedError(
            f"{path} is a view whose `._base` is an intermediate with autograd history that set_() or `.data =` left "
            "on another storage: eager returns a view of that intermediate, which a compiled output cannot be here "
            "(Note [Views Set Onto Another Storage]: supported where the base does not require grad). Return a clone "
            "(.clone())"
        )


def _index_of(root: torch.Tensor | None, tensors: Sequence[torch.Tensor]) -> int | None:
    """The position of `root` itself (not an equal tensor) among `tensors`, if there."""
    return None if root is None else next((k for k, t in enumerate(tensors) if t is root), None)


def _moved_root(leaf: torch.Tensor) -> torch.Tensor | None:
    if is_traceable_subclass(leaf) or not leaf._is_view():
        return None
    root = leaf._base
    if root is None or is_traceable_subclass(root) or storage_key(root) == storage_key(leaf):
        return None
    return root
