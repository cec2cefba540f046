"""What the lab costs: resume position, saves, verification and loading, the loop, the test suite.

    .venv/bin/python bench/performance.py           # full run, writes docs/assets/bench/
    .venv/bin/python bench/performance.py --quick   # tiny sizes, writes to a temporary folder

Each point of the performance issue is measured against its baseline in the same run, the two
interleaved (alternating which goes first), so a busy moment on the machine hits both; medians
over the repetitions are reported, and ratios are ratios of those medians:

1. data position: StepIndexedSampler.batches(epoch, start_micro=k) vs replaying k micro-batches;
2. save: the lab's save_checkpoint (atomic_save + manifest) and atomic_save alone vs the floor
   for a durable write, torch.save(path) followed by one fsync, in the same folder;
3. verify and load: SHA-256 throughput of the lab's verify(); peak extra resident memory of
   loading a ~1 GB model through a meta-device model + mmap=True + assign=True vs a plain
   load, each path in a fresh process;
4. the loop: Trainer.fit with every callback the CLI installs vs a bare loop doing the same
   arithmetic on the same objects (checked: both end with bitwise-equal weights);
5. the suite: `make test` and the lab's contract tests alone, as subprocesses.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
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
from resume_lab.checkpoint import (
    HashingWriter,
    atomic_save,
    load_checkpoint,
    save_checkpoint,
    verify,
)
from resume_lab.config import LabConfig
from resume_lab.data import make_blobs
from resume_lab.evaluate import evaluate
from resume_lab.progress import Progress
from resume_lab.sampler import StepIndexedSampler

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/common.py, however we are run
from common import (
    RESULTS_DIR,
    ROOT,
    fmt_time,
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

# (key, what is compared, comparison, threshold). "le": measured <= threshold.
TARGETS = {
    "sampler_flat": ("start at the largest k ÷ start at the smallest k (order drawn)", "le", 2.0),
    "sampler_speedup": ("replay of k batches ÷ start at k, largest k (order drawn)", "ge", 1000.0),
    "save_overhead": ("save_checkpoint ÷ (torch.save + one fsync), worst size", "le", 1.2),
    "verify_throughput": ("verify(): SHA-256 of the model's checkpoint, GB/s", "ge", 1.0),
    "load_peak": ("meta + mmap + assign: peak extra resident memory ÷ model bytes", "le", 1.1),
    "loop_throughput": ("Trainer + callbacks updates/s ÷ bare loop updates/s", "ge", 0.95),
    "suite_make_test": ("`make test` wall time, s", "lt", 60.0),
    "suite_contract": ("the lab's contract tests alone, wall time, s", "lt", 5.0),
}

NOTES = {
    "page_cache": (
        "Saves are timed to durable (fsync) completion, after an os.sync() so that no variant "
        "pays for another's flush; verification reads a file that was just written, so its "
        "throughput is hashing from the page cache, not the disk's read speed."
    ),
    "sampler": (
        "Warm: the epoch's permutation is already drawn, which both paths need; cold: a fresh "
        "sampler draws it first, as a new process does. Replay is the cheapest possible one: "
        "it skips index batches without loading any data."
    ),
    "loop": (
        "Same model, optimizer, schedule, sampler, accumulation, clipping and evaluation; both "
        "end with bitwise-equal weights. Timed from the first update to the last update "
        "boundary: the one-off save when fit() ends belongs to point 2. The Checkpoint "
        "callback writes to a RAM-backed folder when there is one, so its best.pt saves cost "
        "their serialization, not the disk."
    ),
}


# --- helpers ----------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values)


def fmt_duration(seconds: float) -> str:
    """fmt_time, plus microseconds for the sampler's tiny times."""
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else fmt_time(seconds)


def fmt_speedup(ratio: float) -> str:
    return f"{ratio:,.0f}×" if ratio >= 10 else f"{ratio:.2f}×"


def fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


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


