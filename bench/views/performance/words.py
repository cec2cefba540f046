"""The page's sentences: every one that compares two measurements is built by timing.outcome
from timing.compare (a winner only when the runs separate); the hash sentence says the numbers
support the default only when they do."""

from __future__ import annotations

from typing import Any

from ... import provenance
from ...timing import TOO_NOISY, fmt_duration, fmt_time, outcome
from .rules import (
    HASH_NAMES,
    TARGETS,
    fmt_bytes,
    fmt_speedup,
    gbps,
    listing,
    pytest_summary,
)


def hash_choice(save: dict[str, Any], hashing: dict[str, Any]) -> dict[str, Any]:
    """Whether this run's numbers support the default hash, and the sentence that says why.

    Supported: the default hashed faster in memory beyond noise at one size or more, and the
    other was never faster beyond noise, in memory, from the file or while saving. Contradicted:
    the other was faster beyond noise somewhere. Anything else is inconclusive, and the sentence
    says so."""
    default = next(iter(save.values()))["default_hash"]
    other = next(a for a in HASH_NAMES if a != default)
    d, o = HASH_NAMES[default], HASH_NAMES[other]
    memory = {k: h["compare"]["memory"]["winner"] for k, h in hashing.items()}
    writing = {k: s["compare"]["default_vs_other"]["winner"] for k, s in save.items()}
    memory_wins = [k for k, w in memory.items() if w == f"memory_{default}"]
    memory_ties = [k for k, w in memory.items() if w is None]
    memory_losses = [k for k, w in memory.items() if w == f"memory_{other}"]
    file_losses = [
        k for k, h in hashing.items() if h["compare"]["file"]["winner"] == f"file_{other}"
    ]
    write_wins = [k for k, w in writing.items() if w == f"save_{default}"]
    write_losses = [k for k, w in writing.items() if w == f"save_{other}"]
    contradicted = bool(memory_losses or file_losses or write_losses)
    supported = bool(memory_wins) and not contradicted
    wins = [hashing[k]["compare"]["memory"]["factor"] for k in memory_wins]

    def at(keys: list[str]) -> str:
        return listing([save[k]["label"] for k in keys])

    if supported:
        low, high = min(wins), max(wins)
        speed = f"{low:.1f}×" if high - low < 0.05 else f"{low:.1f}× to {high:.1f}×"
        sentence = f"The default is {d}, and this run supports it: {d} hashed {speed} faster"
        sentence += f" than {o} in memory"
        sentence += " at every size" if not memory_ties else f" at {at(memory_wins)}"
        sentence += ", beyond noise"
        if memory_ties:
            sentence += f" (within noise at {at(memory_ties)} in this run)"
        if write_wins:
            sentence += f", and saving with it was faster beyond noise at {at(write_wins)}"
        sentence += f"; {o} was never faster beyond noise, in memory, from the file or while saving"
    elif contradicted:
        reasons = []
        if memory_losses:
            reasons.append(f"{o} hashed faster in memory at {at(memory_losses)}")
        if file_losses:
            reasons.append(f"{o} hashed faster from the file at {at(file_losses)}")
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
        "sentence": sentence,
    }


def sampler_shape(s: dict[str, Any]) -> str:
    """Whether any k's fastest start took more than the flatness threshold times the smallest
    k's slowest: a growth with k beyond noise, or none."""
    first = s["per_k"][f"k_{s['ks'][0]}"]["runs_s"]["start"]
    times = TARGETS["sampler_flat"][2]
    limit = times * max(first)
    grown = [e["k"] for e in s["per_k"].values() if min(e["runs_s"]["start"]) > limit]
    if not grown:
        return f"at no k was the fastest run more than {times:g}× the smallest k's slowest"
    at = listing([f"{k:,}" for k in grown])
    return f"at k = {at} even the fastest run took more than {times:g}× the smallest k's slowest"


LOAD_NAMES = {
    "load_checkpoint": "load_checkpoint",
    "meta_mmap": "meta + mmap + assign",
    "plain": "the plain load",
}


