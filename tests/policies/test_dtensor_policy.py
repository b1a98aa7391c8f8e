"""The mark_dynamic policy of torch's DTensor (Note [DTensor Dims Are Tied To Their Local Dims]), on stand-ins that
carry a DTensor's placements and mesh shape (no process group needed); the pipeline runs it in
tests/subclasses/dtensor_scenarios.py (dynamic_batch) on one and two ranks."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch.distributed.tensor import Replicate, Shard

from policies import PolicyError
from policies.dtensor import dtensor_mark_dynamic, dtensor_relations, uneven_dims


def _standin(shape: tuple[int, ...], mesh_shape: tuple[int, ...], placements: tuple[object, ...]) -> torch.Tensor:
    t = torch.empty(shape)
    t.placements = placements  # type: ignore[attr-defined]
    t.device_mesh = SimpleNamespace(shape=mesh_shape)  # type: ignore[attr-defined]
    return t


def test_sharded_dim_is_local_dim_times_shard_count() -> None:
    policy = dtensor_mark_dynamic(_standin((8, 3), (2, 2), (Shard(0), Shard(0))), (0,), 4, 16)
    assert [repr(r) for r in policy.relations] == ["size(0) == _local_tensor.size(0) * 4"]
    local = policy.inner["_local_tensor"]
    assert isinstance(local, type(policy.outer))
    assert (local.sizes[0].min, local.sizes[0].max) == (1, 4)


def test_unsharded_dim_is_the_local_dim() -> None:
    policy = dtensor_mark_dynamic(_standin((8, 3), (2,), (Replicate(),)), (0, 1), None, None)
    assert [repr(r) for r in policy.relations] == [
        "_local_tensor.size(0) == size(0)",
        "_local_tensor.size(1) == size(1)",
    ]


def test_uneven_sharded_dim_is_a_policy_error() -> None:
    with pytest.raises(
        PolicyError, match=r"mark_dynamic\(x, 0\): dim 0 of this DTensor \(size 5\) is sharded unevenly over 2 ranks"
    ):
        dtensor_mark_dynamic(_standin((5, 3), (2,), (Shard(0),)), (0,), None, None)


def test_every_dim_is_tied_for_automatic_dynamic_except_uneven_shards() -> None:

    even = dtensor_relations(_standin((8, 3), (2,), (Shard(0),)))
    assert [repr(r) for r in even] == ["size(0) == _local_tensor.size(0) * 2", "_local_tensor.size(1) == size(1)"]
    uneven = dtensor_relations(_standin((5, 3), (2,), (Shard(0),)))
    assert [repr(r) for r in uneven] == ["_local_tensor.size(1) == size(1)"]


def test_uneven_sharded_dims_are_named() -> None:
    assert uneven_dims(_standin((5, 4), (2,), (Shard(0),))) == (0,)
    assert uneven_dims(_standin((6, 5), (2,), (Shard(1),))) == (1,)
    assert uneven_dims(_standin((5, 5), (2,), (Replicate(),))) == ()
