"""Multi-process scenarios for ShardedTensor: run under gloo on 127.0.0.1, one result per scenario per rank.

`run_scenarios(names, world=2, timeout=...)` starts `python -m tests.subclasses.distributed_worker` in a subprocess
(bounded by `timeout`: a hang kills the whole group and every scenario fails), which spawns `world` ranks; each rank
runs the scenarios in order and writes {name: "ok" | traceback} to a JSON file. Names starting "dtensor." are
torch DTensor scenarios (dtensor_scenarios), run over a DeviceMesh of every rank.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing

from subclasses.distributed import MeshSpec, mesh_from_group
from tests.subclasses import distributed_scenarios, dtensor_scenarios

Scenario = Callable[[MeshSpec], None]
DTENSOR = "dtensor."  # a scenario name with this prefix is one of dtensor_scenarios.ALL, run over torch's DeviceMesh
REPO = Path(__file__).resolve().parents[2]


def spawn(fn: Callable[..., None], args: tuple[object, ...], nprocs: int) -> None:
    """`torch.multiprocessing.spawn(fn, args, nprocs)`: start `nprocs` processes running `fn(rank, *args)`, join."""
    start = torch.multiprocessing.spawn  # type: ignore[attr-defined]  # untyped and not re-exported in the stub
    start(fn, args=args, nprocs=nprocs)  # type: ignore[no-untyped-call]  # untyped in torch


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def run_scenarios(names: list[str], *, world: int = 2, timeout: float = 80.0) -> dict[str, str]:
    """Scenario name -> "ok" when every rank passed, else the first failing rank's traceback."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result"
        cmd = [sys.executable, "-m", "tests.subclasses.distributed_worker", "--world", str(world)]
        cmd += ["--port", str(free_port()), "--out", str(out), *names]
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        try:
            proc = subprocess.run(cmd, cwd=REPO, env=env, timeout=timeout, capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            return dict.fromkeys(names, f"timed out after {timeout}s (a collective hung?)")
        results: dict[str, str] = dict.fromkeys(names, f"rank results missing; worker rc={proc.returncode}\n")
        per_rank = [Path(f"{out}.{r}") for r in range(world)]
        if not all(p.exists() for p in per_rank):
            return {n: results[n] + proc.stderr[-4000:] for n in names}
        loaded = [json.loads(p.read_text()) for p in per_rank]
        for name in names:
            bad = [f"rank {r}: {res.get(name, 'not run')}" for r, res in enumerate(loaded) if res.get(name) != "ok"]
            results[name] = "ok" if not bad else "\n".join(bad)
        return results


def _rank_main(rank: int, world: int, port: int, out: str, names: list[str]) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = mesh_from_group()
    device_mesh = dtensor_scenarios.world_mesh() if any(n.startswith(DTENSOR) for n in names) else None
    results: dict[str, str] = {}
    for name in names:
        try:
            if device_mesh is not None and name.startswith(DTENSOR):
                dtensor_scenarios.ALL[name.removeprefix(DTENSOR)](device_mesh)
            else:
                getattr(distributed_scenarios, name)(mesh)
            results[name] = "ok"
        except Exception:
            results[name] = traceback.format_exc()
        dist.barrier()
    Path(f"{out}.{rank}").write_text(json.dumps(results))
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("names", nargs="+")
    ns = parser.parse_args()
    spawn(_rank_main, (ns.world, ns.port, ns.out, ns.names), ns.world)


if __name__ == "__main__":
    main()
