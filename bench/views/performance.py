"""The view of performance.json: what the performance page says, from the stored numbers.

`view(results)` is the stored results with the derived figures added (ratios, rates, spreads and
comparisons), the targets judged, and the page's tables and sentences (`headline`). Every
sentence that compares two measurements is built by timing.outcome from timing.compare: it names
a winner only when the runs separate; a target is judged by timing.judge, only when its floor is
steadier than its margin. The hash sentence says the numbers support the default only when they
do. Nothing here is stored: rewording a sentence or changing a rule needs no new measurement.
"""

from __future__ import annotations

import copy
from typing import Any

from .. import provenance
from ..timing import TOO_NOISY, compare, fmt_duration, fmt_time, judge, outcome, spread

GB = 10**9
HASH_NAMES = {"blake3": "BLAKE3", "sha256": "SHA-256"}
LOAD_LABELS = {
    "load_checkpoint": "the lab's load_checkpoint(): verify from the open file, then torch.load "
    "from it",
    "meta_mmap": "verify(); meta-device model; torch.load(mmap=True); load_state_dict(assign=True)",
    "plain": "model built on CPU; verify(); torch.load(); load_state_dict()",
}
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


def view(results: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(results)
    derive(out)
    out["provenance"] = provenance.worded(results["provenance"], method(results["plan"]))
    out["targets"] = targets(out)
    out["hash_choice"] = hash_choice(out["save"], out["hashing"])
    out["headline"] = headline(out)
    out["table_md"] = table_md(out)
    out["sampler_table_md"] = sampler_table_md(out["sampler"])
    out["save_table_md"] = save_table_md(out["save"])
    out["hash_table_md"] = hash_table_md(out["save"], out["hashing"])
    out["load_table_md"] = load_table_md(out["verify_load"])
    return out


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
        m = entry["median_s"]
        entry["speedup"] = m["replay"] / m["start"]
        entry["cold_speedup"] = m["cold_replay"] / m["cold_start"]
    first, last = s["per_k"][f"k_{s['ks'][0]}"], s["per_k"][f"k_{s['ks'][-1]}"]
    s["flat_ratio"] = last["median_s"]["start"] / first["median_s"]["start"]
    s["speedup"], s["cold_speedup"] = last["speedup"], last["cold_speedup"]


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


# --- the targets --------------------------------------------------------------------------


def target(key: str, measured: float | None, floor_runs: list[float] | None = None) -> dict:
    """Target `key` judged (timing.judge); a ratio target against the runs of its floor."""
    what, op, threshold = TARGETS[key]
    met, verdict = judge(measured, op, threshold, floor_runs)
    sign = {"le": "≤", "ge": "≥", "lt": "<"}[op]
    out = {"what": what, "target": f"{sign} {threshold:g}", "threshold": threshold}
    out |= {"measured": measured, "met": met, "verdict": verdict}
    if floor_runs is not None:
        out |= {"floor_spread": spread(floor_runs), "margin": abs(threshold - 1)}
    return out


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


def size_verdict(size: dict[str, Any]) -> tuple[bool | None, str]:
    """The save target applied to one size (the target itself is judged at the largest)."""
    _, op, threshold = TARGETS["save_overhead"]
    return judge(size["ratio"], op, threshold, size["runs_s"]["floor"])


def mark(met: bool | None, verdict: str) -> str:
    return verdict if met is None else ("met" if met else "**missed**")


# --- sentences ----------------------------------------------------------------------------


def hash_choice(save: dict[str, Any], hashing: dict[str, Any]) -> dict[str, Any]:
    """Whether this run's numbers support the default hash, and the sentence that says why.

    Supported: the default hashed faster in memory beyond noise at one size or more, and the
    other was never faster beyond noise, in memory or while saving. Contradicted: the other was
    faster beyond noise somewhere. Anything else is inconclusive, and the sentence says so."""
    default = next(iter(save.values()))["default_hash"]
    other = next(a for a in HASH_NAMES if a != default)
    d, o = HASH_NAMES[default], HASH_NAMES[other]
    memory = {k: h["compare"]["memory"]["winner"] for k, h in hashing.items()}
    writing = {k: s["compare"]["default_vs_other"]["winner"] for k, s in save.items()}
    memory_wins = [k for k, w in memory.items() if w == f"memory_{default}"]
    memory_ties = [k for k, w in memory.items() if w is None]
    memory_losses = [k for k, w in memory.items() if w == f"memory_{other}"]
    write_wins = [k for k, w in writing.items() if w == f"save_{default}"]
    write_losses = [k for k, w in writing.items() if w == f"save_{other}"]
    contradicted = bool(memory_losses or write_losses)
    supported = bool(memory_wins) and not contradicted
    wins = [hashing[k]["compare"]["memory"]["factor"] for k in memory_wins]

    def at(keys: list[str]) -> str:
        return listing([save[k]["label"] for k in keys])

    if supported:
        low, high = min(wins), max(wins)
        speed = f"{low:.1f}×" if high - low < 0.05 else f"{low:.1f}× to {high:.1f}×"
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
        "sampler_flat": f"{s['flat_ratio']:.2f}×",
        "sampler_shape": sampler_shape(s),
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
        "save_vs_floor_largest": outcome(compared["lab_vs_floor"], save_names(largest)),
        "helper_vs_inline_largest": outcome(compared["helper_vs_inline"], save_names(largest)),
        "floor_gbps_largest": gbps(largest["file_bytes"], largest["median_s"]["floor"]),
        "save_gbps_largest": gbps(largest["file_bytes"], largest["median_s"][lab_key]),
        "default_hash": HASH_NAMES[largest["default_hash"]],
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
        "plain_peak": fmt_bytes(plain["peak_extra_bytes"]),
        "plain_ratio": f"{plain['peak_ratio']:.2f}×",
        "plain_load": fmt_time(plain["load_s"]),
        "lab_load_peak": fmt_bytes(lab["peak_extra_bytes"]),
        "lab_load_ratio": f"{lab['peak_ratio']:.2f}×",
        "lab_load_ratio_max": f"{lab['peak_ratio_max']:.3f}×",
        "lab_vs_plain": lab_vs_plain,
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
        "targets_met": str(sum(x["met"] is True for x in t.values())),
        "targets_judged": str(sum(x["met"] is not None for x in t.values())),
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


# --- tables -------------------------------------------------------------------------------


def table_md(out: dict[str, Any]) -> str:
    """The summary: per point, the lab, its baseline, the measured ratio and the target."""
    s, vl, loop, suite, t = (out[k] for k in ("sampler", "verify_load", "loop", "suite", "targets"))
    k = s["ks"][-1]
    first, last = (s["per_k"][f"k_{k}"]["median_s"] for k in (s["ks"][0], k))
    lines = [
        "| point | the lab | baseline | measured | target | verdict |",
        "| --- | --- | --- | ---: | ---: | --- |",
    ]

    def row(point: str, lab: str, base: str, measured: str, key: str | None, verdict=None) -> None:
        """`verdict` overrides the target's own (a per-size row of a largest-size target)."""
        goal, shown = "", "for context"
        if key is not None:
            goal, shown = t[key]["target"], mark(*(verdict or (t[key]["met"], t[key]["verdict"])))
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
        f"{fmt_duration(first['start'])} → {fmt_duration(last['start'])}",
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
    sizes = list(out["save"].values())
    for size in sizes:
        m, lab_key = size["median_s"], f"save_{size['default_hash']}"
        row(
            f"save {size['label']}",
            f"save_checkpoint: {fmt_time(m[lab_key])}",
            f"torch.save + fsync: {fmt_time(m['floor'])}",
            f"{size['ratio']:.2f}×",
            "save_overhead",
            None if size is sizes[-1] else size_verdict(size),
        )
    gbps = f"{vl['verify']['gb_per_s']:.2f} GB/s"
    hashed = HASH_NAMES.get(vl["hash"], vl["hash"])
    row(
        f"verify {fmt_bytes(vl['file_bytes'])}",
        f"verify(), {hashed}: {gbps}",
        "",
        gbps,
        "verify_throughput",
    )
    lab, plain = vl["paths"]["load_checkpoint"], vl["paths"]["plain"]
    row(
        f"load {fmt_bytes(vl['model_bytes'])} state, peak extra memory",
        f"load_checkpoint: {fmt_bytes(lab['peak_extra_bytes'])} ({lab['peak_ratio']:.2f}×)",
        f"plain load into a model: {fmt_bytes(plain['peak_extra_bytes'])} "
        f"({plain['peak_ratio']:.2f}×)",
        f"{lab['peak_ratio_max']:.2f}×",
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
    if not suite["measured"]:
        row("`make test`", "not measured", "", "", "suite_make_test")
        row("contract tests alone", "not measured", "", "", "suite_contract")
        return "\n".join(lines)
    make, contract = suite["make_test"], suite["contract"]
    row(
        "`make test`",
        f"lint, then {pytest_summary(make['counts'])}",
        f"pytest's own clock: {make['pytest_s']:.1f} s",
        f"{make['wall_s']:.1f} s",
        "suite_make_test",
    )
    row(
        "contract tests alone",
        pytest_summary(contract["counts"]),
        f"pytest's own clock: {contract['pytest_s']:.2f} s",
        f"{contract['wall_s']:.2f} s",
        "suite_contract",
    )
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
        helper = size["compare"]["helper_vs_inline"]["winner"]
        helper_text = {None: "within noise", lab: "helper faster"}.get(helper, "in line faster")
        lines.append(
            f"| {size['label']} | {fmt_time(m['floor'])} | {size['floor_spread'] * 100:.0f} % "
            f"| {fmt_time(m[lab])} | {size['ratio']:.2f}× | {mark(*size_verdict(size))} "
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
    faster = {
        f"{where}_{a}": f"{n} faster" for where in ("save", "memory") for a, n in HASH_NAMES.items()
    }
    for key, size in save.items():
        h, m = hashing[key], size["median_s"]
        rate = h["gb_per_s"]
        writing = faster.get(size["compare"]["algorithms"]["winner"], "within noise")
        memory = faster.get(h["compare"]["memory"]["winner"], "within noise")
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
    for how, p in vl["paths"].items():
        lines.append(
            f"| {LOAD_LABELS[how]} | {fmt_time(p['load_s'])} "
            f"| {fmt_bytes(p['peak_extra_bytes'])} | "
            f"{p['peak_ratio']:.2f}× | {p['peak_ratio_max']:.2f}× "
            f"| {fmt_bytes(max(0, p['rss_anon_extra_bytes']))} "
            f"| {fmt_bytes(max(0, p['rss_file_extra_bytes']))} |"
        )
    return "\n".join(lines)


# --- how a number reads on this page ------------------------------------------------------


def gbps(size: float, seconds: float) -> str:
    return f"{size / seconds / GB:.2f} GB/s"


def fmt_speedup(ratio: float) -> str:
    return f"{ratio:,.0f}×" if ratio >= 10 else f"{ratio:.2f}×"


def fmt_bytes(n: float) -> str:
    """Decimal units, two decimals: 1.07 GB."""
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def decimal_size(n: float) -> str:
    """10 MB, 100 MB, 1 GB: the save sizes, named as the page names them."""
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.2f} {unit}"
    return f"{n:.0f} B"


def listing(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def pytest_summary(counts: dict[str, int]) -> str:
    """pytest's own words: "531 passed, 3 deselected"."""
    return ", ".join(f"{n} {what}" for what, n in counts.items()) or "no tests ran"
