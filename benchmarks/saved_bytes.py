"""Saved activations, ours against eager, over the training corpora (Note [Training Through A Joint Graph]).

Run: `python -m benchmarks.saved_bytes` from the repository root. For every program of
tests/pipeline/test_corpus_training.py (CASES, ALIASED_TRAINING) and test_corpus_subclass.py that eager runs: one call under
`torch.autograd.graph.saved_tensors_hooks`, summing the nbytes of the unique storages packed (a subclass counted
through its inner tensors), eager against `subclassaot.compile(backend="eager")` (called once first, so that the
count is the cached entry's). Prints the programs where ours saves more than eager (the target: none).
"""

from __future__ import annotations

import copy
import importlib
import logging
import warnings
from collections.abc import Callable, Sequence

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

import subclassaot
from subclassaot.tools.parity import Call, fresh_call
from tests.pipeline.corpus import Case

CORPORA = (
    ("tests.pipeline.test_corpus_training", "CASES"),
    ("tests.pipeline.test_corpus_training", "ALIASED_TRAINING"),
    ("tests.pipeline.test_corpus_subclass", "CASES"),
)


def inner_tensors(t: torch.Tensor) -> list[torch.Tensor]:
    if not is_traceable_wrapper_subclass(t):
        return [t]
    names, _ = t.__tensor_flatten__()
    return [leaf for name in names for leaf in inner_tensors(getattr(t, name))]


def saved_bytes(fn: Callable[..., object], call: Call) -> int:
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        for leaf in inner_tensors(t):
            storages[leaf.untyped_storage().data_ptr()] = leaf.untyped_storage().nbytes()
        return t

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*call.args, **call.kwargs)
    return sum(storages.values())


def measure(cases: Sequence[Case]) -> list[tuple[str, int, int]]:
    """(program, eager's saved bytes, ours) per program eager runs."""
    rows = []
    for case in cases:
        if case.eager_raises:
            continue
        fn = case.fn
        eager_fn = copy.deepcopy(fn) if isinstance(fn, torch.nn.Module) else fn
        target = copy.deepcopy(fn) if isinstance(fn, torch.nn.Module) else fn
        ours = subclassaot.compile(target, backend="eager", **case.compile_kwargs)  # type: ignore[call-overload]
        first = fresh_call(case.make_inputs)
        with torch.enable_grad():
            ours(*first.args, **first.kwargs)
        eager = saved_bytes(eager_fn, fresh_call(case.make_inputs))
        rows.append((case.name, eager, saved_bytes(ours, fresh_call(case.make_inputs))))
    return rows


def main() -> None:
    logging.disable(logging.CRITICAL)
    warnings.filterwarnings("ignore")
    for module_name, attr in CORPORA:
        rows = measure(getattr(importlib.import_module(module_name), attr))
        worse = [r for r in rows if r[2] > r[1]]
        eager_total, ours_total = sum(r[1] for r in rows), sum(r[2] for r in rows)
        print(f"{module_name}.{attr}: {len(rows)} programs; saved bytes eager {eager_total}, ours {ours_total}")
        print(f"  ours > eager in {len(worse)} programs" + "".join(f"\n    {n}: {o} vs {e}" for n, e, o in worse))


if __name__ == "__main__":
    main()
