"""Derived facts of the eager record: the version counts eager's kernels give where no run under a mode shows them.

Input: one aten or torch.library op as a dispatch mode sees it (its operands: fakes, functional tensors or real
tensors) and which plain operands are inference tensors in eager. Output: how far eager's kernel advances the version
counter of each result or written argument, or nothing where the rule does not apply or eager cannot be asked.
Invariants: eager is asked, not modelled; nothing the caller passes is written.

Under a mode (a fake's, the record's, the functional run's) a kernel's inner ops never reach ADInplaceOrView, so two
ways eager's kernels advance counters show in no such run:
- outside inference_mode an op reading an inference tensor runs no autograd kernel, so the in-place and out= ops its
  backend kernel calls on its fresh results advance their counters (clone() 1, max(dim) 2, by device and size):
  `inference_read_counts`;
- a torch.library custom op advances each argument its `mutates_args` names once (its ADInplaceOrView kernel, above
  any mode: bumps_written_args), and its body (under a fake mode, the fake kernel runs instead) as often as it writes
  a plain argument besides (`x.add_(1)` in the body: eager's count is 2): `custom_op_body_bumps`. An op declared by a
  schema alone (torch.library.Library.define, a CompositeExplicitAutograd kernel) has no ADInplaceOrView kernel: its
  written arguments (a written tensor list's members too) move only as its body writes them, whatever its name. A
  subclass argument's body runs on its inner tensors, below autograd: its own counter moves by the ADInplaceOrView
  kernel alone (once, or not at all).
How often is the kernel's own: it is asked, at compile time, of eager's kernel on zeros laid out as the operands (made
inside inference_mode where eager's are inference tensors), outside every mode, from the dispatch keys of a call from
the user's code. Not where a size is symbolic (but a schema-declared op's body, the only thing moving its counters, is
asked at this call's sizes, which guards then fix), an operand covers more than `_PROBE_NUMEL` elements, the op draws
random numbers or the kernel raises on zeros: those counts stay as the run has them (a known gap). The eager record
applies both to its facts (Note [The Eager Record]); the functional run counts them as bumps of the counter families
(runtime/steps.py: Version Counters As Eager's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
from torch.fx.experimental.symbolic_shapes import guard_int
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.torch_internals import bumps_written_args, hint_of, outside_current_modes, tensors_in

_PROBE_NUMEL = 1 << 16  # the most elements a tensor eager's kernel is asked about may cover
# the dispatch keys a call from the user's code runs with (a mode's __torch_dispatch__ runs below autograd)
_TOP_LEVEL_KEYS = (torch._C._dispatch_tls_local_include_set(), torch._C._dispatch_tls_local_exclude_set())

Inference = Callable[[torch.Tensor], bool]  # is eager's plain tensor an inference tensor now?


def inference_read_counts(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any, inference: Inference
) -> list[int]:
    """Per tensor result of `func` (pytree order): eager's version count of it as built, for a functional op outside
    inference_mode reading a plain inference tensor (the module's docstring); [] where the rule does not
    apply or eager cannot be asked."""
    schema = getattr(func, "_schema", None)
    if torch.is_inference_mode_enabled() or schema is None or schema.is_mutable:
        return []
    if any(r.alias_info is not None for r in schema.returns) or torch.Tag.nondeterministic_seeded in func.tags:
        return []
    tensors = tensors_in((args, kwargs))
    if not any(not is_traceable_subclass(t) and inference(t) for t in tensors):
        return []
    results = tensors_in(out)
    if not results:
        return []
    if any(is_traceable_subclass(t) for t in (*tensors, *results)):
        return []
    asked = _asked_on_zeros(func, args, kwargs, inference)
    if asked is None:
        return []
    counts = [_count(r) for r in pytree.tree_leaves(asked[1]) if isinstance(r, torch.Tensor)]
    return counts if len(counts) == len(results) else []


def custom_op_body_bumps(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], inference: Inference
) -> list[tuple[torch.Tensor, int]]:
    """Per plain tensor an op of a namespace other than aten writes by its schema (a written tensor list's members
    too): how often eager's body advances its counter beyond the dispatcher's (once for a torch.library custom op's
    `mutates_args`, none for an op with no ADInplaceOrView kernel, whose counters only its body moves: asked with
    symbolic sizes too, which the answer then fixes); [] where the rule does not apply or eager cannot be asked."""
    schema = getattr(func, "_schema", None)
    if schema is None or not schema.is_mutable or getattr(func, "namespace", "aten") == "aten":
        return []
    written = {
        id(t)
        for i, a in enumerate(schema.arguments)
        if a.is_write
        for t in pytree.tree_leaves(args[i] if i < len(args) else kwargs.get(a.name))
        if isinstance(t, torch.Tensor) and not is_traceable_subclass(t)
    }
    if not written:
        return []
    own = int(bumps_written_args(func))
    asked = _asked_on_zeros(func, args, kwargs, inference, at_hints=not own)
    if asked is None:
        return []
    seen, bumps = set(), []
    for t, real in zip(pytree.tree_leaves((args, kwargs)), pytree.tree_leaves(asked[0]), strict=True):
        if id(t) in written and id(t) not in seen:
            seen.add(id(t))
            bumps.append((t, _count(real) - own))
    return [(t, n) for t, n in bumps if n > 0]


def _asked_on_zeros(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], inference: Inference, at_hints: bool = False
) -> tuple[tuple[Any, Any], Any] | None:
    """((the operands, the result)) of eager's `func` run on real zeros laid out as the operands are, outside the
    program's modes; None where it cannot be asked (an operand covering many elements, a kernel that raises on zeros,
    a symbolic size unless `at_hints`: then it is asked at the symbols' values in this call, and guards fix them, so
    that the answer holds for every call the entry accepts)."""
    fixed: list[torch.SymInt] = []

    def value(d: int | torch.SymInt) -> int:
        if type(d) is int:
            return d
        if not at_hints:
            raise _NotAsked
        fixed.append(cast(torch.SymInt, d))
        return hint_of(d)

    def real(t: torch.Tensor) -> torch.Tensor:
        size, stride, offset = [value(s) for s in t.shape], [value(s) for s in t.stride()], value(t.storage_offset())
        extent = offset + sum((s - 1) * abs(st) for s, st in zip(size, stride, strict=True)) + 1
        if extent > _PROBE_NUMEL:
            raise _NotAsked
        with torch.inference_mode(inference(t)):
            return torch.zeros(max(extent, 0), dtype=t.dtype, device=t.device).as_strided(size, stride, offset)

    try:
        with outside_current_modes(), torch._C._ForceDispatchKeyGuard(*_TOP_LEVEL_KEYS), torch.no_grad():
            real_operands = pytree.tree_map_only(
                torch.SymInt, value, pytree.tree_map_only(torch.Tensor, real, (args, kwargs))
            )
            out = func(*real_operands[0], **real_operands[1])
    except Exception:  # (_NotAsked, or the kernel refuses zeros: not asked)
        return None
    for d in fixed:
        guard_int(d)
    return real_operands, out


def _count(t: torch.Tensor) -> int:
    return 0 if t.is_inference() else int(t._version)  # (an inference tensor has no counter)


class _NotAsked(Exception):
    """A tensor eager's kernel cannot be asked about (the module's docstring)."""