def peak_reset(paths: dict[str, Any]) -> str:
    """Whether every stored load run could reset its high-water mark, and if not, which paths
    have a run whose mark counts from the process's start."""
    unreset = [LOAD_NAMES.get(how, how) for how, p in paths.items() if not p["peak_reset"]]
    if not unreset:
        return "as every stored run did"
    return (
        f"which at least one run of {listing(unreset)} could not do (such a run's mark counts "
        "from the start of its process)"
    )


def headline(out: dict[str, Any]) -> dict[str, str]:
    """Ready-to-print strings for the page."""
    s, vl, loop, suite, t = (out[k] for k in ("sampler", "verify_load", "loop", "suite", "targets"))
    first, last = (s["per_k"][f"k_{k}"]["median_s"] for k in (s["ks"][0], s["ks"][-1]))
    sizes = list(out["save"].values())
    largest, rate = sizes[-1], list(out["hashing"].values())[-1]["gb_per_s"]
    compared, lab_key = largest["compare"], f"save_{largest['default_hash']}"
    meta, plain, lab = (vl["paths"][h] for h in ("meta_mmap", "plain", "load_checkpoint"))
    lab_vs_plain = outcome(
        vl["compare"]["lab_vs_plain"],
        {"load_checkpoint": "load_checkpoint", "plain": "the plain load"},
        fmt=fmt_bytes,
        verb="peaked lower than",
        separated="its highest run stayed below the other's lowest",
    )
    algorithms = {"save_blake3": "BLAKE3", "save_sha256": "SHA-256"}
    per_update = loop["per_update_s"]
    words = {
        "examples": f"{s['examples']:,}",
        "micro_batch": str(s["micro_batch"]),
        "k_first": f"{s['ks'][0]:,}",
        "k_last": f"{s['ks'][-1]:,}",
        "start_first": fmt_duration(first["start"]),
        "start_last": fmt_duration(last["start"]),
        "replay_last": fmt_duration(last["replay"]),
        "sampler_speedup": fmt_speedup(s["speedup"]),
        "start_vs_replay": outcome(s["compare"]["warm"], sampler_names(""), fmt=fmt_duration),
        "cold_start_vs_replay": outcome(
            s["compare"]["cold"], sampler_names("cold_"), fmt=fmt_duration
        ),
        "sampler_flat": f"{s['flat_ratio']:.2f}×",
        "sampler_shape": sampler_shape(s),
        "cold_speedup": fmt_speedup(s["cold_speedup"]),
        "permutation": fmt_duration(s["permutation_s"]),
        "cold_start_last": fmt_duration(last["cold_start"]),
        "cold_replay_last": fmt_duration(last["cold_replay"]),
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
        "save_vs_floor_largest": outcome(compared["lab_vs_floor"], save_names()),
        "helper_vs_inline_largest": outcome(compared["helper_vs_inline"], save_names()),
        "floor_gbps_largest": gbps(largest["file_bytes"], largest["median_s"]["floor"]),
        "save_gbps_largest": gbps(largest["file_bytes"], largest["median_s"][lab_key]),
        "blake3_memory_gbps_largest": f"{rate['memory_blake3']:.2f} GB/s",
        "sha256_memory_gbps_largest": f"{rate['memory_sha256']:.2f} GB/s",
        "blake3_file_gbps_largest": f"{rate['file_blake3']:.2f} GB/s",
        "sha256_file_gbps_largest": f"{rate['file_sha256']:.2f} GB/s",
        "hash_writing": listing(
            [f"at {x['label']} " + outcome(x["compare"]["algorithms"], algorithms) for x in sizes]
        ),
        "threads_vs_one": outcome(
            list(out["hashing"].values())[-1]["compare"]["threads_vs_one"],
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
        "meta_file": fmt_bytes(max(0, meta["rss_file_extra_bytes"])),
        "meta_anon": fmt_bytes(max(0, meta["rss_anon_extra_bytes"])),
        "plain_peak": fmt_bytes(plain["peak_extra_bytes"]),
        "plain_ratio": f"{plain['peak_ratio']:.2f}×",
        "plain_load": fmt_time(plain["load_s"]),
        "lab_load_peak": fmt_bytes(lab["peak_extra_bytes"]),
        "lab_load_ratio": f"{lab['peak_ratio']:.2f}×",
        "lab_load_ratio_max": f"{lab['peak_ratio_max']:.3f}×",
        "lab_vs_plain": lab_vs_plain,
        "peak_reset": peak_reset(vl["paths"]),
        "save_sync": "with an `os.sync()` before every timed save"
        if out["plan"]["sync_before_save"]
        else "with no `os.sync()` between the timed saves",
        "loop_updates": f"{loop['updates']:,}",
        "trainer_rate": f"{loop['updates_per_s']['trainer']:,.0f}",
        "bare_rate": f"{loop['updates_per_s']['bare']:,.0f}",
        "loop_ratio": f"{loop['ratio']:.3f}",
        "loop_ratio_with_saves": f"{loop['ratio_with_saves']:.3f}",
        "loop_cpu_ratio": f"{loop['cpu_ratio']:.3f}",
        "loop_save_each": fmt_duration(loop["save_s"]),
        "trainer_rate_with_saves": f"{loop['updates_per_s']['trainer_with_saves']:,.0f}",
        "loop_overhead_per_update": fmt_duration(per_update["trainer"] - per_update["bare"]),
        "loop_saves": f"{loop['saves_per_run']:g}",
        "loop_save_folder": "under /dev/shm"
        if loop["checkpoint_in_ram"]
        else "in the temporary folder",
        "targets_met": str(sum(x["met"] is True for x in t.values())),
        "targets_judged": str(sum(x["met"] is not None for x in t.values())),
        "targets_not_met": str(sum(x["met"] is False for x in t.values())),
        "targets_noisy": str(sum(x["verdict"] == TOO_NOISY for x in t.values())),
    }
    return words | suite_words(suite)


def suite_words(suite: dict[str, Any]) -> dict[str, str]:
    """The suite's figures; "not measured" for each while the suite is pending, so that the
    site builds mid-run too."""
    keys = (
        *("make_test", "make_test_pytest", "make_test_summary", "contract", "contract_pytest"),
        *("suite_date", "suite_load_average", "make_test_slowest", "make_test_slowest_s"),
        *("make_test_without_slowest", "make_test_workers", "make_test_summed"),
    )
    if not suite["measured"]:
        return dict.fromkeys(keys, "not measured")
    make, contract = suite["make_test"], suite["contract"]
    folders, workers = make["by_folder_s"], make.get("workers", 1)
    slowest = next(iter(folders), None)
    summed = sum(folders.values())
    missing = "not measured"
    return {
        "make_test": f"{make['wall_s']:.1f} s",
        "make_test_pytest": f"{make['pytest_s']:.1f} s",
        "make_test_summary": pytest_summary(make["counts"]),
        "contract": f"{contract['wall_s']:.2f} s",
        "contract_pytest": f"{contract['pytest_s']:.2f} s",
        "suite_date": provenance.date(suite["finished"]),
        "suite_load_average": f"{suite['load_average_end'][0]:.1f}",
        "make_test_workers": f"on {workers} pytest-xdist workers"
        if workers > 1
        else "in one process",
        # the tests' own times added up (over every worker), not the wall time
        "make_test_summed": f"{summed:.1f} s" if folders else missing,
        "make_test_slowest": slowest or missing,
        "make_test_slowest_s": f"{folders[slowest]:.1f} s" if slowest else missing,
        "make_test_without_slowest": f"{summed - folders[slowest]:.1f} s" if slowest else missing,
    }


def sampler_names(prefix: str) -> dict[str, str]:
    cold = "cold " if prefix else ""
    return {f"{prefix}start": f"the {cold}start", f"{prefix}replay": f"the {cold}replay"}


def save_names() -> dict[str, str]:
    return {
        "floor": "the floor",
        "inline": "save_checkpoint with no helper threads",
        **{f"save_{a}": f"save_checkpoint with {n}" for a, n in HASH_NAMES.items()},
    }
