"""The page's tables, in Markdown: the summary and one per section."""

from __future__ import annotations

from typing import Any

from ...timing import fmt_duration, fmt_time
from .rules import (
    HASH_NAMES,
    LOAD_LABELS,
    TARGETS,
    fmt_bytes,
    fmt_speedup,
    mark,
    pytest_summary,
    size_verdict,
)


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
        speedup(s["speedup"], s["compare"]["warm"]),
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
        f"… cold (a fresh sampler), k = {k:,}",
        f"draw the order, start at k: {fmt_duration(last['cold_start'])}",
        f"draw the order, replay: {fmt_duration(last['cold_replay'])}",
        speedup(s["cold_speedup"], s["compare"]["cold"]),
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


def speedup(ratio: float, c: dict[str, Any]) -> str:
    """Replay ÷ start, called faster only when the start's runs beat the replay's
    (timing.compare, start first): else the ratio as it is, and who won."""
    said = {c["a"]: "faster", None: "(within noise)"}.get(c["winner"], "(the replay faster)")
    return f"{fmt_speedup(ratio)} {said}"


def sampler_table_md(s: dict[str, Any]) -> str:
    lines = [
        "| k | start at k (warm) | replay k (warm) | replay ÷ start "
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
    default = HASH_NAMES[next(iter(save.values()))["default_hash"]]
    lines = [
        f"| state | torch.save + fsync (floor) | floor's spread | save_checkpoint ({default}) "
        f"| ÷ floor | ≤ {TARGETS['save_overhead'][2]:g}× | the same, no helper threads | ÷ floor "
        "| with helpers vs without |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |",
    ]
    for size in save.values():
        m, lab = size["median_s"], f"save_{size['default_hash']}"
        helper = size["compare"]["helper_vs_inline"]["winner"]
        helper_text = {None: "within noise", lab: "with faster"}.get(helper, "without faster")
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
        "| path | time until loaded (before the read) | peak extra memory | ÷ state bytes "
        "| worst run | anonymous | file-backed |",
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
