"""The view of distributed.json: the performance page's distributed section, its derived
figures, two tables and the sentences that compare.

Every comparison uses timing.compare on the stored runs (seconds; for training, seconds per
counted update): a winner only when the faster one's slowest run beat the other's fastest, else
"within noise". Nothing here is stored; the build calls `view` whenever a page is built.
"""

from __future__ import annotations

import copy
import itertools
import statistics
from typing import Any

from .. import provenance
from ..timing import compare, decimal_size, fmt_time, outcome, spread

SAVE_NAMES = {
    "floor": "torch.save + fsync in one process",
    "save_checkpoint": "save_checkpoint in one process",
    "dcp_save": "dcp.save over {w} ranks",
    "dcp_async_stall": "the stall of dcp.async_save",
    "dcp_async_done": "dcp.async_save until written",
}


def view(results: dict[str, Any]) -> dict[str, Any]:
    """The stored numbers plus what the page says about them."""
    out = copy.deepcopy(results)
    derive_save(out["save"])
    derive_train(out["train"])
    word(out)
    out["headline"] = headline(out)
    out["save_table_md"] = save_table_md(out["save"])
    out["train_table_md"] = train_table_md(out["train"])
    out["provenance"] = provenance.worded(results["provenance"])
    out["provenance"]["summary"] += "; " + out["headline"]["setup"]
    return out


def fmt_ratio(ratio: float) -> str:
    return f"{ratio:.2f}×" if ratio < 10 else f"{ratio:.0f}×"


