"""The performance page's figures and sentences, from the derived results (metrics.py).

Every sentence that compares two measurements is built by fmt.outcome from verdicts.compare: it
names a winner only when the runs separate. The hash sentence says the numbers support the
default only when they do."""

from __future__ import annotations

from typing import Any

from .fmt import (
    date,
    fmt_bytes,
    fmt_duration,
    fmt_speedup,
    fmt_time,
    listing,
    outcome,
    pytest_summary,
)
from .performance_tables import save_names
from .targets import HASH_NAMES, TARGETS, TOO_NOISY

GB = 10**9


def hash_choice(save: dict[str, Any], hashing: dict[str, Any]) -> dict[str, Any]:
    """Whether this run's numbers support the default hash, and the sentence that says why.

    Supported: the default hashed faster in memory beyond noise at one size or more, and the
    other was never faster beyond noise, in memory or while saving. Contradicted: the other was
    faster beyond noise somewhere. Anything else is inconclusive, and the sentence says so."""
    default = next(iter(save.values()))["default_hash"]
    other = next(a for a in HASH_NAMES if a != default)
    d, o = HASH_NAMES[default], HASH_NAMES[other]
    labels = {k: s["label"] for k, s in save.items()}
    memory = {k: h["compare"]["memory"] for k, h in hashing.items()}
    writing = {k: s["compare"]["default_vs_other"] for k, s in save.items()}
    memory_wins = [k for k, c in memory.items() if c["winner"] == f"memory_{default}"]
    memory_ties = [k for k, c in memory.items() if c["winner"] is None]
    memory_losses = [k for k, c in memory.items() if c["winner"] == f"memory_{other}"]
    write_wins = [k for k, c in writing.items() if c["winner"] == f"save_{default}"]
    write_losses = [k for k, c in writing.items() if c["winner"] == f"save_{other}"]
    contradicted = bool(memory_losses or write_losses)
    supported = bool(memory_wins) and not contradicted
    factors = [memory[k]["factor"] for k in memory_wins]

    def at(keys: list[str]) -> str:
        return listing([labels[k] for k in keys])

    if supported:
        speed = (
            f"{min(factors):.1f}×"
            if max(factors) - min(factors) < 0.05
            else (f"{min(factors):.1f}× to {max(factors):.1f}×")
        )
        sentence = f"{d} is the default because it hashed {speed} faster than {o} in memory"
        sentence += " at every size" if not memory_ties else f" at {at(memory_wins)}"
        sentence += ", beyond noise"
        if memory_ties:
            sentence += f" (within noise at {at(memory_ties)} in this run)"
        if write_wins:
            sentence += f", and saving with it was faster beyond noise at {at(write_wins)}"
        sentence += f"; {o} was never faster beyond noise"
    elif contradicted:
        reasons = []
        if memory_losses:
            reasons.append(f"{o} hashed faster in memory at {at(memory_losses)}")
        if write_losses:
            reasons.append(f"saving with {o} was faster at {at(write_losses)}")
        sentence = f"The default is {d}, but this run does not support it: {'; '.join(reasons)}"
    else:
        sentence = (
            f"The default is {d}; in this run the two hashes were within noise of each other "
            "at every size, so these numbers neither support nor contradict it"
        )
    return {
        "default": default,
        "supported": supported,
        "contradicted": contradicted,
        "memory_factors": {k: memory[k]["factor"] for k in memory},
        "sentence": sentence,
    }


def sampler_shape(s: dict[str, Any]) -> str:
    """ "flat" only if no k's fastest start was more than the flatness threshold times the
    smallest k's slowest: beyond noise, no growth with k."""
    first = s["per_k"][f"k_{s['ks'][0]}"]["runs_s"]["start"]
    limit = TARGETS["sampler_flat"][2] * max(first)
    grown = [e["k"] for e in s["per_k"].values() if min(e["runs_s"]["start"]) > limit]
    if not grown:
        return "flat"
    return f"not flat: at k = {listing([f'{k:,}' for k in grown])} it was slower beyond noise"


