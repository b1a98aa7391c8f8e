"""Which storages a program being generated has freed, and which it may free: the fuzzer's storage-resize family.

Input: the generator's environment (variable id -> the real tensor it holds while the program is drawn) and each op
as it is run. Output: `StorageLiveness`, asked whether a tensor is dead (its storage holds 0 bytes since the
program freed it), whether a variable may be freed, and how to fill a freed storage again.
Invariants: eager PyTorch does not check a freed storage before it reads it (it segfaults), so a program never reads
one: no op, output, gradient or oracle check reaches a dead storage. Hence a storage is freed only where nothing else
can reach it: not an input's (the oracle reads inputs after the call), not a subclass's inner tensor, and not saved
for backward (recorded by a saved-tensors hook while the program is drawn); it is refilled only through a tensor
that covers every byte of it (a partial fill would leave uninitialized bytes that no two runs share). An input whose
base is freed on entry (FSDP2's sharded parameter) is refilled by the program, or at its end.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Sequence

import torch

from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.pipeline.rules.swap_record import element_offsets
from subclassaot.tools.fuzz_ops import Params
from subclassaot.tools.fuzz_program import Op, Program, make_inputs, run_op
from subclassaot.tools.parity import seed_rng

__all__ = ["StorageLiveness", "storage_safe"]

_REFILL_VALUE = 0.5  # what an input left freed by the program is filled with at its end


def _key(t: torch.Tensor) -> int | None:
    try:
        return int(t.untyped_storage()._cdata)
    except (RuntimeError, NotImplementedError):  # a tensor with no storage to name
        return None


def _keys(t: torch.Tensor) -> set[int]:
    leaves = flatten_subclass(t, "t")[1] if is_traceable_subclass(t) else [t]
    return {k for u in leaves if (k := _key(u)) is not None}


class StorageLiveness:
    """The storages freed so far (with their size before) and those autograd saved, for one program."""

    def __init__(self, *, inputs: frozenset[int]) -> None:
        self._inputs = inputs  # the variable ids of the program's inputs
        self._freed: dict[int, int] = {}  # storage key -> its bytes before it was freed
        self._saved: set[int] = set()  # storage keys of tensors saved for backward

    @property
    def inputs(self) -> frozenset[int]:
        return self._inputs

    def dead(self, t: torch.Tensor) -> bool:
        return not self._freed.keys().isdisjoint(_keys(t))

    def free_inputs(self, env: dict[int, torch.Tensor], variables: Sequence[int]) -> None:
        """Inputs passed whole from a base freed on entry (contiguous: its bytes are its elements')."""
        for var in variables:
            key = _key(env[var])
            assert key is not None, "BUG: a freed input is a plain tensor"
            self._freed[key] = env[var].numel() * env[var].element_size()

    @contextlib.contextmanager
    def recording_saved(self) -> Iterator[None]:
        def pack(t: torch.Tensor) -> torch.Tensor:
            self._saved.update(_keys(t))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield

    def may_free(self, var: int, env: dict[int, torch.Tensor]) -> bool:
        """A plain intermediate whose storage no input, subclass or saved tensor reaches."""
        t = env[var]
        key = _key(t)
        if var in self._inputs or type(t) is not torch.Tensor or key is None or key in self._saved:
            return False
        return not any(key in _keys(u) and (v in self._inputs or type(u) is not torch.Tensor) for v, u in env.items())

    def allows(self, op: Op, env: dict[int, torch.Tensor]) -> bool:
        """Does `op` read only live storages, free only what `may_free` allows and refill a whole storage?"""
        if op.other is not None and self.dead(env[op.other]):
            return False
        if op.name == "storage_refill":
            params = self.refill_params(env[op.src], op.params)
            return params is not None and params[0] == op.params[0]
        if self.dead(env[op.src]):
            return False
        return op.name != "storage_free" or self.may_free(op.src, env)

    def refill_params(self, t: torch.Tensor, params: Params) -> Params | None:
        """`(bytes, *params)` when `t` covers every byte of its freed storage exactly once; else None."""
        nbytes = self._freed.get(_key(t) or -1)
        size = t.element_size()
        if nbytes is None or nbytes % size:
            return None
        offsets = element_offsets(t)
        if offsets is None or sorted(offsets) != list(range(nbytes // size)):
            return None
        return (nbytes, *params[1:])

    def run(self, op: Op, env: dict[int, torch.Tensor]) -> None:
        """Run `op` (raising as eager does) and track what it freed or refilled."""
        key = _key(env[op.src])
        nbytes = env[op.src].untyped_storage().nbytes() if key is not None else 0
        run_op(op, env)
        if key is None:
            return
        if op.name == "storage_free":
            self._freed[key] = nbytes
        elif op.name == "storage_refill":
            del self._freed[key]

    def refill_inputs(self, env: dict[int, torch.Tensor]) -> tuple[Op, ...]:
        """Ops that fill the inputs still freed at the end of the program (the oracle reads every input)."""
        ops = []
        for var in sorted(self._inputs):
            if self.dead(env[var]):
                params = self.refill_params(env[var], (0, _REFILL_VALUE))
                assert params is not None, "BUG: a freed input covers its storage"
                op = Op(name="storage_refill", src=var, params=params, scopes=("no_grad",))
                self.run(op, env)
                ops.append(op)
        return tuple(ops)


def storage_safe(program: Program) -> bool:
    """Does `program` keep the rules above? The generator keeps them as it draws; a shrunk program may not (it can
    lose the op that refilled a storage, or the `set_` that made a freed variable an intermediate's), and running
    one that reads a freed storage would crash the process, so the shrinker asks first."""
    if not any(b.freed for b in program.bases) and not any(op.name.startswith("storage_") for op in program.ops):
        return True
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")
        seed_rng(0)
        env = dict(zip((s.var for s in program.inputs), make_inputs(program), strict=True))
        storages = StorageLiveness(inputs=frozenset(env))
        storages.free_inputs(env, [s.var for s in program.inputs if program.bases[s.base].freed])
        with torch.set_grad_enabled(program.grad_mode), storages.recording_saved():
            for op in program.ops:
                if not storages.allows(op, env):
                    return False
                try:
                    storages.run(op, env)
                except Exception:  # eager raises here, so the oracle runs nothing after it
                    return True
        return not any(storages.dead(env[v]) for v in (*storages.inputs, *program.outputs))
