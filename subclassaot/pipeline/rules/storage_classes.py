"""Stage `analyze`, wrapper storages: which subclass tensors share one wrapper storage after the call, and which
tensor the runtime takes that storage from (Note [Wrapper Storage]).

Input: a `FunctionalRun`, its `DenseLayout` and the analyzed outputs. Output: `WrapperStorageClass`es for the runtime
(wrapper_storage.py applies them). Invariants: pure reads of the run's records; nothing here raises.
"""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from subclassaot.pipeline.functional_run import FunctionalRun, dense_leaves_of
from subclassaot.schemas import DenseLayout, OutputInfo, OutputKind, WrapperStorageClass
from subclassaot.torch_internals import storage_key

__all__ = ["wrapper_storage_classes"]


# Note [Wrapper Storage]
# A wrapper subclass has a storage of its own (no data): views share it (return_and_correct_aliasing), and since set_
# is an inplace_view op, `w.set_(src)` on a wrapper also replays on the wrapper itself, which then shares src's
# wrapper storage and takes its metadata, while the subclass's own set_ handler points the inner tensors at src's
# (the wrapper keeps its autograd identity: a view stays a view of its base). The functional run does all of this
# on the traced wrappers exactly as eager does, so at its end the traced wrappers' storages say which subclass inputs
# and outputs share one, and whether that is an input's storage as received. Two things reproduce it at run time,
# only for programs that set_() a wrapper (or assign its `.data`: Note [Wrapper Data Assignment]): an output that
# was a view when set_() replaced its contents is replayed as that view and then set_() (without autograd) to a
# wrapper of its dense leaves (`Replay.then_set`); and after the outputs are built, every member of a sharing class
# gets the class's storage (torch._functionalize_unsafe_set, which changes neither metadata nor version counters),
# an anchor's storage taken before the epilogue (which may move the anchor off it).
# - `w.set_(t)` with t a plain tensor puts w on t's own, real storage, and the subclass points every inner tensor at
#   it too. The class's storage is then that of a dense leaf (an input's inner tensor, a plain input, or an output's
#   leaf: `WrapperStorageClass.leaf`, else `output_leaf`), and the members get the storage that leaf has once the
#   epilogue ran and the outputs are built. Where no tensor the caller can see holds it any more, a storage of the
#   wrapper's own is as good as eager's: nothing observable shares it.
# - A wrapper input that is a view of a larger one (`b[1:1]`, `b[:2]`) shares its base's wrapper storage, which bounds
#   the in-place view ops it allows (`x.as_strided((), (), 0).unsqueeze_(0)` on an empty slice is legal). Rebuilt by
#   unflatten, the traced wrapper would get a storage sized for its own elements only, and the op would raise; so it
#   gets a (data-less) storage as large as the real input's, where that is larger and its metadata is static.


def wrapper_storage_classes(
    run: FunctionalRun, layout: DenseLayout, outputs: tuple[OutputInfo, ...]
) -> tuple[WrapperStorageClass, ...]:
    if not run.swaps.wrapper_sets and not run.swaps.wrapper_data:
        return ()
    anchors: dict[object, int] = {}
    for t, key in enumerate(run.initial_wrapper_keys):
        if key is not None:
            anchors.setdefault(key, t)
    members: dict[object, tuple[list[int], list[int]]] = {}
    for t, (tree, u) in enumerate(zip(layout.trees, run.user_tensors, strict=True)):
        if tree is not None:
            members.setdefault(storage_key(u), ([], []))[0].append(t)
    values = pytree.tree_leaves(run.output)
    for o, (info, value) in enumerate(zip(outputs, values, strict=True)):
        if info.kind is OutputKind.TENSOR and info.tree is not None and isinstance(value, torch.Tensor):
            members.setdefault(storage_key(value), ([], []))[1].append(o)
    leaf_keys: dict[object, int] = {}  # Note [Wrapper Storage]
    for k, final in enumerate(run.finals):
        leaf_keys.setdefault(storage_key(final), k)
    output_keys: dict[object, tuple[int, int]] = {}
    for o, (info, value) in enumerate(zip(outputs, values, strict=True)):
        if info.kind is OutputKind.TENSOR and isinstance(value, torch.Tensor):
            tree, leaves = dense_leaves_of(value, "out")
            for pos, out_leaf in enumerate(leaves):
                output_keys.setdefault(storage_key(out_leaf), (o, pos if tree is not None else -1))
    classes = []
    for key, (inputs, outs) in members.items():
        anchor = anchors.get(key)
        if outs or any(t != anchor for t in inputs):
            leaf = leaf_keys.get(key) if anchor is None else None
            output_leaf = output_keys.get(key) if anchor is None and leaf is None else None
            classes.append(
                WrapperStorageClass(
                    anchor=anchor, inputs=tuple(inputs), outputs=tuple(outs), leaf=leaf, output_leaf=output_leaf
                )
            )
    return tuple(classes)