def headline(results: dict[str, Any]) -> dict[str, str]:
    """Ready-to-print strings for the page."""
    s, save, vl = results["sampler"], results["save"], results["verify_load"]
    hashing, loop, suite, t = (
        results["hashing"],
        results["loop"],
        results["suite"],
        results["targets"],
    )
    k_first, k_last = s["ks"][0], s["ks"][-1]
    first, last = s["per_k"][f"k_{k_first}"]["median_s"], s["per_k"][f"k_{k_last}"]["median_s"]
    sizes = list(save.values())
    largest, largest_hash = sizes[-1], list(hashing.values())[-1]
    names = save_names(largest)
    lab_key = f"save_{largest['default_hash']}"
    meta, plain, lab = (vl["paths"][h] for h in ("meta_mmap", "plain", "load_checkpoint"))
    load_names = {
        "load_checkpoint": "load_checkpoint",
        "plain": "the plain load",
        "meta_mmap": "meta + mmap + assign",
    }
    rate = largest_hash["gb_per_s"]
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
        "sampler_shape": sampler_shape(s),
        "cold_start_last": fmt_duration(last["cold_start"]),
        "cold_replay_last": fmt_duration(last["cold_replay"]),
        "cold_speedup": fmt_speedup(s["cold_speedup"]),
        "permutation": fmt_duration(s["permutation_s"]),
        "save_smallest": sizes[0]["label"],
        "save_largest": largest["label"],
        "save_ratios": listing(
            [f"{sizes[0]['ratio']:.2f}× the floor at {sizes[0]['label']}"]
            + [f"{x['ratio']:.2f}× at {x['label']}" for x in sizes[1:]]
        ),
        "save_floor_largest": fmt_time(largest["median_s"]["floor"]),
        "save_floor_spread_largest": f"{largest['floor_spread'] * 100:.0f} %",
        "save_margin": f"{(TARGETS['save_overhead'][2] - 1) * 100:.0f} %",
        "save_checkpoint_largest": fmt_time(largest["median_s"][lab_key]),
        "save_ratio_largest": f"{largest['ratio']:.2f}×",
        "save_vs_floor_largest": outcome(largest["compare"]["lab_vs_floor"], names),
        "helper_vs_inline_largest": outcome(largest["compare"]["helper_vs_inline"], names),
        "save_inline_largest": fmt_time(largest["median_s"]["inline"]),
        "floor_gbps_largest": (
            f"{largest['file_bytes'] / largest['median_s']['floor'] / GB:.2f} GB/s"
        ),
        "save_gbps_largest": (
            f"{largest['file_bytes'] / largest['median_s'][lab_key] / GB:.2f} GB/s"
        ),
        "default_hash": HASH_NAMES[largest["default_hash"]],
        "blake3_memory_gbps_largest": f"{rate['memory_blake3']:.2f} GB/s",
        "sha256_memory_gbps_largest": f"{rate['memory_sha256']:.2f} GB/s",
        "blake3_threads_gbps_largest": f"{rate['memory_blake3_threads']:.2f} GB/s",
        "blake3_file_gbps_largest": f"{rate['file_blake3']:.2f} GB/s",
        "sha256_file_gbps_largest": f"{rate['file_sha256']:.2f} GB/s",
        "hash_writing": listing(
            [
                f"at {x['label']} "
                + outcome(
                    x["compare"]["algorithms"],
                    {"save_blake3": "BLAKE3", "save_sha256": "SHA-256"},
                )
                for x in sizes
            ]
        ),
        "threads_vs_one": outcome(
            largest_hash["compare"]["threads_vs_one"],
            {
                "memory_blake3_threads": "BLAKE3 with its own threads",
                "memory_blake3": "BLAKE3 on one thread",
            },
        ),
        "verify_gbps": f"{vl['verify']['gb_per_s']:.2f} GB/s",
        "verify_hash": HASH_NAMES.get(vl["hash"], vl["hash"]),
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
        "lab_load_ratio_max": f"{lab['peak_ratio_max']:.3f}×",
        "lab_load_time": fmt_time(lab["load_s"]),
        "lab_vs_plain": outcome(
            vl["compare"]["lab_vs_plain"],
            load_names,
            fmt=fmt_bytes,
            verb="peaked lower than",
            separated="its highest run stayed below the other's lowest",
        ),
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
        "targets_judged": str(sum(x["met"] is not None for x in t.values())),
        "targets_noisy": str(sum(x["verdict"] == TOO_NOISY for x in t.values())),
        "hash_choice": results["hash_choice"]["sentence"],
    }
    if suite["measured"]:
        out |= {
            "make_test": f"{suite['make_test']['wall_s']:.1f} s",
            "make_test_pytest": f"{suite['make_test']['pytest_s']:.1f} s",
            "make_test_summary": pytest_summary(suite["make_test"]["counts"]),
            "contract": f"{suite['contract']['wall_s']:.2f} s",
            "contract_pytest": f"{suite['contract']['pytest_s']:.2f} s",
            "suite_date": date(suite["finished"]),
            "suite_load_average": f"{suite['load_average_end'][0]:.1f}",
        }
        folders = suite["make_test"]["by_folder_s"]
        slowest = next(iter(folders), None)
        workers = suite["make_test"].get("workers", 1)
        out |= {
            "make_test_workers": (
                f"on {workers} pytest-xdist workers" if workers > 1 else "in one process"
            ),
            # the tests' own times added up (over every worker), not the wall time
            "make_test_summed": f"{sum(folders.values()):.1f} s" if folders else "not measured",
            "make_test_slowest": slowest or "not measured",
            "make_test_slowest_s": f"{folders[slowest]:.1f} s" if slowest else "not measured",
            "make_test_without_slowest": (
                f"{sum(folders.values()) - folders[slowest]:.1f} s" if slowest else "not measured"
            ),
        }
    else:  # the keys the page names exist either way, so the site builds mid-run too
        keys = (
            *("make_test", "make_test_pytest", "make_test_summary", "contract", "contract_pytest"),
            *("suite_date", "suite_load_average", "make_test_slowest", "make_test_slowest_s"),
            *("make_test_without_slowest", "make_test_workers", "make_test_summed"),
        )
        out |= dict.fromkeys(keys, "not measured")
    return out
