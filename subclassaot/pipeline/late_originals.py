"""The originals of a functional run (`FunctionalRun.originals`), made only where the program may change a leaf.

An original is an alias of a dense leaf taken before the program runs: it keeps the storage and layout the leaf came
with whatever the program does to the leaf. Each costs an op through functionalization and the fake mode (and a node
the graph drops unless it reads the value). Until the program changes a leaf's layout, storage or autograd flags, the
leaf itself answers every question asked of its original the same way: one functional storage (so one storage key,
one mutation counter, one value after syncing), the same size, strides, offset and conjugate and negative bits, and a
history that reaches the leaf. So the leaves stand for their originals, and the aliases are made, all at once and
under the grad mode and dispatch keys the run started with, before the first op or call that may change a leaf: an
in-place view op (set_, resize_, as_strided_, t_(), detach_() ...), an op that resizes (resize_as_, storage resizes),
an out= op, the `.data =` setter, requires_grad_() or its setter, detach_() (`may_change_leaves`,
`changes_leaf_flags`). A program that writes only
data (BatchNorm's buffer updates, optimizer steps) never makes them. A leaf changed without any of those (by a means
no mode sees) is refused at the end of the run rather than given a late original.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.rules.swap_record import SwapRecord
from subclassaot.schemas import DenseLayout, FlatInputs, Meta
from subclassaot.torch_internals import functional_alias, no_torch_function, skip_alias_name, storage_key

# per op: may it change its tensor arguments' layout or storage (an in-place view op, a resize, an out= op)?
_CHANGES_LAYOUT: dict[object, bool] = {}


def may_change_leaves(func: Any) -> bool:
    """Can dispatched op `func` change a tensor argument's layout or storage (before which the originals are made)?
    Ops that write only data (in-place arithmetic, copy_, batch norm's running stats) cannot."""
    known = _CHANGES_LAYOUT.get(func)
    if known is None:
        schema = getattr(func, "_schema", None)
        known = (
            schema is None
            or torch.Tag.inplace_view in getattr(func, "tags", ())
            or "resize" in schema.name
            or any(a.is_out for a in schema.arguments)
        )
        _CHANGES_LAYOUT[func] = known
    return known


def changes_leaf_flags(func: Any) -> bool:
    """Is torch-function call `func` the `.data =` setter, requires_grad_(), the `.requires_grad =` setter or
    detach_() (which autograd may run without dispatching it)?"""
    if func is torch.Tensor.requires_grad_ or func is torch.Tensor.detach_:
        return True
    owner = getattr(getattr(func, "__self__", None), "__name__", None)
    return owner in ("data", "requires_grad") and getattr(func, "__name__", "") == "__set__"


def _leaf_state(t: torch.Tensor) -> tuple[object, Meta, bool, bool, torch.dtype]:
    # (not requires_grad: an in-place op with grad gives it to the leaf and to an alias of it alike)
    return storage_key(t), leaf_meta(t), t.is_conj(), t.is_neg(), t.dtype


@dataclass(slots=True)
class LateOriginals:
    """The originals of one run, standing as their own leaves until `make` runs (from SwapRecord.make_originals)."""

    dense: list[torch.Tensor]
    originals: list[torch.Tensor]  # FunctionalRun.originals: the leaves until made, then the aliases
    names: dict[int, str | None]  # dense index of a leaf with an original to make -> the node name it took
    start: tuple[bool, bool, tuple[Any, Any]]  # grad mode, inference mode, dispatch key sets when the run began
    states: dict[int, tuple[object, Meta, bool, bool, torch.dtype]]  # ... -> the leaf's state then
    known: list[torch.Tensor] | None = None  # the dispatch mode's tensors whose storage a set_() may name

    @staticmethod
    def of(dense: list[torch.Tensor], own: AbstractSet[int], first: AbstractSet[int]) -> LateOriginals:
        """Every leaf its own original; the names of the aliases to come taken now, so that every node keeps the
        name it would have (Note [Training Through A Joint Graph]). `own`: leaves that are their own original for
        good; `first`: leaves whose alias is made now (functional_run `_originals`)."""
        originals, late = list(dense), dict[int, str | None]()
        for j, d in enumerate(dense):  # (in order: each alias node, made or not, takes its name in turn)
            if j in first and j not in own:
                originals[j] = functional_alias(d)
            else:
                name = skip_alias_name(d)
                if j not in own:
                    late[j] = name
        keys = (torch._C._dispatch_tls_local_include_set(), torch._C._dispatch_tls_local_exclude_set())
        start = (torch.is_grad_enabled(), torch.is_inference_mode_enabled(), keys)
        states = {j: _leaf_state(dense[j]) for j in late}
        return LateOriginals(dense, originals, late, start, states)

    @contextlib.contextmanager
    def armed(self, record: SwapRecord, flat: FlatInputs, layout: DenseLayout) -> Iterator[list[torch.Tensor]]:
        """While the program runs, `record` makes the originals before the first op that may change a leaf (none
        where none is left); gives the tensors whose storage a set_() may name, for the dispatch mode (its list,
        which `make` updates). After the run (its modes left), `check_unchanged`."""
        self.known = [*self.dense, *self.originals]
        if self.names:
            record.unmade_originals = lambda: self.make(record)
        yield self.known
        self.check_unchanged(record, flat, layout)

    def make(self, record: SwapRecord) -> None:
        """Each leaf's alias, as it would have been made before the program ran (the leaves are as they were then).
        No torch-function mode sees the calls made here (SwapRecord.call_seqs counts the program's)."""
        with no_torch_function():
            self._make(record)

    def _make(self, record: SwapRecord) -> None:
        grad, inference, keys = self.start
        with torch.inference_mode(inference), torch.set_grad_enabled(grad), torch._C._ForceDispatchKeyGuard(*keys):
            made = {j: functional_alias(self.dense[j], name) for j, name in self.names.items()}
        record.original_ids.difference_update(id(self.dense[j]) for j in made)
        record.original_ids.update(id(o) for j, o in enumerate(self.originals) if j not in made)  # (own ones kept)
        assert self.known is not None, "BUG: originals made before the run's modes"
        for j, alias in made.items():
            self.originals[j] = self.known[len(self.dense) + j] = alias
            record.original_ids.add(id(alias))
        firsts: dict[object, torch.Tensor] = {}
        for o in self.originals:
            firsts.setdefault(storage_key(o), o)
        record.input_originals.update(firsts)
        record.pin(list(made.values()))
        self.names = {}

    def check_unchanged(self, record: SwapRecord, flat: FlatInputs, layout: DenseLayout) -> None:
        """After the run: no original left unmade is of a leaf that changed (by a means no mode saw)."""
        record.unmade_originals = None
        for j in self.names:
            if _leaf_state(self.dense[j]) != self.states[j]:
                raise UnsupportedError(
                    f"{flat.leaves[layout.leaves[j].owner].path}: the program changed this input's layout, storage or "
                    "dtype by a means no op or tensor method shows (torch.utils.swap_tensors, or a C++ "
                    "extension), which the compiler cannot follow. Change it through the tensor's methods (set_(), "
                    "`.data =`, requires_grad_())"
                )
