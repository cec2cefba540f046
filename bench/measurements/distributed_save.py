"""A DCP checkpoint save over gloo ranks against one process saving the same bytes.

`measure(plan)` launches this module's worker, `main`, one process per rank under torchrun
(bench/launch.py: gloo, CPU, OMP_NUM_THREADS=1, one torch thread, under a timeout):

    torchrun --standalone --nproc-per-node 2 -m bench.measurements.distributed_save \
        --out RESULT.json --scratch DIR --size mb_10=10000000 --repeats 7 [--sync-before-save]

Per size, the same state as save_speed.py's (16 float32 tensors adding up to the size, and a
step), four ways, timed side by side (one untimed warm-up each, then interleaved, alternating who
goes first):

- `floor`: rank 0 alone, torch.save of the whole state into one file, then one fsync;
- `save_checkpoint`: rank 0 alone, the lab's one-process save (hashed, fsynced, committed);
- `dcp_save`: every rank, `dcp.save` of the state sharded over the ranks (each tensor a DTensor,
  `Shard(0)` on a CPU mesh: each rank holds and writes its half, as under FSDP2);
- `dcp_async`: every rank, `dcp.async_save` of the same into a process group of its own (as the
  lab does): `dcp_async_stall` is the time until it returns (the state is copied, staged, before
  it does: what training waits for), `dcp_async_done` until its future's result (the files are
  written, fsynced, and `.metadata` is committed). Nothing trains meanwhile: the write runs alone.

While rank 0 saves alone, the other rank waits in a barrier. A rank's time starts after a barrier;
a collective save's time is the slowest rank's. Every save goes to a fresh directory on the same
disk; with --sync-before-save, os.sync() runs before each, so no save pays for another's
write-back. Once, untimed, every save is loaded back and compared with the state, and the
asynchronous save is shown to have copied the state before returning. Rank 0 writes the numbers
to --out; the process group is left the way that does not hang (barrier, gc, destroy).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard, distribute_tensor

from resume_lab.checkpoint import STATE_FILE, save_checkpoint, verify

from .. import provenance
from ..launch import launch
from ..plan import Plan
from ..timing import medians, self_timed, side_by_side
from .save_speed import fsync_file, make_state

VARIANTS = ("floor", "save_checkpoint", "dcp_save", "dcp_async")
ALONE = ("floor", "save_checkpoint")  # rank 0 only


def sharded(state: dict[str, Any], mesh: Any) -> dict[str, Any]:
    """The same state with every tensor a DTensor split along dim 0 over the mesh."""
    model = {k: distribute_tensor(t, mesh, [Shard(0)]) for k, t in state["model"].items()}
    return {"model": model, "step": state["step"]}


def slowest(seconds: float) -> float:
    """The largest of every rank's `seconds`."""
    box = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(box, op=dist.ReduceOp.MAX)
    return float(box.item())


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