def target(key: str, measured: float | None, detail: str = "") -> dict[str, Any]:
    what, op, threshold = TARGETS[key]
    if measured is None:
        met = None
    elif op == "le":
        met = measured <= threshold
    elif op == "ge":
        met = measured >= threshold
    else:
        met = measured < threshold
    sign = {"le": "≤", "ge": "≥", "lt": "<"}[op]
    if met is None:
        verdict = "not measured"
    elif met:
        verdict = "met"
    else:
        short = (1 - measured / threshold) if op == "ge" else (measured / threshold - 1)
        verdict = (
            f"missed by {short * 100:.1f} %" if short < 0.1 else f"missed by {short * 100:.0f} %"
        )
    return {
        "what": what,
        "target": f"{sign} {threshold:g}",
        "threshold": threshold,
        "measured": measured,
        "met": met,
        "verdict": verdict,
        "detail": detail,
    }


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


# --- 2. save ----------------------------------------------------------------------------------


def make_state(total_bytes: int, count: int = 16) -> dict[str, Any]:
    """A checkpoint-shaped dict: `count` float32 tensors adding up to `total_bytes`, and a step."""
    per = total_bytes // 4 // count
    gen = torch.Generator().manual_seed(0)
    model = {f"layer{i:02d}.weight": torch.randn(per, generator=gen) for i in range(count)}
    return {"model": model, "step": 0}


@contextlib.contextmanager
def patched(owner: object, name: str, value: object) -> Iterator[None]:
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def measure_save(
    key: str, label: str, total_bytes: int, plan: Plan, folder: Path
) -> dict[str, Any]:
    state = make_state(total_bytes)
    paths = {
        "floor": folder / f"{key}-floor.pt",
        "atomic_save": folder / f"{key}-atomic.pt",
        "save_checkpoint": folder / f"{key}-checkpoint.pt",
        "inline_hash": folder / f"{key}-inline.pt",
    }

    def floor() -> None:  # the least a durable write can do: serialize, then one fsync
        torch.save(state, paths["floor"])
        fsync_file(paths["floor"])

    def clean() -> None:
        for path in paths.values():
            path.unlink(missing_ok=True)
            path.with_suffix(".json").unlink(missing_ok=True)
        if plan.sync_before_save:
            os.sync()

    def inline_hash() -> None:  # atomic_save as it was: every write hashed in line, then written
        with patched(HashingWriter, "PARALLEL_MIN", sys.maxsize):
            atomic_save(state, paths["inline_hash"])

    variants = {
        "floor": floor,
        "inline_hash": inline_hash,
        "atomic_save": lambda: atomic_save(state, paths["atomic_save"]),
        "save_checkpoint": lambda: save_checkpoint(
            state, paths["save_checkpoint"], step=0, config={}
        ),
    }
    runs = side_by_side(variants, plan.save_repeats, before=clean)
    # Once more, untimed: the digest computed while writing is the digest of the file.
    clean()
    manifest = save_checkpoint(state, paths["save_checkpoint"], step=0, config={})
    data = paths["save_checkpoint"].read_bytes()
    assert manifest["sha256"] == hashlib.sha256(data).hexdigest()
    assert manifest["bytes"] == len(data)
    floor()
    file_bytes = paths["floor"].stat().st_size
    clean()
    medians = {name: median(times) for name, times in runs.items()}
    best = {name: min(times) for name, times in runs.items()}
    return {
        "label": label,
        "file_bytes": file_bytes,
        "median_s": medians,
        "best_s": best,  # fastest run of each: what the code costs when nothing else interferes
        "ratio_best": best["save_checkpoint"] / best["floor"],
        "ratio": medians["save_checkpoint"] / medians["floor"],
        "ratio_atomic_save": medians["atomic_save"] / medians["floor"],
        "ratio_inline_hash": medians["inline_hash"] / medians["floor"],
        "ratio_of": "save_checkpoint / floor",
        "runs_s": runs,
    }


# --- 3. verify and load -----------------------------------------------------------------------


def build_big_model(width: int, layers: int) -> nn.Sequential:
    return nn.Sequential(*(nn.Linear(width, width) for _ in range(layers)))


