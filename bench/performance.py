"""What the lab costs: resume position, saves and hashes, verification and loading, the loop, the
test suite.

    .venv/bin/python bench/performance.py           # full run, writes docs/assets/bench/
    .venv/bin/python bench/performance.py --quick   # tiny sizes, writes to a temporary folder

Each point is measured against its baseline in the same run, the two interleaved (alternating
which goes first), so a busy moment on the machine hits both; medians over the repetitions are
reported, ratios are ratios of those medians, and every run is kept so that report.py can say
whether two measurements separate beyond their spread (verdicts.py):

1. data position: StepIndexedSampler.batches(epoch, start_micro=k) vs replaying k micro-batches
   (here);
2. save: the lab's save_checkpoint with each hash vs torch.save + one fsync (save_speed.py), and
   the hashes' raw throughput (hash_speed.py);
3. verify and load: verify()'s throughput and each load path's peak memory, in fresh processes
   (load_memory.py);
4. the loop: Trainer.fit with every callback the CLI installs vs a bare loop doing the same
   arithmetic on the same objects (here; checked: both end with bitwise-equal weights);
5. the suite: `make test` and the lab's contract tests alone, as subprocesses (here).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
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
from resume_lab.sampler import StepIndexedSampler

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/common.py, however we are run
import hash_speed
import load_memory
import report
import save_speed
from common import (
    RESULTS_DIR,
    ROOT,
    load_average,
    machine,
    side_by_side,
    timed,
    utc_now,
    versions,
)

NAME = "performance"
CONTRACT_TESTS = "tests/lab/test_lab_contract.py"
GB = 10**9  # throughput and "about 1 GB" sizes are decimal; byte counts are given exactly


@dataclass(frozen=True)
class Plan:
    mode: str
    repeats: int  # timing repetitions per variant (sampler, verify)
    min_sample_s: float  # a sampler timing repeats its call until a sample lasts this long
    sampler_examples: int
    sampler_micro_batch: int
    sampler_ks: tuple[int, ...]
    save_sizes: tuple[tuple[str, str, int], ...]  # (key, label, bytes)
    save_repeats: int
    sync_before_save: bool  # os.sync() before each timed save: no variant pays another's flush
    model_width: int  # the load model: `model_layers` Linear(width, width) layers
    model_layers: int
    load_repeats: int
    load_in_subprocess: bool  # a fresh interpreter per load, so each peak is that load's alone
    loop_updates: int
    loop_repeats: int
    suite_repeats: int  # 0: the suite is not measured (quick mode: it would run itself)
    contract_repeats: int


FULL = Plan(
    mode="full",
    repeats=5,
    min_sample_s=0.02,
    sampler_examples=1_000_000,
    sampler_micro_batch=8,  # 125,000 micro-batches per epoch: k = 100,000 is inside epoch 0
    sampler_ks=(10, 100, 1_000, 10_000, 100_000),
    save_sizes=(("mb_10", "10 MB", 10**7), ("mb_100", "100 MB", 10**8), ("gb_1", "1 GB", 10**9)),
    save_repeats=7,  # a 1 GB durable write is bimodal on this disk: more runs, steadier median
    sync_before_save=True,
    model_width=4096,  # 16 × (4096² + 4096) float32 parameters = 1.07 GB
    model_layers=16,
    load_repeats=2,
    load_in_subprocess=True,
    loop_updates=2_000,
    loop_repeats=9,
    suite_repeats=1,
    contract_repeats=3,
)
QUICK = Plan(
    mode="quick",
    repeats=2,
    min_sample_s=0.001,
    sampler_examples=20_000,
    sampler_micro_batch=8,
    sampler_ks=(10, 100, 1_000),
    save_sizes=(("kib_64", "64 KiB", 64 * 1024), ("kib_512", "512 KiB", 512 * 1024)),
    save_repeats=2,
    sync_before_save=False,
    model_width=128,
    model_layers=4,
    load_repeats=1,
    load_in_subprocess=False,  # the numbers mean nothing at this size; the interpreters cost 3 s
    loop_updates=30,
    loop_repeats=1,
    suite_repeats=0,
    contract_repeats=0,
)

# --- helpers ----------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values)


def autorange(fn: Callable[[], Any], min_seconds: float = 0.02) -> int:
    """How many calls of `fn` take at least `min_seconds` (1, 2, 5, 10, 20, ...), as timeit."""
    number = 1
    while True:
        for factor in (1, 2, 5):
            n = number * factor
            if timed(lambda n=n: [fn() for _ in range(n)]) >= min_seconds:
                return n
        number *= 10


def per_call(fn: Callable[[], Any], number: int) -> Callable[[], None]:
    def loop() -> None:
        for _ in range(number):
            fn()

    return loop


# --- 1. data position -------------------------------------------------------------------------


def measure_sampler(plan: Plan) -> dict[str, Any]:
    n, micro, seed = plan.sampler_examples, plan.sampler_micro_batch, 0
    warm = StepIndexedSampler(n, micro, seed=seed)
    warm.order(0)  # the epoch's permutation, drawn once
    state = warm.state_dict()
    assert plan.sampler_ks[-1] < warm.micro_batches_per_epoch

    def fresh() -> StepIndexedSampler:
        sampler = StepIndexedSampler(n, micro, seed=seed + 1)  # a new process's own seed...
        sampler.load_state_dict(state)  # ...replaced by the checkpoint's
        return sampler

    per_k: dict[str, Any] = {}
    for k in plan.sampler_ks:

        def start(k: int = k) -> torch.Tensor:
            return next(warm.batches(0, start_micro=k))

        def replay(k: int = k) -> torch.Tensor:
            return next(islice(warm.batches(0), k, None))  # skip k micro-batches, take the next

        def cold_start(k: int = k) -> torch.Tensor:
            return next(fresh().batches(0, start_micro=k))

        def cold_replay(k: int = k) -> torch.Tensor:
            return next(islice(fresh().batches(0), k, None))

        expected = warm.order(0)[k * micro : (k + 1) * micro]
        for fn in (start, replay, cold_start, cold_replay):
            assert torch.equal(fn(), expected), (fn.__name__, k)

        numbers = {
            name: autorange(fn, plan.min_sample_s)
            for name, fn in (("start", start), ("replay", replay))
        }
        runs = side_by_side(
            {
                name: per_call(fn, numbers[name])
                for name, fn in (("start", start), ("replay", replay))
            },
            plan.repeats,
        )
        runs = {name: [t / numbers[name] for t in times] for name, times in runs.items()}
        runs |= {
            f"cold_{name}": times
            for name, times in side_by_side(
                {"start": cold_start, "replay": cold_replay}, plan.repeats
            ).items()
        }
        medians = {name: median(times) for name, times in runs.items()}
        per_k[f"k_{k}"] = {
            "k": k,
            "median_s": medians,
            "speedup": medians["replay"] / medians["start"],
            "cold_speedup": medians["cold_replay"] / medians["cold_start"],
            "calls_per_sample": numbers,
            "runs_s": runs,
        }
    first, last = per_k[f"k_{plan.sampler_ks[0]}"], per_k[f"k_{plan.sampler_ks[-1]}"]
    return {
        "examples": n,
        "micro_batch": micro,
        "micro_batches_per_epoch": warm.micro_batches_per_epoch,
        "ks": list(plan.sampler_ks),
        "per_k": per_k,
        "flat_ratio": last["median_s"]["start"] / first["median_s"]["start"],
        "cold_flat_ratio": last["median_s"]["cold_start"] / first["median_s"]["cold_start"],
        "speedup": last["speedup"],
        "cold_speedup": last["cold_speedup"],
        "permutation_s": median(
            side_by_side({"draw": lambda: fresh().order(0)}, plan.repeats)["draw"]
        ),
    }


# --- 4. the loop ------------------------------------------------------------------------------


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
    """Trainer.fit with every callback `resume-lab train` installs, and EarlyStopping."""
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


def measure_loop(plan: Plan, scratch: Path) -> dict[str, Any]:
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
        with tempfile.TemporaryDirectory(prefix="bench-loop-", dir=ram_folder() or scratch) as d:

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

            variants = [trainer_variant, bare_variant]
            for variant in variants:
                variant(record=False)  # warm-up
            for r in range(plan.loop_repeats):  # interleaved, alternating who goes first
                for variant in variants if r % 2 == 0 else variants[::-1]:
                    variant(record=True)
            folder_fs = "tmpfs" if ram_folder() else "scratch"
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
    medians = {name: median(times) for name, times in wall.items()}
    cpu_medians = {name: median(times) for name, times in cpu.items()}
    rates = {name: updates / seconds for name, seconds in medians.items()}
    return {
        "updates": updates,
        "config": {
            k: v
            for k, v in config.to_dict().items()
            if k in ("accum", "micro_batch", "max_norm", "eval_every")
        },
        "threads": 1,
        "callbacks": ["EarlyStopping", "Checkpoint", "TimeBudget", "StopAfter", "Progress"],
        "checkpoint_folder": folder_fs,
        "saves_per_run": median(saves_per_run),
        "save_s": median(save_times) if save_times else 0.0,
        "bitwise_equal": bitwise,
        "median_s": medians,
        "cpu_median_s": cpu_medians,
        "updates_per_s": rates,
        "per_update_s": {name: seconds / updates for name, seconds in medians.items()},
        "ratio": rates["trainer"] / rates["bare"],
        "ratio_with_saves": rates["trainer_with_saves"] / rates["bare"],
        "cpu_ratio": cpu_medians["bare"] / cpu_medians["trainer"],
        "runs_s": wall,
        "cpu_runs_s": cpu,
    }


# --- 5. the suite -----------------------------------------------------------------------------

# "==== 427 passed, 3 deselected in 98.39s (0:01:38) ====", or with -q "11 passed in 3.22s"
PYTEST_SUMMARY = re.compile(
    r"^(?:=+ )?(?P<summary>\d+ \w+.*?) in (?P<seconds>[\d.]+)s(?: \([\d:]+\))?(?: =+)?$"
)


# A line of pytest --durations: "30.64s setup    tests/browser/test_pages.py::test_x[index.html]"
DURATION = re.compile(r"^(?P<seconds>[\d.]+)s (?:setup|call|teardown)\s+(?P<path>[^:\s]+)")


def time_by_folder(output: str) -> dict[str, float]:
    """Seconds per test folder (tests/lab, docs, ...) from pytest's --durations=0 report."""
    folders: dict[str, float] = {}
    for line in output.splitlines():
        if match := DURATION.match(line.strip()):
            parts = match["path"].split("/")
            folder = "/".join(parts[:2]) if parts[0] == "tests" and len(parts) > 2 else parts[0]
            folders[folder] = folders.get(folder, 0.0) + float(match["seconds"])
    return {k: round(v, 1) for k, v in sorted(folders.items(), key=lambda kv: -kv[1])}


