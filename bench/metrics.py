"""What follows from the stored measurements: ratios, rates, spreads and comparisons.

The results files hold what was measured (every run, bytes, counts) and where; everything here
is computed from them whenever a page is built or a run is printed, so a rule or a formula can
change without measuring again. `derive` returns a new dict; the stored one is left alone.
"""

from __future__ import annotations

import copy
import statistics
from typing import Any

from .verdicts import compare, spread

GB = 10**9
LOAD_PATHS = ("load_checkpoint", "meta_mmap", "plain")


def decimal_size(n: float) -> str:
    """10 MB, 100 MB, 1 GB: the save sizes, named as the page names them."""
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.2f} {unit}"
    return f"{n:.0f} B"


def binary_size(n: int) -> str:
    """1 MiB, 1 GiB, 64 KiB: the serialization sizes, as the page names them."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def ratios(median_s: dict[str, float], over: str) -> dict[str, float]:
    return {name: m / median_s[over] for name, m in median_s.items() if name != over}


def derive_sampler(s: dict[str, Any]) -> None:
    for entry in s["per_k"].values():
        m = entry["median_s"]
        entry["speedup"] = m["replay"] / m["start"]
        entry["cold_speedup"] = m["cold_replay"] / m["cold_start"]
    first, last = s["per_k"][f"k_{s['ks'][0]}"], s["per_k"][f"k_{s['ks'][-1]}"]
    s["flat_ratio"] = last["median_s"]["start"] / first["median_s"]["start"]
    s["cold_flat_ratio"] = last["median_s"]["cold_start"] / first["median_s"]["cold_start"]
    s["speedup"], s["cold_speedup"] = last["speedup"], last["cold_speedup"]


def derive_save(save: dict[str, Any]) -> None:
    for size in save.values():
        runs, m, default = size["runs_s"], size["median_s"], size["default_hash"]
        lab = f"save_{default}"
        other = next(f"save_{a}" for a in ("blake3", "sha256") if a != default)
        size["label"] = decimal_size(size["state_bytes"])
        size["ratios"] = ratios(m, "floor")
        size["ratio"] = size["ratios"][lab]
        size["floor_spread"] = spread(runs["floor"])
        size["compare"] = {
            "lab_vs_floor": compare(runs, lab, "floor"),
            "algorithms": compare(runs, "save_blake3", "save_sha256"),
            "helper_vs_inline": compare(runs, lab, "inline"),
            "default_vs_other": compare(runs, lab, other),
        }


def derive_hashing(hashing: dict[str, Any], save: dict[str, Any]) -> None:
    for key, h in hashing.items():
        sizes = {
            name: h["file_bytes"] if name.startswith("file_") else h["memory_bytes"]
            for name in h["median_s"]
        }
        h["label"] = save[key]["label"]
        h["gb_per_s"] = {name: sizes[name] / m / GB for name, m in h["median_s"].items()}
        h["compare"] = {
            "memory": compare(h["runs_s"], "memory_blake3", "memory_sha256"),
            "file": compare(h["runs_s"], "file_blake3", "file_sha256"),
            "threads_vs_one": compare(h["runs_s"], "memory_blake3_threads", "memory_blake3"),
        }


def derive_verify_load(vl: dict[str, Any]) -> None:
    vl["model"] = f"{vl['model_layers']} × Linear({vl['model_width']}, {vl['model_width']})"
    vl["verify"]["gb_per_s"] = vl["file_bytes"] / vl["verify"]["median_s"] / GB
    peaks: dict[str, list[float]] = {}
    for how, p in vl["paths"].items():
        peaks[how] = [float(r["peak_extra_bytes"]) for r in p["runs"]]
        p["peak_ratio"] = p["peak_extra_bytes"] / vl["model_bytes"]
        p["peak_ratio_max"] = max(peaks[how]) / vl["model_bytes"]
    vl["compare"] = {
        "lab_vs_plain": compare(peaks, "load_checkpoint", "plain"),
        "meta_vs_plain": compare(peaks, "meta_mmap", "plain"),
    }


def derive_loop(loop: dict[str, Any]) -> None:
    updates, m, cpu = loop["updates"], loop["median_s"], loop["cpu_median_s"]
    rates = {name: updates / seconds for name, seconds in m.items()}
    loop["updates_per_s"] = rates
    loop["per_update_s"] = {name: seconds / updates for name, seconds in m.items()}
    loop["ratio"] = rates["trainer"] / rates["bare"]
    loop["ratio_with_saves"] = rates["trainer_with_saves"] / rates["bare"]
    loop["cpu_ratio"] = cpu["bare"] / cpu["trainer"]


def derive_performance(results: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(results)
    derive_sampler(out["sampler"])
    derive_save(out["save"])
    derive_hashing(out["hashing"], out["save"])
    derive_verify_load(out["verify_load"])
    derive_loop(out["loop"])
    return out


def derive_serialization(results: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(results)
    for size in out["sizes"].values():
        size["label"] = binary_size(size["raw_bytes"])
        for op in ("save", "eager_load", "lazy_open"):
            part = size[op]
            part["ratio"] = part["median_s"]["torch"] / part["median_s"]["safetensors"]
            part["compare"] = compare(part["runs_s"], "torch", "safetensors")
        one = size["one_tensor"]
        one["ratio"] = one["median_s"]["torch_mmap"] / one["median_s"]["safetensors"]
        one["ratio_full"] = one["median_s"]["torch_full"] / one["median_s"]["safetensors"]
        one["compare"] = compare(one["runs_s"], "safetensors", "torch_full")
    return out


def median(values: list[float]) -> float:
    return statistics.median(values)