class Sizes:
    """One size's state, its sharded twin, where each variant writes, and how each is timed."""

    def __init__(self, key: str, total: int, scratch: Path, mesh: Any, group: Any) -> None:
        self.rank = dist.get_rank()
        self.state = make_state(total)
        self.shards = sharded(self.state, mesh)
        if self.rank != 0:
            self.state = {}  # only rank 0 saves the whole state
        self.group = group
        self.paths = {
            "floor": scratch / f"{key}-floor.pt",
            "save_checkpoint": scratch / f"{key}-lab",
            "dcp_save": scratch / f"{key}-dcp",
            "dcp_async": scratch / f"{key}-dcp-async",
        }

    def clean(self, sync: bool) -> None:
        if self.rank == 0:
            for path in self.paths.values():
                if path.is_dir():
                    shutil.rmtree(path)
                path.unlink(missing_ok=True)
            if sync:
                os.sync()  # no variant pays for another's write-back
        dist.barrier()

    def run(self, variant: str) -> dict[str, float]:
        """Every rank calls it; the times (rank 0's alone, or the slowest rank's)."""
        path = self.paths[variant]
        if variant in ALONE:
            times: dict[str, float] = {}
            if self.rank == 0:
                start = time.perf_counter()
                if variant == "floor":
                    torch.save(self.state, path)
                    fsync_file(path)
                else:
                    save_checkpoint(
                        {STATE_FILE: self.state}, path.parent, path.name, step=0, config={}
                    )
                times[variant] = time.perf_counter() - start
            dist.barrier()
            return times
        if variant == "dcp_save":
            start = time.perf_counter()
            dcp.save(self.shards, storage_writer=FileSystemWriter(path, overwrite=False))
            return {"dcp_save": slowest(time.perf_counter() - start)}
        start = time.perf_counter()
        future = dcp.async_save(
            self.shards,
            storage_writer=FileSystemWriter(path, overwrite=False),
            process_group=self.group,
        )
        returned = time.perf_counter()
        future.result()
        done = time.perf_counter()
        return {
            "dcp_async_stall": slowest(returned - start),
            "dcp_async_done": slowest(done - start),
        }

    def check(self) -> dict[str, Any]:
        """Untimed: every save loads back equal; async_save copied the state before returning."""
        found = {"file_bytes": 0, "dcp_bytes": 0, "dcp_files": 0}
        for variant in VARIANTS:
            self.clean(sync=False)
            if variant == "dcp_async":  # change the live tensors as soon as it returns
                before = {k: t.to_local().clone() for k, t in self.shards["model"].items()}
                future = dcp.async_save(
                    self.shards,
                    storage_writer=FileSystemWriter(self.paths[variant], overwrite=False),
                    process_group=self.group,
                )
                for k, t in self.shards["model"].items():
                    t.to_local().add_(1.0)  # the DTensor's own storage
                    assert not torch.equal(t.to_local(), before[k])
                future.result()
                for k, t in self.shards["model"].items():
                    t.to_local().copy_(before[k])
            else:
                self.run(variant)
            if variant in ALONE:
                if self.rank == 0:
                    if variant == "floor":
                        loaded = torch.load(self.paths[variant], weights_only=True)
                    else:
                        verify(self.paths[variant])  # sizes and hashes match the manifest
                        loaded = torch.load(self.paths[variant] / STATE_FILE, weights_only=True)
                    for k, t in self.state["model"].items():
                        assert torch.equal(loaded["model"][k], t), (variant, k)
                    if variant == "floor":
                        found["file_bytes"] = self.paths[variant].stat().st_size
                continue
            template = {
                "model": {k: torch.zeros_like(t) for k, t in self.shards["model"].items()},
                "step": -1,
            }
            dcp.load(template, storage_reader=FileSystemReader(self.paths[variant]))
            assert template["step"] == 0, variant
            for k, t in self.shards["model"].items():
                got = template["model"][k]
                assert isinstance(got, DTensor)
                assert torch.equal(got.to_local(), t.to_local()), (variant, k)
            if variant == "dcp_save" and self.rank == 0:
                found["dcp_bytes"] = folder_bytes(self.paths[variant])
                found["dcp_files"] = len(list(self.paths[variant].iterdir()))
        self.clean(sync=False)
        return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.measurements.distributed_save")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scratch", type=Path, required=True)
    parser.add_argument("--size", action="append", required=True, help="KEY=BYTES")
    parser.add_argument("--repeats", type=int, required=True)
    parser.add_argument("--sync-before-save", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    group = dist.new_group(backend="gloo")  # async_save's collectives run from a thread
    results: dict[str, Any] = {}
    for spec in args.size:
        key, _, total = spec.partition("=")
        sizes = Sizes(key, int(total), args.scratch, mesh, group)
        found = sizes.check()
        runs = side_by_side(
            {variant: functools.partial(sizes.run, variant) for variant in VARIANTS},
            args.repeats,
            before=functools.partial(sizes.clean, args.sync_before_save),
            clock=self_timed,  # each rank's time after a barrier; a collective's, the slowest
        )
        sizes.clean(sync=False)
        results[key] = {"state_bytes": int(total), "tensors": len(sizes.shards["model"])}
        results[key] |= found | {"staged_copy_checked": True, "runs_s": runs}
        del sizes
        gc.collect()
    if rank == 0:
        args.out.write_text(json.dumps({"world_size": world, "sizes": results}), "utf8")
    # leave without the exit hang a gloo process can show
    del mesh, group
    dist.barrier()
    gc.collect()
    dist.destroy_process_group()
    return 0


def measure(plan: Plan) -> dict[str, Any]:
    """Launch the ranks; their runs per size, with each variant's median."""
    with tempfile.TemporaryDirectory(prefix="bench-distributed-save-") as folder:
        scratch = Path(folder)
        out = scratch / "save.json"
        args = ["--out", str(out), "--scratch", str(scratch)]
        args += ["--repeats", str(plan.distributed_save_repeats)]
        args += [f"--size={key}={total}" for key, total in plan.distributed_save_sizes]
        args += ["--sync-before-save"] if plan.distributed_sync_before_save else []
        load = provenance.load_average()
        module = "bench.measurements.distributed_save"
        wall = launch(plan.distributed_save_world, module, args, plan.distributed_timeout_s)
        found = json.loads(out.read_text("utf8"))
    for size in found["sizes"].values():
        size["median_s"] = medians(size["runs_s"])
    return found | {
        "repeats": plan.distributed_save_repeats,
        "sync_before_save": plan.distributed_sync_before_save,
        "launch_s": wall,
        "load_average_start": load,
        "load_average_end": provenance.load_average(),
    }


if __name__ == "__main__":
    raise SystemExit(main())
