"""From the performance measurements to what the page states: targets, verdicts, headline strings
and tables. Everything here is recomputed from the stored runs (`performance.py --report-only`
re-renders without measuring), and every comparison follows verdicts.py: a winner only when the
runs separate, a target judged only when its floor is steadier than its margin."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import fmt_time
from verdicts import TOO_NOISY, compare, judge, spread

GB = 10**9
HASH_NAMES = {"blake3": "BLAKE3", "sha256": "SHA-256"}

# (what is compared, comparison, threshold). "le": measured <= threshold.
TARGETS = {
    "sampler_flat": ("start at the largest k ÷ start at the smallest k (order drawn)", "le", 2.0),
    "sampler_speedup": ("replay of k batches ÷ start at k, largest k (order drawn)", "ge", 1000.0),
    "save_overhead": ("save_checkpoint ÷ (torch.save + one fsync), largest size", "le", 1.2),
    "verify_throughput": ("verify() of the load checkpoint, default hash, GB/s", "ge", 1.0),
    "load_peak": (
        "load_checkpoint: peak extra resident memory ÷ state bytes, worst run",
        "le",
        1.1,
    ),
    "loop_throughput": ("Trainer + callbacks updates/s ÷ bare loop updates/s", "ge", 0.95),
    "suite_make_test": ("`make test` wall time, s", "lt", 60.0),
    "suite_contract": ("the lab's contract tests alone, wall time, s", "lt", 5.0),
}

NOTES = {
    "page_cache": (
        "Saves are timed to durable (fsync) completion, after an os.sync() so that no variant "
        "pays for another's flush; hashing from a file reads one that was just written, so its "
        "throughput is hashing from the page cache, not the disk's read speed."
    ),
    "noise": (
        "A beats B only when A's slowest run beats B's fastest; otherwise they are within noise. "
        "A ratio target is judged only when its floor's runs spread ((slowest - fastest) / "
        "median) by less than the target's margin; otherwise it is too noisy to judge."
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
        "callback writes to a RAM-backed folder when there is one, so its saves cost "
        "their serialization, not the disk."
    ),
}


# --- formatting -------------------------------------------------------------------------------


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


def fmt_span(values: list[float], fmt: Callable[[float], str]) -> str:
    low, high = fmt(values[0]), fmt(values[1])
    return low if low == high else f"{low} to {high}"


def outcome(
    c: dict[str, Any],
    names: dict[str, str],
    fmt: Callable[[float], str] = fmt_time,
    verb: str = "was faster than",
    separated: str = "the slowest run beat the fastest",
) -> str:
    """A sentence about one comparison: the winner only if its slowest run beat the other's
    fastest, else "within noise"; the runs' ranges either way."""
    ranges = {c["a"]: c["a_range"], c["b"]: c["b_range"]}
    if c["winner"]:
        w, lo = c["winner"], c["loser"]
        return (
            f"{names[w]} {verb} {names[lo]} ({fmt_span(ranges[w], fmt)} against "
            f"{fmt_span(ranges[lo], fmt)}: {separated})"
        )
    return (
        f"{names[c['a']]} and {names[c['b']]} were within noise of each other "
        f"({fmt_span(ranges[c['a']], fmt)} against {fmt_span(ranges[c['b']], fmt)}: "
        "the runs overlap)"
    )


def short_outcome(c: dict[str, Any], names: dict[str, str]) -> str:
    return f"{names[c['winner']]} faster" if c["winner"] else "within noise"


