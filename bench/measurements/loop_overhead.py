"""The loop: Trainer.fit with the lab's policy callbacks (not the PreemptionFlag that `resume-lab
train` adds) against a bare loop doing the same arithmetic on the same objects (checked: both end
with bitwise-equal weights).

Timed from the first update to the last update boundary: the one-off save when fit() ends is not
in it. The Checkpoint callback writes to a RAM-backed folder when there is one, so its saves cost
their serialization, not the disk; their time is measured apart (`save_s`, `saves_per_run`).
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import clip_grad_norm_

from resume_lab.build import build_trainer
from resume_lab.callbacks import Callback, Checkpoint, StopAfter, TimeBudget
from resume_lab.config import LabConfig
from resume_lab.data import make_blobs
from resume_lab.evaluate import evaluate
from resume_lab.progress import Progress

from ..plan import Plan
from ..timing import medians


class UpdateClock(Callback):
    """Last in the list: from the end of on_fit_start to the end of the last update's events."""

    def on_fit_start(self, trainer) -> None:
        self.first = self.last = (time.perf_counter(), time.thread_time())

    def on_boundary(self, trainer) -> None:
        self.last = (time.perf_counter(), time.thread_time())


def time_saves(checkpoint: Checkpoint) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of each Checkpoint.on_boundary call that wrote a file."""
    saves: list[tuple[float, float]] = []
    inner = checkpoint.on_boundary

    def on_boundary(trainer) -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        inner(trainer)
        if trainer.step in (checkpoint.best_step, checkpoint.last_saved_step):  # it saved
            saves.append((time.perf_counter() - wall, time.thread_time() - cpu))

    checkpoint.on_boundary = on_boundary  # an instance attribute: Trainer.emit finds it first
    return saves


# --8<-- [start:bare_loop]
def bare_loop(
    config: LabConfig,
    data,
    updates: int,
) -> tuple[dict[str, float], nn.Module]:
    """The Trainer's arithmetic and nothing else:
    no events, no history, no clocks."""
    # the same fresh objects
    objects = build_trainer(config, init_seed=0, data=data)
    model, optimizer = objects.model, objects.optimizer
    scheduler, sampler = objects.scheduler, objects.sampler
    x, y = data.x_train, data.y_train
    per_epoch = sampler.micro_batches_per_epoch
    micro_batch = config.micro_batch
    model.train()
    wall, cpu = time.perf_counter(), time.thread_time()
    epoch, micro, order = 0, 0, sampler.order(0)
    for step in range(1, updates + 1):
        stop = min(micro + config.accum, per_epoch)
        window = [
            order[i * micro_batch : (i + 1) * micro_batch]
            for i in range(micro, stop)  # this update's micro-batches
        ]
        examples = sum(len(indices) for indices in window)
        for indices in window:
            logits = model(x[indices])
            loss = F.cross_entropy(logits, y[indices], reduction="sum")
            loss = loss / examples
            loss.backward()
        clip_grad_norm_(
            model.parameters(),
            config.max_norm,
            error_if_nonfinite=True,
        )
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        micro = stop
        if micro == per_epoch:
            epoch, micro = epoch + 1, 0
            order = sampler.order(epoch)
        if config.eval_every and step % config.eval_every == 0:
            evaluate(model, data.x_val, data.y_val)
    return {
        "wall": time.perf_counter() - wall,
        "cpu": time.thread_time() - cpu,
    }, model


# --8<-- [end:bare_loop]


def trainer_loop(
    config: LabConfig, data, updates: int, folder: Path
) -> tuple[dict[str, float], nn.Module, list[tuple[float, float]]]:
    """Trainer.fit with EarlyStopping (from build_trainer), Checkpoint, TimeBudget, StopAfter and
    Progress; not the PreemptionFlag that `resume-lab train` adds."""
    for old in folder.iterdir():  # checkpoint directories, pointers, history.jsonl
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old)
        else:
            old.unlink()
    clock = UpdateClock()
    checkpoint = Checkpoint(
        folder, every=10 * updates, keep=3
    )  # commits a checkpoint at each new best
    callbacks = [
        checkpoint,
        TimeBudget(1e9),
        StopAfter(10 * updates),
        Progress("bench", updates, quiet=True, stream=io.StringIO()),
        clock,
    ]
    trainer = build_trainer(config, init_seed=0, data=data, callbacks=callbacks)
    saves = time_saves(checkpoint)
    reason = trainer.fit(updates)
    assert reason == "completed" and trainer.step == updates, reason
    wall, cpu = clock.last[0] - clock.first[0], clock.last[1] - clock.first[1]
    return {"wall": wall, "cpu": cpu}, trainer.model, saves


def ram_folder() -> str | None:
    """A RAM-backed folder (tmpfs) for the loop's Checkpoint callback, when there is one."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def measure(plan: Plan) -> dict[str, Any]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the CLI does
    updates = plan.loop_updates
    config = LabConfig(steps=updates, patience=10**6)  # never stops early: every update runs
    data = make_blobs(config.data_seed)
    models: dict[str, nn.Module] = {}
    wall: dict[str, list[float]] = {"trainer": [], "trainer_with_saves": [], "bare": []}
    cpu: dict[str, list[float]] = {name: [] for name in wall}
    save_times: list[float] = []
    saves_per_run: list[int] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-loop-", dir=ram_folder()) as d:

            def trainer_variant(record: bool) -> None:
                seconds, models["trainer"], saves = trainer_loop(config, data, updates, Path(d))
                if record:
                    saved = [sum(s[i] for s in saves) for i in (0, 1)]
                    for times, key, i in ((wall, "wall", 0), (cpu, "cpu", 1)):
                        times["trainer_with_saves"].append(seconds[key])
                        times["trainer"].append(seconds[key] - saved[i])
                    save_times.extend(s[0] for s in saves)
                    saves_per_run.append(len(saves))

            def bare_variant(record: bool) -> None:
                seconds, models["bare"] = bare_loop(config, data, updates)
                if record:
                    wall["bare"].append(seconds["wall"])
                    cpu["bare"].append(seconds["cpu"])

            # timing.side_by_side's order (a warm-up each, then interleaved, alternating who
            # goes first), but not its clock: these variants read two clocks, wall and CPU,
            # inside the loop, and keep the garbage collector on, as training does.
            variants = [trainer_variant, bare_variant]
            for variant in variants:
                variant(record=False)  # warm-up
            for r in range(plan.loop_repeats):  # interleaved, alternating who goes first
                for variant in variants if r % 2 == 0 else variants[::-1]:
                    variant(record=True)
    finally:
        torch.set_num_threads(threads)
    bitwise = all(
        torch.equal(a, b)
        for a, b in zip(
            models["trainer"].state_dict().values(),
            models["bare"].state_dict().values(),
            strict=True,
        )
    )
    assert bitwise, "the bare loop does not do the Trainer's arithmetic"
    return {
        "updates": updates,
        "config": {
            k: v
            for k, v in config.to_dict().items()
            if k in ("accum", "micro_batch", "max_norm", "eval_every")
        },
        "threads": 1,
        "checkpoint_in_ram": ram_folder() is not None,
        "saves_per_run": median(saves_per_run),
        "save_s": median(save_times) if save_times else 0.0,
        "bitwise_equal": bitwise,
        "median_s": medians(wall),
        "cpu_median_s": medians(cpu),
        "runs_s": wall,
        "cpu_runs_s": cpu,
    }