def timed_command(command: list[str], folder: Path, durations: bool = False) -> dict[str, Any]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "NO_MKDOCS_2_WARNING": "1"}
    if durations:  # the report costs nothing and says where the time goes
        env["PYTEST_ADDOPTS"] = f"{env.get('PYTEST_ADDOPTS', '')} --durations=0".strip()
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    summaries = [
        m for line in proc.stdout.splitlines() if (m := PYTEST_SUMMARY.match(line.strip()))
    ]
    last = summaries[-1] if summaries else None
    problems = [
        line.strip()[:200]
        for line in proc.stdout.splitlines()
        if line.startswith(("FAILED ", "ERROR ", "make: ***"))
    ]
    return {
        "wall_s": wall,
        "returncode": proc.returncode,
        "problems": problems[:20],  # what failed, when something did
        "by_folder_s": time_by_folder(proc.stdout) if durations else {},
        "pytest_s": float(last["seconds"]) if last else None,
        "summary": last["summary"] if last else (proc.stdout + proc.stderr).strip()[-300:],
    }


PENDING = "pending: make bench writes these results, then measures the suite"


def measure_suite(plan: Plan, folder: Path = ROOT) -> dict[str, Any]:
    """`make test` and the contract tests alone, run in `folder` (a checkout of this repo)."""
    if plan.suite_repeats == 0:
        return {"measured": False, "why": "quick mode: the suite would run this benchmark's test"}
    make = os.environ.get("MAKE", "make")
    contract_cmd = [sys.executable, "-m", "pytest", "-q", CONTRACT_TESTS]
    make_runs = [
        timed_command([make, "--no-print-directory", "test"], folder, durations=True)
        for _ in range(plan.suite_repeats)
    ]
    contract_runs = [timed_command(contract_cmd, folder) for _ in range(plan.contract_repeats)]
    load = load_average()
    return {
        "measured": True,
        "folder": "the working tree" if folder == ROOT else str(folder),
        "date": utc_now().strftime("%Y-%m-%d %H:%M UTC"),
        "load_average_end": [round(x, 2) for x in load],
        "make_test": {
            "command": "make test",
            "wall_s": median([r["wall_s"] for r in make_runs]),
            "pytest_s": median([r["pytest_s"] or 0.0 for r in make_runs]),
            "passed": all(r["returncode"] == 0 for r in make_runs),
            "summary": str(make_runs[-1]["summary"]),
            "by_folder_s": make_runs[-1]["by_folder_s"],
            "runs": make_runs,
        },
        "contract": {
            "command": f"pytest -q {CONTRACT_TESTS}",
            "wall_s": median([r["wall_s"] for r in contract_runs]),
            "pytest_s": median([r["pytest_s"] or 0.0 for r in contract_runs]),
            "passed": all(r["returncode"] == 0 for r in contract_runs),
            "summary": str(contract_runs[-1]["summary"]),
            "runs": contract_runs,
        },
    }