def hash_large_reads(path: Path, block: int = 8 << 20) -> str:
    """SHA-256 of a file read in large blocks into one reused buffer."""
    sha256, buffer = hashlib.sha256(), bytearray(block)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buffer):
            sha256.update(view[:n])
    return sha256.hexdigest()


def measure_hashing(path: Path, plan: Plan) -> dict[str, Any]:
    size = path.stat().st_size
    chunk = os.urandom(min(size, 256 << 20))

    def in_memory() -> None:
        hashlib.sha256(chunk).digest()

    runs = side_by_side(
        {
            "verify": lambda: verify(path),
            "large_reads": lambda: hash_large_reads(path),
            "in_memory": in_memory,
        },
        plan.repeats,
    )
    medians = {name: median(times) for name, times in runs.items()}
    rates = {
        "verify": size / medians["verify"] / GB,
        "large_reads": size / medians["large_reads"] / GB,
        "in_memory": len(chunk) / medians["in_memory"] / GB,
    }
    return {"file_bytes": size, "median_s": medians, "gb_per_s": rates, "runs_s": runs}


LOAD_PATHS = {
    "meta_mmap": "verify(); meta-device model; torch.load(mmap=True); load_state_dict(assign=True)",
    "plain": "model built on CPU; verify(); torch.load(); load_state_dict()",
    "load_checkpoint": "model built on CPU; the lab's load_checkpoint(); load_state_dict()",
}


def proc_status() -> dict[str, int]:
    """VmRSS, VmHWM (peak RSS), RssAnon and RssFile of this process, in bytes."""
    wanted, found = {"VmRSS", "VmHWM", "RssAnon", "RssFile"}, {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            found[key] = int(value.split()[0]) * 1024
    return found


def load_worker(path: str, how: str, width: int, layers: int) -> dict[str, Any]:
    """One load path in this (fresh) process; returns its time and peak extra resident memory."""
    path_ = Path(path)
    torch.set_num_threads(1)
    try:  # reset the peak (VmHWM) to the current RSS: Linux 4.0+
        Path("/proc/self/clear_refs").write_text("5")
        peak_method = "VmHWM after clear_refs"
    except OSError:
        peak_method = "VmHWM since start"
    before = proc_status()
    start = time.perf_counter()
    if how == "meta_mmap":
        verify(path_)  # streams the file through SHA-256: page cache, not this process's memory
        with torch.device("meta"):
            model = build_big_model(width, layers)  # shapes only, no memory, no init
        state = torch.load(path_, weights_only=True, mmap=True)
        model.load_state_dict(state, assign=True)  # the parameters ARE the mapped tensors
    elif how == "plain":
        model = build_big_model(width, layers)  # allocated and initialised: copy one
        verify(path_)
        state = torch.load(path_, weights_only=True)  # copy two
        model.load_state_dict(state)
    elif how == "load_checkpoint":
        model = build_big_model(width, layers)
        state, _ = load_checkpoint(path_)  # holds the file's bytes and the tensors built from them
        model.load_state_dict(state)
    else:
        raise ValueError(how)
    del state
    load_s = time.perf_counter() - start
    # Read every parameter (a digest of its bytes): a mapped page counts once it is touched.
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().numpy().data)
    after = proc_status()
    return {
        "how": how,
        "load_s": load_s,
        "peak_extra_bytes": after["VmHWM"] - before["VmRSS"],
        "rss_anon_extra_bytes": after["RssAnon"] - before["RssAnon"],
        "rss_file_extra_bytes": after["RssFile"] - before["RssFile"],
        "baseline_rss_bytes": before["VmRSS"],
        "peak_method": peak_method,
        "parameters_sha256": digest.hexdigest(),
        "device": str(next(model.parameters()).device),
    }


