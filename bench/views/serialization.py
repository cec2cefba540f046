"""The view of serialization.json: the safetensors page's table, sentences and figure.

`view(results)` is the stored results with each size's label, ratios (torch's median over
safetensors') and comparisons added, and the page's table and sentences. The sentences that
compare torch.save with safetensors name a winner at a size only when that size's runs separate
(timing.compare); elsewhere they say the two were within noise. `plot` draws the page's figure
from the same results (bench/__main__.py calls it when it writes them).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from .. import provenance
from ..plan import MIB
from ..timing import compare, fmt_time


def view(results: dict[str, Any]) -> dict[str, Any]:
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
    method = f"median of {results['plan']['serialization_repeats']} runs"
    out["provenance"] = provenance.worded(results["provenance"], method)
    out["headline"] = headline(out["sizes"])
    out["table_md"] = table_md(out["sizes"])
    return out


def binary_size(n: int) -> str:
    """1 MiB, 1 GiB, 64 KiB: the sizes, as the page names them."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def fmt_ratio(ratio: float) -> str:
    return f"{ratio:.2f}×" if ratio < 10 else f"{ratio:.0f}×"


def listing(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


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


def plot(results: dict[str, Any], path: Path) -> None:
    """The page's figure: median times against size, bars from the fastest to the slowest run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = list(results["sizes"].values())
    mib = [r["raw_bytes"] / MIB for r in sizes]
    tick_labels = [binary_size(r["raw_bytes"]) for r in sizes]
    panels = (
        ("save", "Save", {"torch": "torch.save", "safetensors": "save_file"}),
        (
            "eager_load",
            "Eager full load",
            {"torch": "torch.load", "safetensors": 'load_file(backend="pread")'},
        ),
        (
            "lazy_open",
            "Lazy open (nothing read yet)",
            {"torch": "torch.load(mmap=True)", "safetensors": "load_file (mmap)"},
        ),
        (
            "one_tensor",
            f"One tensor of {sizes[0]['tensors']}, copied into memory",
            {
                "torch_full": "full torch.load, pick one",
                "torch_mmap": "torch.load(mmap=True)[name].clone()",
                "safetensors": 'safe_open(backend="pread").get_tensor(name)',
            },
        ),
    )
    colours = {"torch": "#ee4c2c", "torch_mmap": "#ee4c2c", "torch_full": "#8c2d19"}
    styles = {"torch_full": ":", "torch_mmap": "--"}
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5), sharey=True, constrained_layout=True)
    for ax, (op, title, labels) in zip(axes.flat, panels, strict=True):
        for variant, label in labels.items():
            ms = [r[op]["median_s"][variant] * 1e3 for r in sizes]
            runs = [[t * 1e3 for t in r[op]["runs_s"][variant]] for r in sizes]
            spread = [
                [m - min(rs) for m, rs in zip(ms, runs, strict=True)],
                [max(rs) - m for m, rs in zip(ms, runs, strict=True)],
            ]
            ax.errorbar(
                mib,
                ms,
                yerr=spread,
                marker="o",
                capsize=3,
                color=colours.get(variant, "#1f77b4"),
                linestyle=styles.get(variant, "-"),
                label=label,
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(mib, tick_labels)
        ax.set_title(title)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    for ax in axes[1]:
        ax.set_xlabel("state dict size (float32)")
    for ax in axes[:, 0]:
        ax.set_ylabel("time (ms, log scale): median, bars min to max")
    prov = results["provenance"]
    fig.suptitle(
        f"torch.save vs safetensors, {prov['started'][:10]}: {prov['machine']['cpu']}, "
        f"{prov['machine']['cores']} cores; torch {prov['versions']['torch']}, "
        f"safetensors {prov['versions']['safetensors']}; "
        f"{results['plan']['serialization_repeats']} runs each",
        fontsize=10,
    )
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
