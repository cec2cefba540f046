"""The safetensors page's table and sentences, from serialization.json (derived by metrics.py).

The sentences that compare torch.save with safetensors name a winner at a size only when that
size's runs separate (verdicts.compare); elsewhere they say the two were within noise."""

from __future__ import annotations

from typing import Any

from .fmt import fmt_ratio, fmt_time, listing


def table_md(sizes: dict[str, dict[str, Any]]) -> str:
    """One column per size; per operation one row per variant, then their ratio.

    The names are short, so that the table fits the page's column without wrapping; the page
    says what they stand for: `overhead` is the bytes over the tensors' own, `ratio` is torch's
    median over safetensors', `pread` is `backend="pread"` (read into memory), `mmap` is
    `torch.load(mmap=True)` or `load_file`'s default backend, and the three ways to get one
    tensor are a whole `torch.load`, a `.clone()` of it out of a mapped `torch.load`, and
    `safe_open(backend="pread").get_tensor`.
    """
    results = list(sizes.values())
    header = "| operation | variant | " + " | ".join(r["label"] for r in results) + " |"
    lines = [header, "| --- | --- | " + " | ".join("---:" for _ in results) + " |"]

    def row(operation: str, variant: str, cells: list[str]) -> None:
        lines.append(f"| {operation} | {variant} | " + " | ".join(cells) + " |")

    row(
        "overhead",
        "torch.save",
        [f"+{r['overhead_bytes']['torch']:,} B" for r in results],
    )
    row("", "safetensors", [f"+{r['overhead_bytes']['safetensors']:,} B" for r in results])
    variants = (
        ("save", "save", ("torch.save", "save_file")),
        ("eager_load", "eager load", ("torch.load", "load_file, pread")),
        ("lazy_open", "lazy open", ("torch.load, mmap", "load_file, mmap")),
    )
    for op, title, (torch_name, st_name) in variants:
        row(f"**{title}**", torch_name, [fmt_time(r[op]["median_s"]["torch"]) for r in results])
        row("", st_name, [fmt_time(r[op]["median_s"]["safetensors"]) for r in results])
        row("", "*ratio*", [f"*{fmt_ratio(r[op]['ratio'])}*" for r in results])
    one = [r["one_tensor"] for r in results]
    row(
        "**one tensor**",
        "torch.load",
        [fmt_time(o["median_s"]["torch_full"]) for o in one],
    )
    row("", "torch.load, mmap", [fmt_time(o["median_s"]["torch_mmap"]) for o in one])
    row("", "safe_open, pread", [fmt_time(o["median_s"]["safetensors"]) for o in one])
    return "\n".join(lines)


def across_sizes(sizes: dict[str, dict[str, Any]], op: str, names: dict[str, str]) -> str:
    """Who was faster at which sizes, beyond noise: "X was faster than Y at every size"."""
    by_outcome: dict[str | None, list[str]] = {}
    for size in sizes.values():
        by_outcome.setdefault(size[op]["compare"]["winner"], []).append(size["label"])
    every = len(sizes)
    parts = []
    for winner, labels in sorted(by_outcome.items(), key=lambda kv: -len(kv[1])):
        where = "at every size" if len(labels) == every else f"at {listing(labels)}"
        if winner is None:
            parts.append(f"the two were within noise of each other {where}")
        else:
            loser = next(n for n in names if n != winner)
            parts.append(f"{names[winner]} was faster than {names[loser]} {where}")
    return "; ".join(parts)


def headline(sizes: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Ready-to-print strings for the page, taken at the smallest and largest sizes."""
    smallest, largest = sizes[next(iter(sizes))], sizes[list(sizes)[-1]]
    save_ratios = [r["save"]["ratio"] for r in sizes.values()]
    eager_ratios = [r["eager_load"]["ratio"] for r in sizes.values()]
    lazy = [r["lazy_open"]["median_s"] for r in sizes.values()]
    widest = max(sizes.values(), key=lambda r: r["eager_load"]["ratio"])
    return {
        "largest": largest["label"],
        "smallest": smallest["label"],
        "tensors": str(largest["tensors"]),
        "overhead_torch": f"{largest['overhead_bytes']['torch']:,} B",
        "overhead_safetensors": f"{largest['overhead_bytes']['safetensors']:,} B",
        "save_comparison": across_sizes(
            sizes, "save", {"torch": "`torch.save`", "safetensors": "`save_file`"}
        ),
        "save_ratio_largest": fmt_ratio(largest["save"]["ratio"]),
        "save_ratio_min": fmt_ratio(min(save_ratios)),
        "save_ratio_max": fmt_ratio(max(save_ratios)),
        "save_torch_largest": fmt_time(largest["save"]["median_s"]["torch"]),
        "save_safetensors_largest": fmt_time(largest["save"]["median_s"]["safetensors"]),
        "eager_comparison": across_sizes(
            sizes,
            "eager_load",
            {"safetensors": "the eager safetensors load", "torch": "`torch.load`"},
        ),
        "eager_widest": widest["label"],
        "eager_ratio_min": fmt_ratio(min(eager_ratios)),
        "eager_ratio_max": fmt_ratio(max(eager_ratios)),
        "eager_torch_largest": fmt_time(largest["eager_load"]["median_s"]["torch"]),
        "eager_safetensors_largest": fmt_time(largest["eager_load"]["median_s"]["safetensors"]),
        "lazy_max_torch": fmt_time(max(m["torch"] for m in lazy)),
        "lazy_max_safetensors": fmt_time(max(m["safetensors"] for m in lazy)),
        "one_safetensors_largest": fmt_time(largest["one_tensor"]["median_s"]["safetensors"]),
        "one_torch_mmap_largest": fmt_time(largest["one_tensor"]["median_s"]["torch_mmap"]),
        "one_torch_full_largest": fmt_time(largest["one_tensor"]["median_s"]["torch_full"]),
        "one_mmap_ratio_largest": fmt_ratio(largest["one_tensor"]["ratio"]),
        "one_full_ratio_largest": fmt_ratio(largest["one_tensor"]["ratio_full"]),
    }
