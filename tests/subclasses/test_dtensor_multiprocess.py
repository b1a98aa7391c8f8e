"""torch's DTensor through subclassaot on a world of 2: gloo on 127.0.0.1, spawned ranks (distributed_worker), each
scenario of dtensor_scenarios compared with eager by the parity oracle on every rank. Redistributions here are real
collectives inside the traced graphs (all_gather for Shard -> Replicate), run at run time.

One scenario (the all_gather inside a graph) stays in CI; the full set is `slow`.
"""

from __future__ import annotations

import pytest

from tests.subclasses import dtensor_scenarios
from tests.subclasses.distributed_worker import DTENSOR, run_scenarios


def test_redistribute_all_gather_in_graph_on_two_ranks() -> None:
    name = f"{DTENSOR}redistribute"
    result = run_scenarios([name], world=2, timeout=120.0)[name]
    assert result == "ok", result


@pytest.fixture(scope="module")
def world_of_two() -> dict[str, str]:
    names = [f"{DTENSOR}{n}" for n in dtensor_scenarios.ALL if n != "redistribute"]
    return run_scenarios(names, world=2, timeout=400.0)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in dtensor_scenarios.ALL if n != "redistribute"])
def test_dtensor_scenario_on_two_ranks(world_of_two: dict[str, str], name: str) -> None:
    result = world_of_two[f"{DTENSOR}{name}"]
    assert result == "ok", result