# --- results ----------------------------------------------------------------------------------


def provenance(plan: Plan, scratch: Path) -> dict[str, Any]:
    now = utc_now()
    machine_info, versions_info = machine(scratch), versions()
    load = load_average()
    return {
        "date": now.strftime("%Y-%m-%d %H:%M UTC"),
        "timestamp": now.isoformat(timespec="seconds"),
        "mode": plan.mode,
        "plan": asdict(plan),
        "load_average_start": [round(x, 2) for x in load],
        "machine": machine_info,
        "versions": versions_info,
        "notes": report.NOTES,
    }


def finish_provenance(prov: dict[str, Any], seconds: float) -> None:
    load = load_average()
    prov["load_average_end"] = [round(x, 2) for x in load]
    prov["duration_s"] = round(seconds, 1)
    m, v, plan = prov["machine"], prov["versions"], prov["plan"]
    repeats = sorted({plan["repeats"], plan["save_repeats"], plan["loop_repeats"]})
    timing_runs = f"{repeats[0]} to {repeats[-1]}" if len(repeats) > 1 else str(repeats[0])
    start, end = prov["load_average_start"][0], load[0]
    prov["load_average"] = f"{start:.1f} at the start, {end:.1f} at the end"
    prov["summary"] = (
        f"{m['cpu']} ({m['cores']} cores, {m['ram_gib']} GiB RAM, {m['scratch_fs']} scratch "
        f"disk), {m['os']}; torch {v['torch']}, numpy {v['numpy']}, Python {v['python']}; "
        f"medians of {timing_runs} runs per timing, {plan['load_repeats']} fresh processes per "
        f"load path, {plan['suite_repeats']} run of make test and {plan['contract_repeats']} of "
        "the contract tests; "
        f"1-minute load average {start:.1f} at the start and {end:.1f} at the end, on "
        f"{m['cores']} cores"
    )


