"""The training worker of bench/distributed.py: `resume_lab train` several times in one launch,
with a clock on the update boundaries.

    torchrun --standalone --nproc-per-node W -m bench.distributed_train \
        --out RESULT.json --scratch DIR --runs R -- --steps N --save-every U --shards L
    python -m bench.distributed_train ...        # W = 1: no torchrun, the same code

Each run is the lab's command line itself, `resume_lab.cli.main(["train", "--output-dir", ...])`,
into a fresh folder, with two changes that sit outside the timed updates: one more callback, last
in the list, that reads the clock at every update boundary (after the checkpoint callback's work)
and at the start of fit; and the process group is kept between runs (the lab's `leave()` after
each run only waits at a barrier; the real one runs once, at the end). The first run is an
untimed warm-up. Rank 0 writes, per run, the boundary times and the lab's own step_time of every
update (timing.json); bench/distributed.py picks the updates to count.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import time
from pathlib import Path
from typing import Any

import torch.distributed as dist

from resume_lab import cli, session, world
from resume_lab.events import Callback
from resume_lab.outputs import TIMING


class BoundaryClock(Callback):
    """perf_counter at fit start (index 0) and at the end of every update's boundary events."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.steps: list[int] = []
        self.eval_every = 0

    def on_fit_start(self, trainer: Any) -> None:
        self.eval_every = trainer.config.eval_every
        self.steps, self.times = [trainer.step], [time.perf_counter()]

    def on_boundary(self, trainer: Any) -> None:
        self.steps.append(trainer.step)
        self.times.append(time.perf_counter())


def keep_group(*objects: Any) -> None:
    """What the lab's leave() does, but the group stays for the next run."""
    del objects
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
    gc.collect()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.distributed_train")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scratch", type=Path, required=True)
    parser.add_argument("--runs", type=int, required=True, help="timed runs, after one warm-up")
    parser.add_argument("train", nargs=argparse.REMAINDER, help="-- then `train` options")
    args = parser.parse_args(argv)
    options = [a for a in args.train if a != "--"]

    clocks: list[BoundaryClock] = []
    real_train = cli.train_in_folder

    def clocked(options: Any, *, extra_callbacks: Any = None, log: Any = print) -> Any:
        clock = BoundaryClock()
        clocks.append(clock)
        return real_train(options, extra_callbacks=[*(extra_callbacks or []), clock], log=log)

    # the names this worker replaces: if the lab renames them, fail here, not measure nothing
    assert session.leave is world.leave and cli.train_in_folder is session.train_in_folder
    cli.train_in_folder = clocked  # type: ignore[assignment]
    session.leave = keep_group  # type: ignore[assignment]
    runs: list[dict[str, Any]] = []
    rank, size = 0, 1
    for run in range(args.runs + 1):
        folder = args.scratch / f"run-{run}"
        status = cli.main(["train", "--output-dir", str(folder), "--quiet", *options])
        if status != 0:
            raise SystemExit(f"resume_lab train exited {status}")
        if dist.is_initialized():
            rank, size = dist.get_rank(), dist.get_world_size()
        clock = clocks[-1]
        assert len(clocks) == run + 1 and clock.steps[-1] > 0, "the clock saw no update"
        if rank == 0:
            timing = json.loads((folder / TIMING).read_text("utf8"))
            if run > 0:  # the first is the warm-up
                runs.append(
                    {
                        "steps": clock.steps,
                        "boundary_s": [t - clock.times[0] for t in clock.times],
                        "step_time_s": [r["step_time"] for r in timing],
                        "eval_every": clock.eval_every,
                    }
                )
            shutil.rmtree(folder)
        if dist.is_initialized():
            dist.barrier()
    if rank == 0:
        args.out.write_text(json.dumps({"world_size": size, "runs": runs}), "utf8")
    world.leave()  # barrier, gc, then destroy: no exit hang
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
