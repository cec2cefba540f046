"""Distributed: a DCP checkpoint save over 2 ranks against one process saving the same bytes, and
the lab's training throughput at W = 1, 2 and 4 processes on L = 4 logical shards.

Both run in processes of their own, launched under a timeout (a gloo process can hang at exit;
an overrun kills the launch's whole process group and fails the measurement), with
OMP_NUM_THREADS=1 and one torch thread per process:

- `save`: bench/distributed_save.py under `torchrun --nproc-per-node 2` (gloo, CPU): per size,
  torch.save + fsync and the lab's save_checkpoint by one process, `dcp.save` and
  `dcp.async_save` (the stall until it returns, and the time until its write is done) of the same
  state sharded over the two ranks; interleaved, one warm-up each.
- `train`: bench/distributed_train.py, one launch per world size (plain `python` for W = 1, as
  the lab's own tests run it; torchrun for W > 1), each running `resume_lab train --shards 4`
  once untimed and then `train_runs` times. A run's rate counts the updates after the first
  `warmup_updates`, from one update boundary to the next (the update, its callbacks, the ranks'
  stop agreement), leaving out the updates that evaluate (every `eval_every`-th: the evaluation,
  and the best checkpoint it may write): `counted_updates / loop_s`. Start-up, process-group
  set-up and the final save are outside it. The lab's own step_time (timing.json: the update
  alone, without callbacks or the agreement) is summed over the same updates.

The results hold numbers only; bench/distributed_view.py words them for the performance page.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from resume_lab.launcher import command, environment
from resume_lab.launcher import launch as run_to_end

from . import provenance
from .common import ROOT
from .plan import Plan


@dataclass(frozen=True)
class DistributedPlan:
    save_world: int
    save_sizes: tuple[tuple[str, int], ...]  # (key, bytes of float32 data)
    save_repeats: int
    sync_before_save: bool
    worlds: tuple[int, ...]
    shards: int
    steps: int
    warmup_updates: int  # not counted: the first updates of a run
    train_runs: int  # timed runs per world size, after one untimed
    timeout_s: float  # per launch


FULL = DistributedPlan(
    save_world=2,
    save_sizes=(("mb_10", 10**7), ("mb_100", 10**8)),
    save_repeats=7,
    sync_before_save=True,
    worlds=(1, 2, 4),
    shards=4,
    steps=100,
    warmup_updates=10,
    train_runs=5,
    timeout_s=300.0,
)
QUICK = DistributedPlan(
    save_world=2,
    save_sizes=(("kib_512", 512 * 1024),),
    save_repeats=1,
    sync_before_save=False,
    worlds=(1, 2),
    shards=2,
    steps=8,
    warmup_updates=2,
    train_runs=1,
    timeout_s=180.0,
)


def plan_for(plan: Plan) -> DistributedPlan:
    return FULL if plan.mode == "full" else QUICK


def launch(world_size: int, module: str, args: list[str], timeout: float) -> float:
    """Run to the end through the lab's launcher and return its wall time; on overrun every
    process of the launch (torchrun and each worker's session) is killed and it fails."""
    argv = command(world_size, module, args)
    done = run_to_end(argv, timeout=timeout, env=environment(ROOT), cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"exit {done.returncode}: {argv}\n{done.stderr[-3000:]}")
    return done.seconds


def measure_save(p: DistributedPlan, scratch: Path) -> dict[str, Any]:
    out = scratch / "save.json"
    args = ["--out", str(out), "--scratch", str(scratch), "--repeats", str(p.save_repeats)]
    args += [f"--size={key}={total}" for key, total in p.save_sizes]
    args += ["--sync-before-save"] if p.sync_before_save else []
    load = provenance.load_average()
    wall = launch(p.save_world, "bench.distributed_save", args, p.timeout_s)
    found = json.loads(out.read_text("utf8"))
    for size in found["sizes"].values():
        size["median_s"] = {k: statistics.median(v) for k, v in size["runs_s"].items()}
    return found | {
        "repeats": p.save_repeats,
        "sync_before_save": p.sync_before_save,
        "launch_s": wall,
        "load_average_start": load,
        "load_average_end": provenance.load_average(),
    }


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


def measure_train(p: DistributedPlan, scratch: Path) -> dict[str, Any]:
    lab = ["--steps", str(p.steps), "--save-every", str(10 * p.steps), "--shards", str(p.shards)]
    worlds: dict[str, Any] = {}
    eval_every = 0
    for w in p.worlds:
        out, folder = scratch / f"train-w{w}.json", scratch / f"train-w{w}"
        folder.mkdir()
        args = ["--out", str(out), "--scratch", str(folder), "--runs", str(p.train_runs)]
        load = provenance.load_average()
        wall = launch(w, "bench.distributed_train", [*args, "--", *lab], p.timeout_s)
        found = json.loads(out.read_text("utf8"))
        assert found["world_size"] == w, found["world_size"]
        eval_every = found["runs"][0]["eval_every"]
        worlds[f"w_{w}"] = {
            "world_size": w,
            "processes_per_core": w / provenance.cores(),
            "runs": [summarise_run(r, p.warmup_updates) for r in found["runs"]],
            "launch_s": wall,
            "load_average_start": load,
            "load_average_end": provenance.load_average(),
        }
    return {
        "shards": p.shards,
        "steps": p.steps,
        "save_every": 10 * p.steps,
        "warmup_updates": p.warmup_updates,
        "eval_every": eval_every,
        "runs_per_world": p.train_runs,
        "cores": provenance.cores(),
        "worlds": worlds,
    }


def measure(plan: Plan) -> dict[str, Any]:
    p = plan_for(plan)
    setup = {k: v for k, v in asdict(p).items() if k != "save_sizes"}
    setup["save_sizes"] = {key: total for key, total in p.save_sizes}
    setup["worlds"] = list(p.worlds)
    with tempfile.TemporaryDirectory(prefix="bench-distributed-") as scratch:
        save = measure_save(p, Path(scratch))
        train = measure_train(p, Path(scratch))
    return {"setup": setup, "save": save, "train": train}
