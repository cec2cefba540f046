"""The lab's training throughput at several world sizes on L logical shards.

`measure(plan)` launches this module's worker, `main`, once per world size (bench/launch.py:
plain `python` for W = 1, as the lab's own tests run it; torchrun for W > 1; OMP_NUM_THREADS=1
and one torch thread per process, under a timeout):

    torchrun --standalone --nproc-per-node W -m bench.measurements.distributed_train \
        --out RESULT.json --scratch DIR --runs R -- --steps N --save-every U --shards L
    python -m bench.measurements.distributed_train ...        # W = 1: the same code

The worker runs `resume_lab train` several times in one launch, with a clock on the update
boundaries. Each run is the lab's command line itself,
`resume_lab.cli.main(["train", "--output-dir", ...])`, into a fresh folder, with two changes that
sit outside the timed updates: one more callback, last in the list, that reads the clock at every
update boundary (after the checkpoint callback's work) and at the start of fit; and the process
group is kept between runs (the lab's `leave()` after each run only waits at a barrier; the real
one runs once, at the end). The first run is an untimed warm-up. Rank 0 writes, per run, the
boundary times and the lab's own step_time of every update (timing.json).

A run's rate counts the updates after the first `warmup_updates`, from one update boundary to the
next (the update, its callbacks, the ranks' stop agreement), leaving out the updates that
evaluate (every `eval_every`-th: the evaluation, and the best checkpoint it may write):
`counted_updates / loop_s`. Start-up, process-group set-up and the final save are outside it.
The lab's own step_time (the update alone, without callbacks or the agreement) is summed over
the same updates.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch.distributed as dist

from resume_lab import cli, session, world
from resume_lab.events import Callback
from resume_lab.outputs import TIMING

from .. import provenance
from ..launch import launch
from ..plan import Plan


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
    parser = argparse.ArgumentParser(prog="python -m bench.measurements.distributed_train")
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


def summarise_run(run: dict[str, Any], warmup: int) -> dict[str, Any]:
    """The counted updates of one run: after `warmup`, not evaluating; their boundary-to-boundary
    time and the lab's step_time over the same updates."""
    steps, times, every = run["steps"], run["boundary_s"], run["eval_every"]
    counted, loop_s, step_s, eval_s = 0, 0.0, 0.0, []
    for i in range(1, len(steps)):
        step, interval = steps[i], times[i] - times[i - 1]
        if step <= warmup:
            continue
        if every and step % every == 0:
            eval_s.append(interval)
            continue
        counted += 1
        loop_s += interval
        step_s += run["step_time_s"][step - 1]
    return {
        "updates": steps[-1],
        "counted_updates": counted,
        "loop_s": loop_s,
        "step_time_sum_s": step_s,
        "eval_update_s": statistics.median(eval_s) if eval_s else None,
        "first_update_s": times[1] - times[0],
    }


def measure(plan: Plan) -> dict[str, Any]:
    """One launch per world size; every timed run's counted updates."""
    steps, shards = plan.distributed_steps, plan.distributed_shards
    lab = ["--steps", str(steps), "--save-every", str(10 * steps), "--shards", str(shards)]
    worlds: dict[str, Any] = {}
    eval_every = 0
    with tempfile.TemporaryDirectory(prefix="bench-distributed-train-") as scratch:
        for w in plan.distributed_worlds:
            out, folder = Path(scratch) / f"train-w{w}.json", Path(scratch) / f"train-w{w}"
            folder.mkdir()
            args = ["--out", str(out), "--scratch", str(folder)]
            args += ["--runs", str(plan.distributed_train_runs)]
            load = provenance.load_average()
            module = "bench.measurements.distributed_train"
            wall = launch(w, module, [*args, "--", *lab], plan.distributed_timeout_s)
            found = json.loads(out.read_text("utf8"))
            assert found["world_size"] == w, found["world_size"]
            eval_every = found["runs"][0]["eval_every"]
            worlds[f"w_{w}"] = {
                "world_size": w,
                "processes_per_core": w / provenance.cores(),
                "runs": [summarise_run(r, plan.distributed_warmup_updates) for r in found["runs"]],
                "launch_s": wall,
                "load_average_start": load,
                "load_average_end": provenance.load_average(),
            }
    return {
        "shards": shards,
        "steps": steps,
        "save_every": 10 * steps,
        "warmup_updates": plan.distributed_warmup_updates,
        "eval_every": eval_every,
        "runs_per_world": plan.distributed_train_runs,
        "cores": provenance.cores(),
        "worlds": worlds,
    }


if __name__ == "__main__":
    raise SystemExit(main())