def listing(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


# --- targets ----------------------------------------------------------------------------------


def target(
    key: str, measured: float | None, detail: str = "", floor_runs: list[float] | None = None
) -> dict[str, Any]:
    what, op, threshold = TARGETS[key]
    met, verdict = judge(measured, op, threshold, floor_runs)
    sign = {"le": "≤", "ge": "≥", "lt": "<"}[op]
    out = {
        "what": what,
        "target": f"{sign} {threshold:g}",
        "threshold": threshold,
        "measured": measured,
        "met": met,
        "verdict": verdict,
        "detail": detail,
    }
    if floor_runs is not None:
        out |= {"floor_spread": spread(floor_runs), "margin": abs(threshold - 1)}
    return out


def evaluate_targets(results: dict[str, Any]) -> dict[str, Any]:
    sampler, save, load = results["sampler"], results["save"], results["verify_load"]
    loop, suite = results["loop"], results["suite"]
    largest = list(save.values())[-1]
    first = sampler["per_k"][f"k_{sampler['ks'][0]}"]
    lab = load["paths"]["load_checkpoint"]
    targets = {
        "sampler_flat": target(
            "sampler_flat",
            sampler["flat_ratio"],
            f"cold (permutation drawn first): {sampler['cold_flat_ratio']:.2f}",
            floor_runs=first["runs_s"]["start"],
        ),
        "sampler_speedup": target(
            "sampler_speedup",
            sampler["speedup"],
            f"cold: {sampler['cold_speedup']:.1f}× (both draw the epoch's permutation, "
            f"{fmt_duration(sampler['permutation_s'])})",
        ),
        "save_overhead": target(
            "save_overhead",
            largest["ratio"],
            "; ".join(f"{s['label']}: {s['ratio']:.2f}" for s in save.values()),
            floor_runs=largest["runs_s"]["floor"],
        ),
        "verify_throughput": target(
            "verify_throughput",
            load["verify"]["gb_per_s"],
            f"{HASH_NAMES.get(load['hash'], load['hash'])}, from the page cache",
        ),
        "load_peak": target(
            "load_peak",
            lab["peak_ratio_max"],
            f"median {lab['peak_ratio']:.3f}; "
            f"plain load: {load['paths']['plain']['peak_ratio']:.2f}",
        ),
        "loop_throughput": target(
            "loop_throughput", loop["ratio"], floor_runs=loop["runs_s"]["bare"]
        ),
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


def size_verdict(size: dict[str, Any]) -> tuple[bool | None, str]:
    """The save target applied to one size (the target itself is judged at the largest)."""
    _, op, threshold = TARGETS["save_overhead"]
    return judge(size["ratio"], op, threshold, size["runs_s"]["floor"])


def mark(met: bool | None, verdict: str) -> str:
    if met is None:
        return verdict
    return "met" if met else "**missed**"


# --- tables -----------------------------------------------------------------------------------


def table_md(results: dict[str, Any]) -> str:
    """The summary: per point, the lab, its baseline, the measured ratio and the target."""
    s, save, vl = results["sampler"], results["save"], results["verify_load"]
    loop, suite, t = results["loop"], results["suite"], results["targets"]
    k, first_key = s["ks"][-1], f"k_{s['ks'][0]}"
    last = s["per_k"][f"k_{k}"]["median_s"]
    lines = [
        "| point | the lab | baseline | measured | target | verdict |",
        "| --- | --- | --- | ---: | ---: | --- |",
    ]

    def row(
        point: str,
        lab: str,
        base: str,
        measured: str,
        key: str | None,
        verdict: tuple[bool | None, str] | None = None,
    ) -> None:
        """`verdict` overrides the target's own (a per-size row of a largest-size target)."""
        if key is None:
            goal, shown = "", "for context"
        else:
            met, text = verdict or (t[key]["met"], t[key]["verdict"])
            goal, shown = t[key]["target"], mark(met, text)
        lines.append(f"| {point} | {lab} | {base} | {measured} | {goal} | {shown} |")

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
    sizes = list(save.values())
    for size in sizes:
        m = size["median_s"]
        lab = f"save_{size['default_hash']}"
        is_target = size is sizes[-1]
        row(
            f"save {size['label']}",
            f"save_checkpoint: {fmt_time(m[lab])}",
            f"torch.save + fsync: {fmt_time(m['floor'])}",
            f"{size['ratio']:.2f}×",
            "save_overhead",
            verdict=None if is_target else size_verdict(size),
        )
    row(
        f"verify {fmt_bytes(vl['file_bytes'])}",
        f"verify(), {HASH_NAMES.get(vl['hash'], vl['hash'])}: {vl['verify']['gb_per_s']:.2f} GB/s",
        "",
        f"{vl['verify']['gb_per_s']:.2f} GB/s",
        "verify_throughput",
    )
    lab_path, plain = vl["paths"]["load_checkpoint"], vl["paths"]["plain"]
    row(
        f"load {fmt_bytes(vl['model_bytes'])} state, peak extra memory",
        f"load_checkpoint: {fmt_bytes(lab_path['peak_extra_bytes'])} "
        f"({lab_path['peak_ratio']:.2f}×)",
        f"plain load into a model: {fmt_bytes(plain['peak_extra_bytes'])} "
        f"({plain['peak_ratio']:.2f}×)",
        f"{lab_path['peak_ratio_max']:.2f}×",
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
        f"… counting its {loop['saves_per_run']:g} checkpoint writes",
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


def save_names(size: dict[str, Any]) -> dict[str, str]:
    default = HASH_NAMES[size["default_hash"]]
    return {
        "floor": "the floor",
        "inline": f"{default} in line",
        **{f"save_{a}": f"save_checkpoint with {n}" for a, n in HASH_NAMES.items()},
    }


def save_table_md(save: dict[str, Any]) -> str:
    default = HASH_NAMES[next(iter(save.values()))["default_hash"]]
    lines = [
        f"| state | torch.save + fsync (floor) | floor's spread | save_checkpoint ({default}) "
        f"| ÷ floor | ≤ {TARGETS['save_overhead'][2]:g}× | the same, hashed in line | ÷ floor "
        "| helper thread vs in line |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |",
    ]
    for size in save.values():
        m, lab = size["median_s"], f"save_{size['default_hash']}"
        met, verdict = size_verdict(size)
        helper = size["compare"]["helper_vs_inline"]
        helper_text = (
            "within noise"
            if not helper["winner"]
            else ("helper faster" if helper["winner"] == lab else "in line faster")
        )
        lines.append(
            f"| {size['label']} | {fmt_time(m['floor'])} | {size['floor_spread'] * 100:.0f} % "
            f"| {fmt_time(m[lab])} | {size['ratio']:.2f}× | {mark(met, verdict)} "
            f"| {fmt_time(m['inline'])} | {size['ratios']['inline']:.2f}× | {helper_text} |"
        )
    return "\n".join(lines)


def hash_table_md(save: dict[str, Any], hashing: dict[str, Any]) -> str:
    lines = [
        "| state | saving with BLAKE3 | saving with SHA-256 | while writing "
        "| BLAKE3 in memory | SHA-256 in memory | in memory | BLAKE3, own threads "
        "| BLAKE3 from the file | SHA-256 from the file |",
        "| --- | ---: | ---: | --- | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for key, size in save.items():
        h, m = hashing[key], size["median_s"]
        rate = h["gb_per_s"]
        writing = short_outcome(
            size["compare"]["algorithms"], {"save_blake3": "BLAKE3", "save_sha256": "SHA-256"}
        )
        memory = short_outcome(
            h["compare"]["memory"], {"memory_blake3": "BLAKE3", "memory_sha256": "SHA-256"}
        )
        lines.append(
            f"| {size['label']} | {fmt_time(m['save_blake3'])} | {fmt_time(m['save_sha256'])} "
            f"| {writing} | {rate['memory_blake3']:.2f} GB/s | {rate['memory_sha256']:.2f} GB/s "
            f"| {memory} | {rate['memory_blake3_threads']:.2f} GB/s "
            f"| {rate['file_blake3']:.2f} GB/s | {rate['file_sha256']:.2f} GB/s |"
        )
    return "\n".join(lines)


def load_table_md(vl: dict[str, Any]) -> str:
    lines = [
        "| path | time | peak extra memory | ÷ state bytes | worst run | anonymous | file-backed |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in vl["paths"].values():
        lines.append(
            f"| {p['label']} | {fmt_time(p['load_s'])} | {fmt_bytes(p['peak_extra_bytes'])} | "
            f"{p['peak_ratio']:.2f}× | {p['peak_ratio_max']:.2f}× "
            f"| {fmt_bytes(max(0, p['rss_anon_extra_bytes']))} "
            f"| {fmt_bytes(max(0, p['rss_file_extra_bytes']))} |"
        )
    return "\n".join(lines)


# --- what the page says about hashes ----------------------------------------------------------


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
        "hash_choice": results["hash_choice"]["sentence"],
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
            compare(
                {
                    "threads": largest_hash["runs_s"]["memory_blake3_threads"],
                    "one": largest_hash["runs_s"]["memory_blake3"],
                },
                "threads",
                "one",
            ),
            {"threads": "BLAKE3 with its own threads", "one": "BLAKE3 on one thread"},
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


def finalize(results: dict[str, Any]) -> dict[str, Any]:
    """Targets, verdicts, headline strings and tables, from the measurements."""
    results["targets"] = evaluate_targets(results)
    results["all_met"] = all(t["met"] for t in results["targets"].values() if t["met"] is not None)
    results["hash_choice"] = hash_choice(results["save"], results["hashing"])
    results["headline"] = headline(results)
    results["table_md"] = table_md(results)
    results["sampler_table_md"] = sampler_table_md(results["sampler"])
    results["save_table_md"] = save_table_md(results["save"])
    results["hash_table_md"] = hash_table_md(results["save"], results["hashing"])
    results["load_table_md"] = load_table_md(results["verify_load"])
    return results
