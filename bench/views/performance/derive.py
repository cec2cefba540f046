"""The figures that follow from the stored runs: ratios, rates, spreads, comparisons, and the
targets judged. Added next to the numbers they come from; nothing here is stored."""

from __future__ import annotations

from typing import Any

from ...timing import compare, decimal_size, spread
from .rules import GB, HASH_NAMES, target


def method(plan: dict[str, Any]) -> str:
    repeats = sorted({plan["repeats"], plan["save_repeats"], plan["loop_repeats"]})
    runs = f"{repeats[0]} to {repeats[-1]}" if len(repeats) > 1 else str(repeats[0])
    return (
        f"medians of {runs} runs per timing, {plan['load_repeats']} fresh processes per load "
        f"path, {plan['suite_repeats']} run of make test and {plan['contract_repeats']} of the "
        "contract tests"
    )


# --- derived figures ----------------------------------------------------------------------


def derive(out: dict[str, Any]) -> None:
    """Ratios, rates, spreads and comparisons, added next to the numbers they come from."""
    derive_sampler(out["sampler"])
    derive_save(out["save"])
    derive_hashing(out["hashing"], out["save"])
    derive_verify_load(out["verify_load"])
    derive_loop(out["loop"])


def derive_sampler(s: dict[str, Any]) -> None:
    for entry in s["per_k"].values():
        m, runs = entry["median_s"], entry["runs_s"]
        entry["speedup"] = m["replay"] / m["start"]
        entry["cold_speedup"] = m["cold_replay"] / m["cold_start"]
        entry["compare"] = {
            "warm": compare(runs, "start", "replay"),
            "cold": compare(runs, "cold_start", "cold_replay"),
        }
    first, last = s["per_k"][f"k_{s['ks'][0]}"], s["per_k"][f"k_{s['ks'][-1]}"]
    s["flat_ratio"] = last["median_s"]["start"] / first["median_s"]["start"]
    s["speedup"], s["cold_speedup"] = last["speedup"], last["cold_speedup"]
    s["compare"] = last["compare"]  # at the largest k, as the page words them


def derive_save(save: dict[str, Any]) -> None:
    for size in save.values():
        runs, m, lab = size["runs_s"], size["median_s"], f"save_{size['default_hash']}"
        other = next(f"save_{a}" for a in HASH_NAMES if f"save_{a}" != lab)
        size["label"] = decimal_size(size["state_bytes"])
        size["ratios"] = {name: t / m["floor"] for name, t in m.items() if name != "floor"}
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
            n: h["file_bytes" if n.startswith("file_") else "memory_bytes"] for n in h["median_s"]
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
    peaks = {
        how: [float(r["peak_extra_bytes"]) for r in p["runs"]] for how, p in vl["paths"].items()
    }
    for how, p in vl["paths"].items():
        p["peak_ratio"] = p["peak_extra_bytes"] / vl["model_bytes"]
        p["peak_ratio_max"] = max(peaks[how]) / vl["model_bytes"]
    vl["compare"] = {
        "lab_vs_plain": compare(peaks, "load_checkpoint", "plain"),
        "meta_vs_plain": compare(peaks, "meta_mmap", "plain"),
    }


def derive_loop(loop: dict[str, Any]) -> None:
    rates = {name: loop["updates"] / seconds for name, seconds in loop["median_s"].items()}
    loop["updates_per_s"] = rates
    loop["per_update_s"] = {name: t / loop["updates"] for name, t in loop["median_s"].items()}
    loop["ratio"] = rates["trainer"] / rates["bare"]
    loop["ratio_with_saves"] = rates["trainer_with_saves"] / rates["bare"]
    loop["cpu_ratio"] = loop["cpu_median_s"]["bare"] / loop["cpu_median_s"]["trainer"]


def targets(out: dict[str, Any]) -> dict[str, Any]:
    s, vl, loop, suite = out["sampler"], out["verify_load"], out["loop"], out["suite"]
    largest = list(out["save"].values())[-1]
    found = {
        "sampler_flat": target(
            "sampler_flat", s["flat_ratio"], s["per_k"][f"k_{s['ks'][0]}"]["runs_s"]["start"]
        ),
        "sampler_speedup": target("sampler_speedup", s["speedup"]),
        "save_overhead": target("save_overhead", largest["ratio"], largest["runs_s"]["floor"]),
        "verify_throughput": target("verify_throughput", vl["verify"]["gb_per_s"]),
        "load_peak": target("load_peak", vl["paths"]["load_checkpoint"]["peak_ratio_max"]),
        "loop_throughput": target("loop_throughput", loop["ratio"], loop["runs_s"]["bare"]),
    }
    for key, part in (("suite_make_test", "make_test"), ("suite_contract", "contract")):
        found[key] = target(key, suite[part]["wall_s"] if suite["measured"] else None)
        if suite["measured"] and not suite[part]["passed"]:  # not fast: broken
            found[key] |= {"met": False, "verdict": "failed: the tests did not pass"}
    return found