# --- running ----------------------------------------------------------------------------------


def run(
    plan: Plan = FULL,
    log: Callable[[str], None] = lambda message: None,
    before_suite: Callable[[dict[str, Any]], None] = lambda results: None,
    suite_folder: Path = ROOT,
    suite: bool = True,
) -> dict[str, Any]:
    """Measure every point; returns the results dict. `before_suite` gets the results with the
    suite still pending (make bench writes them, so the suite tests the numbers of this run).
    Without `suite`, the suite stays pending (`--suite-only` measures it later)."""
    started = time.perf_counter()
    results: dict[str, Any] = {}

    def step(name: str, fn: Callable[[], Any]) -> Any:
        t = time.perf_counter()
        value = fn()
        log(f"  {name}: {time.perf_counter() - t:.1f} s (load average {load_average()[0]:.1f})")
        return value

    with tempfile.TemporaryDirectory(prefix="bench-performance-") as scratch_dir:
        scratch = Path(scratch_dir)
        results["provenance"] = provenance(plan, scratch)
        results["sampler"] = step("1 sampler", lambda: measure_sampler(plan))
        results["save"], results["hashing"] = {}, {}
        for key, label, total in plan.save_sizes:
            results["save"][key], results["hashing"][key] = step(
                f"2 save and hash {label}",
                lambda k=key, lb=label, n=total: measure_save_and_hash(k, lb, n, plan, scratch),
            )
        results["verify_load"] = step(
            "3 verify and load",
            lambda: load_memory.measure(
                plan.model_width,
                plan.model_layers,
                plan.load_repeats,
                plan.repeats,
                plan.load_in_subprocess,
                scratch,
            ),
        )
        results["loop"] = step("4 loop", lambda: measure_loop(plan, scratch))
    if plan.suite_repeats:
        results["suite"] = {"measured": False, "why": PENDING}
        if not suite:
            finish_provenance(results["provenance"], time.perf_counter() - started)
            return finalize(results)
        finish_provenance(results["provenance"], time.perf_counter() - started)
        before_suite(finalize(results))
    results["suite"] = step("5 suite", lambda: measure_suite(plan, suite_folder))
    finish_provenance(results["provenance"], time.perf_counter() - started)
    return finalize(results)


