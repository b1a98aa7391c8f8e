"""ShardedTensor on a world of 2: gloo on 127.0.0.1, spawned ranks, one bounded subprocess for every scenario.

All scenarios run in one worker (one process-group start-up); a hang kills the worker at the timeout and fails
every scenario with "timed out" instead of stalling the suite.
"""

from __future__ import annotations

import pytest

from tests.subclasses import distributed_scenarios
from tests.subclasses.distributed_worker import run_scenarios

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def world_of_two() -> dict[str, str]:
    return run_scenarios(distributed_scenarios.ALL, world=2, timeout=80.0)


@pytest.mark.parametrize(
    "name",
    list(distributed_scenarios.ALL),
)
def test_scenario_world_of_two(world_of_two: dict[str, str], name: str) -> None:
    result = world_of_two[name]
    assert result == "ok", result
