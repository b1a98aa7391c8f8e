"""Stage `analyze`, inner wrappers of nested subclasses (a TwoTensor of TwoTensors) after a wrapper-level set_()
(Note [Wrapper Storage]): which of them the runtime gives their first dense leaf's metadata and which wrapper storage
they share.

Input: a `FunctionalRun` (its `SwapRecord.wrapper_sets` and view records, the inputs' inner wrappers as received),
and the tensor inputs' source paths. Output: `InnerWrapperClass`es for the runtime (runtime/plan.py's
`settle_inner_wrappers` applies them), or an UnsupportedError where they cannot say eager's result.
Invariants: pure reads of the run's records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import dense_leaves, inner_wrappers
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.functional_run import FunctionalRun
from subclassaot.schemas import InnerWrapperClass
from subclassaot.torch_internals import storage_key

Member = tuple[int, tuple[str, ...]]


def inner_wrapper_classes(run: FunctionalRun, paths: Sequence[str]) -> tuple[InnerWrapperClass, ...]:
    """Note [Wrapper Storage]: the inner wrappers of each nested subclass input set_() at the wrapper level, and of each
    output set_() (or a view of a tensor set_()) or holding such an input's inner wrapper storage that is no input, by
    the wrapper storage they end on in the run."""
    swaps = run.swaps
    if not swaps.wrapper_sets:
        return ()
    anchors: dict[object, Member] = {}
    for t, (u, initial) in enumerate(zip(run.user_tensors, run.initial_inner_wrappers, strict=True)):
        for (attrs, _), (_, key) in zip(inner_wrappers(u, "t"), initial, strict=False):
            anchors.setdefault(key, (t, attrs))
    dense_keys = {storage_key(f) for f in run.finals}
    classes: dict[object, tuple[list[Member], list[Member]]] = {}
    for t, (path, u, initial) in enumerate(zip(paths, run.user_tensors, run.initial_inner_wrappers, strict=True)):
        if id(u) in swaps.wrapper_sets:
            found = inner_wrappers(u, path)
            if len(found) != len(initial):
                _refuse(path, path)
            for attrs, w in found:
                _check(w, ".".join((path, *attrs)), dense_keys)
                classes.setdefault(storage_key(w), ([], []))[0].append((t, attrs))
    for o, (kp, value) in enumerate(pytree.tree_flatten_with_path(run.output)[0]):
        if not isinstance(value, torch.Tensor) or any(value is u for u in run.user_tensors):
            continue
        set_in_chain = _set_in_chain(value, run)
        for attrs, w in inner_wrappers(value, "out"):
            # (an output an input was set_() onto, or a view of it: its inner wrappers hold the storage the input's
            # inner wrappers took, eager's aliasing of the two)
            if not set_in_chain and storage_key(w) not in classes:
                continue
            _check(w, ".".join(("out" + pytree.keystr(kp), *attrs)), dense_keys)
            classes.setdefault(storage_key(w), ([], []))[1].append((o, attrs))
    return tuple(
        InnerWrapperClass(anchor=anchors.get(key), inputs=tuple(ins), outputs=tuple(outs))
        for key, (ins, outs) in classes.items()
    )


def _check(w: torch.Tensor, path: str, dense_keys: set[object]) -> None:
    """The runtime gives inner wrapper `w` its first dense leaf's metadata and a wrapper storage: refuse where eager's
    are other (metadata apart from its leaves', a dense tensor's storage)."""
    leaf = dense_leaves(w, path)[0]
    if leaf_meta(w) != leaf_meta(leaf) or storage_key(w) in dense_keys or storage_key(w) == storage_key(leaf):
        _refuse(path.split(".")[0], path)


def _set_in_chain(t: torch.Tensor, run: FunctionalRun) -> bool:
    """Was `t`, or a tensor up its chain of views, set_() at the wrapper level?"""
    while id(t) not in run.swaps.wrapper_sets:
        record = run.swaps.views.get(id(t))
        if record is None:
            return False
        t = record.source
    return True


def _refuse(path: str, inner: str) -> NoReturn:
    raise UnsupportedError(
        f"{path}: the program set_() this nested tensor subclass (its inner tensors are tensor subclasses too); "
        "eager repeats a wrapper's set_ (and its in-place view ops) on each inner wrapper, and "
        f"{inner} ends with metadata other than its first inner tensor's, or on a plain tensor's storage, which the "
        "compiled call does not give inner wrappers (Note [Wrapper Storage]). set_() the plain inner tensors, or a "
        "tensor subclass over plain tensors"
    )