def listing(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def percent(fraction: float) -> str:
    return f"{fraction * 100:.0f} %"


def with_spread(median: float, runs: list[float]) -> str:
    """A median and how far its runs spread: 13.4 ms (± 24 %)."""
    return f"{fmt_time(median)} ({percent(spread(runs))})"


def derive_save(save: dict[str, Any]) -> None:
    for size in save["sizes"].values():
        runs, m = size["runs_s"], size["median_s"]
        size["label"] = decimal_size(size["state_bytes"])
        size["spread"] = {name: spread(r) for name, r in runs.items()}
        size["ratios"] = {name: m[name] / m["floor"] for name in m if name != "floor"}
        size["stall_share"] = m["dcp_async_stall"] / m["dcp_save"]
        size["compare"] = {
            "dcp_vs_floor": compare(runs, "dcp_save", "floor"),
            "stall_vs_dcp": compare(runs, "dcp_async_stall", "dcp_save"),
            "async_done_vs_dcp": compare(runs, "dcp_async_done", "dcp_save"),
            "stall_vs_floor": compare(runs, "dcp_async_stall", "floor"),
            "lab_vs_floor": compare(runs, "save_checkpoint", "floor"),
        }


def derive_train(train: dict[str, Any]) -> None:
    worlds = train["worlds"]
    per_update: dict[str, list[float]] = {}
    for key, w in worlds.items():
        runs = w["runs"]
        per_update[key] = [r["loop_s"] / r["counted_updates"] for r in runs]
        rates = [r["counted_updates"] / r["loop_s"] for r in runs]
        w["updates_per_s"] = rates
        w["rate"] = statistics.median(rates)
        w["rate_range"] = [min(rates), max(rates)]
        w["rate_spread"] = spread(rates)
        w["step_time_rate"] = statistics.median(
            r["counted_updates"] / r["step_time_sum_s"] for r in runs
        )
        w["outside_update_s"] = statistics.median(
            (r["loop_s"] - r["step_time_sum_s"]) / r["counted_updates"] for r in runs
        )
        evals = [r["eval_update_s"] for r in runs if r["eval_update_s"] is not None]
        w["eval_update_s"] = statistics.median(evals) if evals else None
        w["oversubscribed"] = w["processes_per_core"] > 1
    first = next(iter(worlds))
    train["baseline"] = first
    for key, w in worlds.items():
        w["speedup"] = w["rate"] / worlds[first]["rate"]
        w["vs_baseline"] = None if key == first else compare(per_update, key, first)
    train["compare"] = {
        f"{b}_vs_{a}": compare(per_update, b, a) for a, b in itertools.pairwise(worlds)
    }


def rate_span(values: list[float]) -> str:
    low, high = f"{values[0]:,.0f}", f"{values[1]:,.0f}"
    return f"{low} updates/s" if low == high else f"{low} to {high} updates/s"


def world_name(w: dict[str, Any]) -> str:
    return f"W = {w['world_size']}"


def rate_outcome(c: dict[str, Any], worlds: dict[str, Any]) -> str:
    """timing.compare on seconds per update, worded in updates per second."""
    a, b = worlds[c["a"]], worlds[c["b"]]
    if c["winner"]:
        win, lose = worlds[c["winner"]], worlds[c["loser"]]
        return (
            f"{world_name(win)} trained faster than {world_name(lose)} "
            f"({rate_span(win['rate_range'])} against {rate_span(lose['rate_range'])}: "
            "the slowest run beat the fastest)"
        )
    return (
        f"{world_name(a)} and {world_name(b)} were within noise of each other "
        f"({rate_span(a['rate_range'])} against {rate_span(b['rate_range'])}: the runs overlap)"
    )


def short(c: dict[str, Any] | None) -> str:
    if c is None:
        return "—"
    if not c["winner"]:
        return "within noise"
    return "faster" if c["winner"] == c["a"] else "slower"


def save_table_md(save: dict[str, Any]) -> str:
    w = save["world_size"]
    lines = [
        "| state | torch.save + fsync, 1 process | save_checkpoint, 1 process "
        f"| dcp.save, {w} ranks | ÷ floor | dcp.async_save: stall | until written | ÷ floor "
        "| stall ÷ dcp.save |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for size in save["sizes"].values():
        m, r, ratio = size["median_s"], size["runs_s"], size["ratios"]
        lines.append(
            f"| {size['label']} | {with_spread(m['floor'], r['floor'])} "
            f"| {with_spread(m['save_checkpoint'], r['save_checkpoint'])} "
            f"| {with_spread(m['dcp_save'], r['dcp_save'])} | {fmt_ratio(ratio['dcp_save'])} "
            f"| {with_spread(m['dcp_async_stall'], r['dcp_async_stall'])} "
            f"| {with_spread(m['dcp_async_done'], r['dcp_async_done'])} "
            f"| {fmt_ratio(ratio['dcp_async_done'])} | {percent(size['stall_share'])} |"
        )
    return "\n".join(lines)


def train_table_md(train: dict[str, Any]) -> str:
    cores = train["cores"]
    lines = [
        f"| processes | ÷ {cores} cores | updates/s: median (spread) | slowest to fastest run "
        "| ÷ W = 1 | against W = 1 | the update alone (step_time) | besides the update "
        "| an evaluating update (and its best checkpoint, if any) |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for w in train["worlds"].values():
        load = f"{w['processes_per_core']:.1f}"
        load += " (oversubscribed)" if w["oversubscribed"] else ""
        evaluating = "—" if w["eval_update_s"] is None else fmt_time(w["eval_update_s"])
        lines.append(
            f"| {world_name(w)} | {load} | {w['rate']:,.0f} ({percent(w['rate_spread'])}) "
            f"| {w['rate_range'][0]:,.0f} to {w['rate_range'][1]:,.0f} "
            f"| {fmt_ratio(w['speedup'])} | {short(w['vs_baseline'])} "
            f"| {w['step_time_rate']:,.0f} updates/s | {fmt_time(w['outside_update_s'])} "
            f"| {evaluating} |"
        )
    return "\n".join(lines)


WORDED = ("dcp_vs_floor", "stall_vs_dcp", "async_done_vs_dcp")  # the comparisons the page words


def word(out: dict[str, Any]) -> None:
    """Each comparison as a sentence, beside its numbers: per size, and per world size."""
    save, worlds = out["save"], out["train"]["worlds"]
    names = {k: v.format(w=save["world_size"]) for k, v in SAVE_NAMES.items()}
    for size in save["sizes"].values():
        size["sentences"] = {
            key: f"at {size['label']} " + outcome(size["compare"][key], names) for key in WORDED
        }
    for w in worlds.values():
        w["sentence"] = w["vs_baseline"] and rate_outcome(w["vs_baseline"], worlds)


def headline(out: dict[str, Any]) -> dict[str, str]:
    save, train = out["save"], out["train"]
    w = save["world_size"]
    sizes = list(save["sizes"].values())
    largest = sizes[-1]
    worlds = train["worlds"]
    over = [v for v in worlds.values() if v["oversubscribed"]]
    by_world = [v["sentence"] for v in worlds.values() if v["sentence"]]
    return {
        "save_world": str(w),
        "save_sync": "with an `os.sync()` before each"
        if save["sync_before_save"]
        else "with no `os.sync()` between them",
        "save_sizes": listing([s["label"] for s in sizes]),
        "save_repeats": str(save["repeats"]),
        "save_largest": largest["label"],
        **{key: listing([s["sentences"][key] for s in sizes]) for key in WORDED},
        "dcp_ratios": listing(
            [f"{fmt_ratio(s['ratios']['dcp_save'])} the floor at {s['label']}" for s in sizes]
        ),
        "stall_largest": fmt_time(largest["median_s"]["dcp_async_stall"]),
        "dcp_largest": fmt_time(largest["median_s"]["dcp_save"]),
        "async_done_largest": fmt_time(largest["median_s"]["dcp_async_done"]),
        "floor_largest": fmt_time(largest["median_s"]["floor"]),
        "stall_share_largest": percent(largest["stall_share"]),
        "dcp_bytes_largest": f"{largest['dcp_bytes']:,}",
        "file_bytes_largest": f"{largest['file_bytes']:,}",
        "dcp_files": str(largest["dcp_files"]),
        "shards": str(train["shards"]),
        "steps": str(train["steps"]),
        "save_every": str(train["save_every"]),
        "warmup_updates": str(train["warmup_updates"]),
        "eval_every": str(train["eval_every"]),
        "counted_updates": str(next(iter(worlds.values()))["runs"][0]["counted_updates"]),
        "runs_per_world": str(train["runs_per_world"]),
        "cores": str(train["cores"]),
        "worlds": listing([str(v["world_size"]) for v in worlds.values()]),
        "rates": listing(
            [f"{v['rate']:,.0f} updates/s at {world_name(v)}" for v in worlds.values()]
        ),
        "by_world": listing(by_world) if by_world else "one world size only",
        "outside_update": listing(
            [f"{fmt_time(v['outside_update_s'])} at {world_name(v)}" for v in worlds.values()]
        ),
        "oversubscribed": (
            listing([f"{world_name(v)} runs {v['world_size']} processes" for v in over])
            + f" on {train['cores']} cores: more processes than cores, which take turns on "
            "them, so that row measures the lab squeezed onto this machine, not what a core "
            "per process would do"
            if over
            else f"No world size ran more processes than the {train['cores']} cores"
        ),
        "setup": (
            f"medians of {plural(save['repeats'], 'run')} per save; "
            f"{plural(train['runs_per_world'], 'run')} of {train['steps']} updates per world "
            "size, after one untimed run"
        ),
    }
