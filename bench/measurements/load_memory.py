"""Verifying and loading a large checkpoint: verify()'s speed and each load path's peak memory.

A ~1 GB model's state is committed with the lab's save_checkpoint; then each load path runs in a
fresh Python process (so each peak is that load's alone), which resets its high-water mark
(/proc/self/clear_refs) and reports VmHWM minus its resident size before loading:

- load_checkpoint: the lab's own load path, nothing else (no model built);
- meta_mmap: verify(), a meta-device model, torch.load(mmap=True), load_state_dict(assign=True);
- plain: a model built on the CPU, verify(), torch.load(), load_state_dict().

    # one worker, which prints its JSON:
    .venv/bin/python -m bench.measurements.load_memory CHECKPOINT HOW WIDTH LAYERS
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from resume_lab.checkpoint import STATE_FILE, load_checkpoint, save_checkpoint, verify
from resume_lab.hashing import DEFAULT_HASH

from ..launch import ROOT
from ..plan import Plan
from ..timing import side_by_side

LAB = "load_checkpoint"
# The lab's own load; verify + meta model + torch.load(mmap=True) + load_state_dict(assign=True);
# a model built on the CPU + verify + torch.load + load_state_dict.
LOAD_PATHS = (LAB, "meta_mmap", "plain")


def build_big_model(width: int, layers: int) -> nn.Sequential:
    return nn.Sequential(*(nn.Linear(width, width) for _ in range(layers)))


def proc_status() -> dict[str, int]:
    """VmRSS, VmHWM (peak RSS), RssAnon and RssFile of this process, in bytes."""
    wanted, found = {"VmRSS", "VmHWM", "RssAnon", "RssFile"}, {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            found[key] = int(value.split()[0]) * 1024
    return found


def worker(checkpoint: str, how: str, width: int, layers: int) -> dict[str, Any]:
    """One load path in this (fresh) process; returns its time and peak extra resident memory."""
    path = Path(checkpoint)
    torch.set_num_threads(1)
    try:  # reset the peak (VmHWM) to the current RSS: Linux 4.0+
        Path("/proc/self/clear_refs").write_text("5")
        peak_reset = True
    except OSError:
        peak_reset = False  # VmHWM since the process started
    before = proc_status()
    start = time.perf_counter()
    if how == LAB:
        state, _ = load_checkpoint(path)
        tensors = list(state.values())
    elif how == "meta_mmap":
        verify(path)  # streams the file through the hash: page cache, not this process's memory
        with torch.device("meta"):
            model = build_big_model(width, layers)  # shapes only, no memory, no init
        state = torch.load(path / STATE_FILE, weights_only=True, mmap=True)
        model.load_state_dict(state, assign=True)  # the parameters ARE the mapped tensors
        tensors = [p.detach() for p in model.parameters()]
    elif how == "plain":
        model = build_big_model(width, layers)  # allocated and initialised: copy one
        verify(path)
        state = torch.load(path / STATE_FILE, weights_only=True)  # copy two
        model.load_state_dict(state)
        tensors = [p.detach() for p in model.parameters()]
    else:
        raise ValueError(how)
    del state
    load_s = time.perf_counter() - start
    # Read every tensor (a digest of its bytes): a mapped page counts once it is touched.
    digest = hashlib.sha256()
    for t in tensors:
        digest.update(t.numpy().data)
    after = proc_status()
    return {
        "how": how,
        "load_s": load_s,
        "peak_extra_bytes": after["VmHWM"] - before["VmRSS"],
        "rss_anon_extra_bytes": after["RssAnon"] - before["RssAnon"],
        "rss_file_extra_bytes": after["RssFile"] - before["RssFile"],
        "baseline_rss_bytes": before["VmRSS"],
        "peak_reset": peak_reset,
        "tensors_sha256": digest.hexdigest(),
    }


def run_workers(
    checkpoint: Path, width: int, layers: int, repeats: int, fresh_process: bool
) -> dict[str, list[dict[str, Any]]]:
    """Every load path `repeats` times, alternating the order, each in a fresh interpreter."""
    order = list(LOAD_PATHS)
    jobs = [how for r in range(repeats) for how in (order if r % 2 == 0 else order[::-1])]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    module = [sys.executable, "-m", "bench.measurements.load_memory"]
    results: dict[str, list[dict[str, Any]]] = {how: [] for how in LOAD_PATHS}
    for how in jobs:
        if not fresh_process:
            results[how].append(worker(str(checkpoint), how, width, layers))
            continue
        command = [*module, str(checkpoint), how, str(width), str(layers)]
        proc = subprocess.run(
            command, capture_output=True, text=True, env=env, check=False, cwd=ROOT
        )
        if proc.returncode != 0:
            raise RuntimeError(f"load worker {how} failed:\n{proc.stderr}")
        results[how].append(json.loads(proc.stdout.splitlines()[-1]))
    return results


def measure(plan: Plan) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-load-") as scratch:
        return measure_in(plan, Path(scratch))


def measure_in(plan: Plan, folder: Path) -> dict[str, Any]:
    width, layers = plan.model_width, plan.model_layers
    with torch.device("meta"):
        shapes = build_big_model(width, layers).state_dict()
    gen = torch.Generator().manual_seed(0)
    state = {name: torch.randn(t.shape, generator=gen) for name, t in shapes.items()}
    model_bytes = sum(t.numel() * t.element_size() for t in state.values())
    checkpoint = save_checkpoint(
        {STATE_FILE: state}, folder, "model", step=0, config={"width": width, "layers": layers}
    )
    expected = hashlib.sha256()
    for t in state.values():
        expected.update(t.numpy().data)
    del state

    file_bytes = (checkpoint / STATE_FILE).stat().st_size
    verify_runs = side_by_side({"verify": lambda: verify(checkpoint)}, plan.repeats)["verify"]
    workers = run_workers(checkpoint, width, layers, plan.load_repeats, plan.load_in_subprocess)
    shutil.rmtree(checkpoint)
    paths: dict[str, Any] = {}
    numbers = (
        "load_s",
        "peak_extra_bytes",
        "rss_anon_extra_bytes",
        "rss_file_extra_bytes",
        "baseline_rss_bytes",
    )
    for how, runs in workers.items():
        assert all(r["tensors_sha256"] == expected.hexdigest() for r in runs), how
        paths[how] = {name: statistics.median([r[name] for r in runs]) for name in numbers[:-1]} | {
            "peak_reset": all(r["peak_reset"] for r in runs),
            "runs": [{name: r[name] for name in numbers} for r in runs],
        }
    return {
        "model_width": width,
        "model_layers": layers,
        "model_bytes": model_bytes,
        "file_bytes": file_bytes,
        "hash": DEFAULT_HASH,
        "fresh_process_per_load": plan.load_in_subprocess,
        "verify": {"median_s": statistics.median(verify_runs), "runs_s": verify_runs},
        "paths": paths,
    }


if __name__ == "__main__":
    path, how, width, layers = sys.argv[1:5]
    print(json.dumps(worker(path, how, int(width), int(layers))))
