"""Test-wide setup, run by pytest before any test module is imported."""

import collections
import os
import zlib

import pytest
import torch

# Without a GPU, Triton kernels run in Triton's CPU interpreter, which is how CI tests them. Triton decides between
# compiling and interpreting when a kernel is decorated, i.e. when a kernels module is imported, so the variable
# must be set here, before any test imports one. `setdefault` leaves an explicit TRITON_INTERPRET=0 alone. The
# library never reads it; see Note [Kernel Dispatch].
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


# CI runs a slice of every sweep (a test parametrized over at least SWEEP variants): the variants whose id hashes to
# 0 mod CI_SHARE, at least one. The others are marked `slow`, run by `pytest -m slow` (everything: `pytest -m ''`).
# The choice hangs on the variant's id alone, so it stays put as variants are added.
SWEEP = 4
CI_SHARE = 8
# The subclasses users already have (PyTorch's, NJT, DTensor, torchao's) run whole in CI: +20 s on 2 cores.
UNSLICED = frozenset(
    f"tests/subclasses/{name}.py"
    for name in (
        "test_torch_subclasses",
        "test_njt",
        "test_dtensor",
        "test_torchao",
        "test_real_subclass_held_out",
    )
)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    sweeps: dict[str, list[pytest.Item]] = collections.defaultdict(list)
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and item.nodeid.split("::", 1)[0] not in UNSLICED:
            sweeps[item.nodeid.split("[", 1)[0]].append(item)
    for variants in sweeps.values():
        if len(variants) < SWEEP:
            continue
        kept = [zlib.crc32(v.callspec.id.encode()) % CI_SHARE == 0 for v in variants]  # type: ignore[attr-defined]
        if not any(kept):
            kept[0] = True
        for v, keep in zip(variants, kept, strict=True):
            if not keep:
                v.add_marker(pytest.mark.slow)