def run_load_workers(path: Path, plan: Plan) -> dict[str, list[dict[str, Any]]]:
    """Every load path `load_repeats` times, each in a fresh interpreter (full mode)."""
    order = list(LOAD_PATHS)
    jobs = [how for r in range(plan.load_repeats) for how in (order if r % 2 == 0 else order[::-1])]
    command = [sys.executable, str(Path(__file__).resolve()), "--load-worker", str(path)]
    sizes = [str(plan.model_width), str(plan.model_layers)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    results: dict[str, list[dict[str, Any]]] = {how: [] for how in LOAD_PATHS}
    for how in jobs:
        if not plan.load_in_subprocess:
            results[how].append(load_worker(str(path), how, plan.model_width, plan.model_layers))
            continue
        proc = subprocess.run(
            [*command, how, *sizes], capture_output=True, text=True, env=env, check=False
        )
        if proc.returncode != 0:
            raise RuntimeError(f"load worker {how} failed:\n{proc.stderr}")
        results[how].append(json.loads(proc.stdout.splitlines()[-1]))
    return results


def measure_load(plan: Plan, folder: Path) -> dict[str, Any]:
    with torch.device("meta"):
        shapes = build_big_model(plan.model_width, plan.model_layers).state_dict()
    gen = torch.Generator().manual_seed(0)
    state = {name: torch.randn(t.shape, generator=gen) for name, t in shapes.items()}
    model_bytes = sum(t.numel() * t.element_size() for t in state.values())
    path = folder / "model.pt"
    save_checkpoint(
        state, path, step=0, config={"width": plan.model_width, "layers": plan.model_layers}
    )
    expected = hashlib.sha256()
    for name in state:
        expected.update(state[name].numpy().data)
    del state

    hashing = measure_hashing(path, plan)
    workers = run_load_workers(path, plan)
    paths: dict[str, Any] = {}
    for how, runs in workers.items():
        assert all(r["parameters_sha256"] == expected.hexdigest() for r in runs), how
        peak = median([r["peak_extra_bytes"] for r in runs])
        paths[how] = {
            "label": LOAD_PATHS[how],
            "load_s": median([r["load_s"] for r in runs]),
            "peak_extra_bytes": peak,
            "peak_ratio": peak / model_bytes,
            "rss_anon_extra_bytes": median([r["rss_anon_extra_bytes"] for r in runs]),
            "rss_file_extra_bytes": median([r["rss_file_extra_bytes"] for r in runs]),
            "peak_method": runs[0]["peak_method"],
            "runs": runs,
        }
    path.unlink()
    path.with_suffix(".json").unlink()
    return {
        "model": f"{plan.model_layers} × Linear({plan.model_width}, {plan.model_width})",
        "model_bytes": model_bytes,
        "fresh_process_per_load": plan.load_in_subprocess,
        "hashing": hashing,
        "paths": paths,
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
    for old in folder.iterdir():
        old.unlink()
    clock = UpdateClock()
    checkpoint = Checkpoint(folder, every=10 * updates, keep=3)  # writes best.pt at each new best
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
        "notes": NOTES,
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


def evaluate_targets(results: dict[str, Any]) -> dict[str, Any]:
    sampler, save, load = results["sampler"], results["save"], results["verify_load"]
    loop, suite = results["loop"], results["suite"]
    worst_save = max(save.values(), key=lambda s: s["ratio"])
    targets = {
        "sampler_flat": target(
            "sampler_flat",
            sampler["flat_ratio"],
            f"cold (permutation drawn first): {sampler['cold_flat_ratio']:.2f}",
        ),
        "sampler_speedup": target(
            "sampler_speedup",
            sampler["speedup"],
            f"cold: {sampler['cold_speedup']:.1f}× (both draw the epoch's permutation, "
            f"{fmt_duration(sampler['permutation_s'])})",
        ),
        "save_overhead": target(
            "save_overhead",
            worst_save["ratio"],
            "; ".join(f"{s['label']}: {s['ratio']:.2f}" for s in save.values()),
        ),
        "verify_throughput": target(
            "verify_throughput",
            load["hashing"]["gb_per_s"]["verify"],
            f"hashlib in memory: {load['hashing']['gb_per_s']['in_memory']:.2f} GB/s",
        ),
        "load_peak": target(
            "load_peak",
            load["paths"]["meta_mmap"]["peak_ratio"],
            f"plain load: {load['paths']['plain']['peak_ratio']:.2f}×",
        ),
        "loop_throughput": target("loop_throughput", loop["ratio"]),
    }
    if suite["measured"]:
        for key, part in (("suite_make_test", "make_test"), ("suite_contract", "contract")):
            measured = suite[part]
            targets[key] = target(key, measured["wall_s"], measured["summary"])
            if not measured["passed"]:  # a failing suite is not fast, it is broken
                targets[key] |= {"met": False, "verdict": "failed: the tests did not pass"}
    else:
        targets["suite_make_test"] = target("suite_make_test", None, suite["why"])
        targets["suite_contract"] = target("suite_contract", None, suite["why"])
    return targets


def mark(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "not measured"}[met]


def table_md(results: dict[str, Any]) -> str:
    """The summary: per point, the lab, its baseline, the measured ratio and the target."""
    s, save, vl = results["sampler"], results["save"], results["verify_load"]
    loop, suite, t = results["loop"], results["suite"], results["targets"]
    k, first_key = s["ks"][-1], f"k_{s['ks'][0]}"
    last = s["per_k"][f"k_{k}"]["median_s"]
    lines = [
        "| point | the lab | baseline | measured | target | |",
        "| --- | --- | --- | ---: | ---: | --- |",
    ]

    def row(
        point: str, lab: str, base: str, measured: str, key: str | None, met: bool | None = None
    ) -> None:
        """`met` overrides the target's own verdict (a per-size row of a worst-size target)."""
        if key is None:
            goal, verdict = "", "for context"
        else:
            goal, verdict = t[key]["target"], mark(t[key]["met"] if met is None else met)
        lines.append(f"| {point} | {lab} | {base} | {measured} | {goal} | {verdict} |")

    row(
        f"resume position, k = {k:,}",
        f"start at k: {fmt_duration(last['start'])}",
        f"replay k batches: {fmt_duration(last['replay'])}",
        f"{fmt_speedup(s['speedup'])} faster",
        "sampler_speedup",
    )
    row(
        f"resume position, k = {s['ks'][0]} → {k:,}",
        f"{fmt_duration(s['per_k'][first_key]['median_s']['start'])} → "
        f"{fmt_duration(last['start'])}",
        "",
        f"{s['flat_ratio']:.2f}×",
        "sampler_flat",
    )
    row(
        f"… in a fresh process, k = {k:,}",
        f"draw the order, start at k: {fmt_duration(last['cold_start'])}",
        f"draw the order, replay: {fmt_duration(last['cold_replay'])}",
        f"{fmt_speedup(s['cold_speedup'])} faster",
        None,
    )
    for size in save.values():
        m = size["median_s"]
        row(
            f"save {size['label']}",
            f"save_checkpoint: {fmt_time(m['save_checkpoint'])}",
            f"torch.save + fsync: {fmt_time(m['floor'])}",
            f"{size['ratio']:.2f}×",
            "save_overhead",
            met=size["ratio"] <= t["save_overhead"]["threshold"],
        )
    h = vl["hashing"]
    row(
        f"verify {fmt_bytes(h['file_bytes'])}",
        f"verify(): {h['gb_per_s']['verify']:.2f} GB/s",
        f"hashlib in memory: {h['gb_per_s']['in_memory']:.2f} GB/s",
        f"{h['gb_per_s']['verify']:.2f} GB/s",
        "verify_throughput",
    )
    meta, plain = vl["paths"]["meta_mmap"], vl["paths"]["plain"]
    row(
        f"load {fmt_bytes(vl['model_bytes'])} model, peak extra memory",
        f"meta + mmap + assign: {fmt_bytes(meta['peak_extra_bytes'])} ({meta['peak_ratio']:.2f}×)",
        f"plain load: {fmt_bytes(plain['peak_extra_bytes'])} ({plain['peak_ratio']:.2f}×)",
        f"{meta['peak_ratio']:.2f}×",
        "load_peak",
    )
    r = loop["updates_per_s"]
    row(
        f"training loop, {loop['updates']:,} updates",
        f"Trainer + callbacks: {r['trainer']:,.0f} updates/s",
        f"bare loop: {r['bare']:,.0f} updates/s",
        f"{loop['ratio']:.3f}",
        "loop_throughput",
    )
    row(
        f"… counting its {loop['saves_per_run']:g} best.pt writes",
        f"{r['trainer_with_saves']:,.0f} updates/s",
        f"bare loop: {r['bare']:,.0f} updates/s",
        f"{loop['ratio_with_saves']:.3f}",
        None,
    )
    if suite["measured"]:
        make, contract = suite["make_test"], suite["contract"]
        row(
            "`make test`",
            f"lint, then {make['summary']}",
            f"pytest's own clock: {make['pytest_s']:.1f} s",
            f"{make['wall_s']:.1f} s",
            "suite_make_test",
        )
        row(
            "contract tests alone",
            f"{contract['summary']}",
            f"pytest's own clock: {contract['pytest_s']:.2f} s",
            f"{contract['wall_s']:.2f} s",
            "suite_contract",
        )
    else:
        row("`make test`", "not measured", "", "", "suite_make_test")
        row("contract tests alone", "not measured", "", "", "suite_contract")
    return "\n".join(lines)


def sampler_table_md(s: dict[str, Any]) -> str:
    lines = [
        "| k | start at k (warm) | replay k (warm) | speed-up "
        "| start at k (cold) | replay k (cold) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for entry in s["per_k"].values():
        m = entry["median_s"]
        lines.append(
            f"| {entry['k']:,} | {fmt_duration(m['start'])} | {fmt_duration(m['replay'])} | "
            f"{fmt_speedup(entry['speedup'])} | {fmt_duration(m['cold_start'])} | "
            f"{fmt_duration(m['cold_replay'])} |"
        )
    return "\n".join(lines)


def save_table_md(save: dict[str, Any]) -> str:
    lines = [
        "| state | torch.save + fsync (floor) | atomic_save, hash in line | atomic_save "
        "| save_checkpoint | ÷ floor: in line | atomic_save | save_checkpoint |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for size in save.values():
        m = size["median_s"]
        lines.append(
            f"| {size['label']} | {fmt_time(m['floor'])} | {fmt_time(m['inline_hash'])} "
            f"| {fmt_time(m['atomic_save'])} | {fmt_time(m['save_checkpoint'])} "
            f"| {size['ratio_inline_hash']:.2f}× | {size['ratio_atomic_save']:.2f}× "
            f"| {size['ratio']:.2f}× |"
        )
    return "\n".join(lines)


def load_table_md(vl: dict[str, Any]) -> str:
    lines = [
        "| path | time to a usable model | peak extra memory | ÷ model bytes "
        "| anonymous | file-backed |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in vl["paths"].values():
        lines.append(
            f"| {p['label']} | {fmt_time(p['load_s'])} | {fmt_bytes(p['peak_extra_bytes'])} | "
            f"{p['peak_ratio']:.2f}× | {fmt_bytes(max(0, p['rss_anon_extra_bytes']))} | "
            f"{fmt_bytes(max(0, p['rss_file_extra_bytes']))} |"
        )
    return "\n".join(lines)


def headline(results: dict[str, Any]) -> dict[str, str]:
    """Ready-to-print strings for the page."""
    s, save, vl = results["sampler"], results["save"], results["verify_load"]
    loop, suite, t = results["loop"], results["suite"], results["targets"]
    k_first, k_last = s["ks"][0], s["ks"][-1]
    first, last = s["per_k"][f"k_{k_first}"]["median_s"], s["per_k"][f"k_{k_last}"]["median_s"]
    sizes = list(save.values())
    meta, plain, lab = (vl["paths"][h] for h in ("meta_mmap", "plain", "load_checkpoint"))
    out = {
        "examples": f"{s['examples']:,}",
        "micro_batch": str(s["micro_batch"]),
        "k_first": f"{k_first:,}",
        "k_last": f"{k_last:,}",
        "start_first": fmt_duration(first["start"]),
        "start_last": fmt_duration(last["start"]),
        "replay_last": fmt_duration(last["replay"]),
        "sampler_speedup": fmt_speedup(s["speedup"]),
        "sampler_flat": f"{s['flat_ratio']:.2f}×",
        "cold_start_last": fmt_duration(last["cold_start"]),
        "cold_replay_last": fmt_duration(last["cold_replay"]),
        "cold_speedup": fmt_speedup(s["cold_speedup"]),
        "permutation": fmt_duration(s["permutation_s"]),
        "save_smallest": sizes[0]["label"],
        "save_largest": sizes[-1]["label"],
        "save_ratio_min": f"{min(x['ratio'] for x in sizes):.2f}×",
        "save_ratio_max": f"{max(x['ratio'] for x in sizes):.2f}×",
        "save_floor_largest": fmt_time(sizes[-1]["median_s"]["floor"]),
        "save_checkpoint_largest": fmt_time(sizes[-1]["median_s"]["save_checkpoint"]),
        "save_ratio_largest": f"{sizes[-1]['ratio']:.2f}×",
        "save_ratio_smallest": f"{sizes[0]['ratio']:.2f}×",
        "save_ratio_best_min": f"{min(x['ratio_best'] for x in sizes):.2f}×",
        "save_ratio_best_max": f"{max(x['ratio_best'] for x in sizes):.2f}×",
        "save_atomic_ratio_max": f"{max(x['ratio_atomic_save'] for x in sizes):.2f}×",
        "inline_ratio_min": f"{min(x['ratio_inline_hash'] for x in sizes):.2f}×",
        "inline_ratio_max": f"{max(x['ratio_inline_hash'] for x in sizes):.2f}×",
        "save_inline_largest": fmt_time(sizes[-1]["median_s"]["inline_hash"]),
        "floor_gbps_largest": (
            f"{sizes[-1]['file_bytes'] / sizes[-1]['median_s']['floor'] / GB:.2f} GB/s"
        ),
        "save_gbps_largest": (
            f"{sizes[-1]['file_bytes'] / sizes[-1]['median_s']['save_checkpoint'] / GB:.2f} GB/s"
        ),
        "verify_gbps": f"{vl['hashing']['gb_per_s']['verify']:.2f} GB/s",
        "large_reads_gbps": f"{vl['hashing']['gb_per_s']['large_reads']:.2f} GB/s",
        "hash_memory_gbps": f"{vl['hashing']['gb_per_s']['in_memory']:.2f} GB/s",
        "model": vl["model"],
        "model_size": fmt_bytes(vl["model_bytes"]),
        "meta_peak": fmt_bytes(meta["peak_extra_bytes"]),
        "meta_ratio": f"{meta['peak_ratio']:.2f}×",
        "meta_load": fmt_time(meta["load_s"]),
        "plain_peak": fmt_bytes(plain["peak_extra_bytes"]),
        "plain_ratio": f"{plain['peak_ratio']:.2f}×",
        "plain_load": fmt_time(plain["load_s"]),
        "lab_load_peak": fmt_bytes(lab["peak_extra_bytes"]),
        "lab_load_ratio": f"{lab['peak_ratio']:.2f}×",
        "loop_updates": f"{loop['updates']:,}",
        "trainer_rate": f"{loop['updates_per_s']['trainer']:,.0f}",
        "bare_rate": f"{loop['updates_per_s']['bare']:,.0f}",
        "trainer_per_update": fmt_duration(loop["per_update_s"]["trainer"]),
        "bare_per_update": fmt_duration(loop["per_update_s"]["bare"]),
        "loop_ratio": f"{loop['ratio']:.3f}",
        "loop_ratio_with_saves": f"{loop['ratio_with_saves']:.3f}",
        "loop_cpu_ratio": f"{loop['cpu_ratio']:.3f}",
        "loop_save_each": fmt_duration(loop["save_s"]),
        "trainer_rate_with_saves": f"{loop['updates_per_s']['trainer_with_saves']:,.0f}",
        "loop_overhead_per_update": fmt_duration(
            loop["per_update_s"]["trainer"] - loop["per_update_s"]["bare"]
        ),
        "loop_saves": f"{loop['saves_per_run']:g}",
        "targets_met": str(sum(x["met"] is True for x in t.values())),
        "targets_measured": str(sum(x["met"] is not None for x in t.values())),
    }
    if suite["measured"]:
        out |= {
            "make_test": f"{suite['make_test']['wall_s']:.1f} s",
            "make_test_pytest": f"{suite['make_test']['pytest_s']:.1f} s",
            "make_test_summary": suite["make_test"]["summary"],
            "contract": f"{suite['contract']['wall_s']:.2f} s",
            "contract_pytest": f"{suite['contract']['pytest_s']:.2f} s",
            "suite_date": suite["date"],
            "suite_load_average": f"{suite['load_average_end'][0]:.1f}",
        }
        folders = suite["make_test"]["by_folder_s"]
        slowest = next(iter(folders), None)
        out |= {
            "make_test_slowest": slowest or "not measured",
            "make_test_slowest_s": f"{folders[slowest]:.1f} s" if slowest else "not measured",
            "make_test_without_slowest": (
                f"{suite['make_test']['wall_s'] - folders[slowest]:.1f} s"
                if slowest
                else "not measured"
            ),
        }
    else:  # the keys the page names exist either way, so the site builds mid-run too
        keys = (
            *("make_test", "make_test_pytest", "make_test_summary", "contract", "contract_pytest"),
            *("suite_date", "suite_load_average", "make_test_slowest", "make_test_slowest_s"),
            "make_test_without_slowest",
        )
        out |= dict.fromkeys(keys, "not measured")
    return out


# --- running ----------------------------------------------------------------------------------


def run(
    plan: Plan = FULL,
    log: Callable[[str], None] = lambda message: None,
    before_suite: Callable[[dict[str, Any]], None] = lambda results: None,
    suite_folder: Path = ROOT,
) -> dict[str, Any]:
    """Measure every point; returns the results dict. `before_suite` gets the results with the
    suite still pending (make bench writes them, so the suite tests the numbers of this run)."""
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
        results["save"] = {}
        for key, label, total in plan.save_sizes:
            results["save"][key] = step(
                f"2 save {label}",
                lambda k=key, lb=label, n=total: measure_save(k, lb, n, plan, scratch),
            )
        results["verify_load"] = step("3 verify and load", lambda: measure_load(plan, scratch))
        results["loop"] = step("4 loop", lambda: measure_loop(plan, scratch))
    if plan.suite_repeats:
        results["suite"] = {"measured": False, "why": PENDING}
        finish_provenance(results["provenance"], time.perf_counter() - started)
        before_suite(finalize(results))
    results["suite"] = step("5 suite", lambda: measure_suite(plan, suite_folder))
    finish_provenance(results["provenance"], time.perf_counter() - started)
    return finalize(results)


def finalize(results: dict[str, Any]) -> dict[str, Any]:
    """Targets, headline strings and tables, from the measurements (recomputed, never edited)."""
    results["targets"] = evaluate_targets(results)
    results["all_met"] = all(t["met"] for t in results["targets"].values() if t["met"] is not None)
    results["headline"] = headline(results)
    results["table_md"] = table_md(results)
    results["sampler_table_md"] = sampler_table_md(results["sampler"])
    results["save_table_md"] = save_table_md(results["save"])
    results["load_table_md"] = load_table_md(results["verify_load"])
    return results


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
        "--load-worker", nargs=4, metavar=("PATH", "HOW", "WIDTH", "LAYERS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.load_worker:
        path, how, width, layers = args.load_worker
        print(json.dumps(load_worker(path, how, int(width), int(layers))))
        return 0
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
    if args.suite_only:
        results = json.loads((out_dir / f"{NAME}.json").read_text("utf8"))
        results["suite"] = {"measured": False, "why": PENDING}
        write(finalize(results), out_dir)  # what the suite's own tests read meanwhile
        results["suite"] = measure_suite(plan, suite_folder)
        results = finalize(results)
    else:
        results = run(
            plan, log=log, before_suite=lambda r: write(r, out_dir), suite_folder=suite_folder
        )
    path = write(results, out_dir)
    print(results["table_md"])
    print()
    print(results["sampler_table_md"])
    print()
    print(results["save_table_md"])
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
