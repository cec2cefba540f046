"""The performance page's tables, as Markdown, from the derived results (metrics.py)."""

from __future__ import annotations

from typing import Any

from .fmt import fmt_bytes, fmt_duration, fmt_speedup, fmt_time, pytest_summary, short_outcome
from .targets import HASH_NAMES, TARGETS, mark, size_verdict

LOAD_LABELS = {
    "load_checkpoint": "the lab's load_checkpoint(): verify from the open file, then torch.load "
    "from it",
    "meta_mmap": "verify(); meta-device model; torch.load(mmap=True); load_state_dict(assign=True)",
    "plain": "model built on CPU; verify(); torch.load(); load_state_dict()",
}


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
    for how, p in vl["paths"].items():
        lines.append(
            f"| {LOAD_LABELS[how]} | {fmt_time(p['load_s'])} "
            f"| {fmt_bytes(p['peak_extra_bytes'])} | "
            f"{p['peak_ratio']:.2f}× | {p['peak_ratio_max']:.2f}× "
            f"| {fmt_bytes(max(0, p['rss_anon_extra_bytes']))} "
            f"| {fmt_bytes(max(0, p['rss_file_extra_bytes']))} |"
        )
    return "\n".join(lines)