def measure_save_and_hash(
    key: str, label: str, total: int, plan: Plan, scratch: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One state of `total` bytes: the saves, then the raw hashes over the same bytes."""
    state = save_speed.make_state(total)
    try:
        save = save_speed.measure(
            key, label, state, plan.save_repeats, plan.sync_before_save, scratch
        )
        hashing = hash_speed.measure(state, save_speed.floor_file(scratch, key), plan.repeats) | {
            "label": label
        }
    finally:
        save_speed.remove(scratch, key)
    return save, hashing


def finalize(results: dict[str, Any]) -> dict[str, Any]:
    """Targets, verdicts, headline strings and tables, from the measurements (recomputed from the
    runs every time, never edited)."""
    return report.finalize(results)


def write(results: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{NAME}.json"
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", "utf8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes, no suite: a smoke test, written to a temporary folder unless --out",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help=f"output folder (default {RESULTS_DIR})"
    )
    parser.add_argument(
        "--suite-dir",
        type=Path,
        default=ROOT,
        help="checkout whose `make test` is timed (default: this one)",
    )
    parser.add_argument(
        "--suite-only",
        action="store_true",
        help="time only the suite, and update the suite part of the results in --out",
    )
    parser.add_argument(
        "--no-suite",
        action="store_true",
        help="measure everything but the suite, which stays pending (then --suite-only)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: recompute targets, verdicts and tables of the results in --out",
    )
    args = parser.parse_args(argv)
    if args.quick:
        plan = QUICK
        # Never let smoke-test numbers replace the committed results by accident.
        out_dir = args.out or Path(tempfile.mkdtemp(prefix="bench-performance-quick-"))
    else:
        plan = FULL
        out_dir = args.out or RESULTS_DIR

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log(f"performance benchmark ({plan.mode}), load average {load_average()[0]:.1f}")
    suite_folder = args.suite_dir.resolve()
    if args.report_only:
        results = finalize(json.loads((out_dir / f"{NAME}.json").read_text("utf8")))
    elif args.suite_only:
        results = json.loads((out_dir / f"{NAME}.json").read_text("utf8"))
        results["suite"] = {"measured": False, "why": PENDING}
        write(finalize(results), out_dir)  # what the suite's own tests read meanwhile
        results["suite"] = measure_suite(plan, suite_folder)
        results = finalize(results)
    else:
        results = run(
            plan,
            log=log,
            before_suite=lambda r: write(r, out_dir),
            suite_folder=suite_folder,
            suite=not args.no_suite,
        )
    path = write(results, out_dir)
    print(results["table_md"])
    print()
    print(results["sampler_table_md"])
    print()
    print(results["save_table_md"])
    print()
    print(results["hash_table_md"])
    print()
    print(results["load_table_md"])
    print()
    print(results["provenance"]["summary"])
    for key, t in results["targets"].items():
        print(f"  {key}: {t['what']}: {t['measured']} (target {t['target']}) {t['verdict']}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
