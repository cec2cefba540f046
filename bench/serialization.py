"""torch.save vs safetensors: file size, save time, eager load, lazy open, one tensor of many.

    .venv/bin/python bench/serialization.py           # full run, writes docs/assets/bench/
    .venv/bin/python bench/serialization.py --quick   # tiny sizes, writes to a temporary folder

Every measurement is taken side by side in one run: for each size and each repetition, the
torch and the safetensors variant of an operation run one after the other (alternating which
goes first), so a busy moment on the machine hits both. Medians over the repetitions are
reported, and ratios are ratios of those medians. Like is compared with like only:

- eager full load: torch.load(path) vs safetensors load_file(path, backend="pread"), both of
  which copy every byte into memory before returning;
- lazy open: torch.load(path, mmap=True) vs safetensors load_file(path) (mmap, the default in
  safetensors 0.8), both of which return tensors backed by the file that read nothing yet;
- one tensor of many, copied into memory: safe_open(backend="pread").get_tensor(name) vs
  torch.load(path, mmap=True)[name].clone() vs the full torch.load(path)[name].

Files are written under a temporary folder and read right after being written, so loads are
served from the page cache (memory), not from the disk: see PAGE_CACHE_NOTE.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/common.py, however we are run
from common import (
    RESULTS_DIR,
    fmt_ratio,
    fmt_time,
    load_average,
    machine,
    side_by_side,
    utc_now,
    versions,
)

NAME = "serialization"

MIB = 1 << 20
# (key, label, bytes of float32 data, number of tensors). Keys are what the page names.
FULL_SIZES = (
    ("mib_1", "1 MiB", 1 * MIB, 32),
    ("mib_16", "16 MiB", 16 * MIB, 32),
    ("mib_128", "128 MiB", 128 * MIB, 32),
    ("mib_1024", "1 GiB", 1024 * MIB, 32),
)
QUICK_SIZES = (
    ("kib_64", "64 KiB", 64 * 1024, 8),
    ("kib_512", "512 KiB", 512 * 1024, 8),
)
FULL_REPEATS = 7
QUICK_REPEATS = 2

PAGE_CACHE_NOTE = (
    "Warm page cache: every file is read right after it was written, so loads copy from memory "
    "and measure parsing and copying, not the disk. A cold read adds the device's read time to "
    "an eager load and to the first touch of each lazily mapped page. Saves are timed without "
    "fsync, so they measure serialization and the copy into the page cache."
)


# --- provenance -------------------------------------------------------------------------------


def provenance(mode: str, repeats: int, scratch: Path) -> dict[str, Any]:
    now = utc_now()
    machine_info, versions_info = machine(scratch), versions()
    load = load_average()
    return {
        "date": now.strftime("%Y-%m-%d %H:%M UTC"),
        "load_average_start": round(load[0], 2),
        "timestamp": now.isoformat(timespec="seconds"),
        "mode": mode,
        "repeats": repeats,
        "machine": machine_info,
        "versions": versions_info,
        "page_cache": PAGE_CACHE_NOTE,
        "summary": (
            f"{machine_info['cpu']} ({machine_info['cores']} cores, {machine_info['ram_gib']} GiB "
            f"RAM, {machine_info['scratch_fs']} scratch disk), torch {versions_info['torch']}, "
            f"safetensors {versions_info['safetensors']}, numpy {versions_info['numpy']}, "
            f"Python {versions_info['python']}; median of {repeats} runs; load average "
            f"{load[0]:.1f} at the start"
        ),
    }


# --- measuring --------------------------------------------------------------------------------


def make_state_dict(total_bytes: int, count: int) -> dict[str, torch.Tensor]:
    """`count` float32 tensors of equal size adding up to `total_bytes`, random contents."""
    per = total_bytes // 4 // count
    gen = torch.Generator().manual_seed(0)
    return {f"layer{i:03d}.weight": torch.randn(per, generator=gen) for i in range(count)}


def summarize(runs: dict[str, list[float]], numerator: str, denominator: str) -> dict[str, Any]:
    medians = {name: statistics.median(times) for name, times in runs.items()}
    return {
        "median_s": medians,
        "ratio": medians[numerator] / medians[denominator],
        "ratio_of": f"{numerator} / {denominator}",
        "runs_s": runs,
    }


def measure_saves(
    sd: dict[str, torch.Tensor], pt: Path, st: Path, repeats: int
) -> dict[str, list[float]]:
    """Save timings (each into a path that does not exist yet); leaves both files written."""

    def remove_files() -> None:
        pt.unlink(missing_ok=True)
        st.unlink(missing_ok=True)

    runs = side_by_side(
        {"torch": lambda: torch.save(sd, pt), "safetensors": lambda: save_file(sd, st)},
        repeats,
        before=remove_files,
    )
    remove_files()
    torch.save(sd, pt)
    save_file(sd, st)
    return runs


def measure_size(
    key: str, label: str, total_bytes: int, count: int, repeats: int, folder: Path
) -> dict[str, Any]:
    sd = make_state_dict(total_bytes, count)
    raw = sum(t.numel() * t.element_size() for t in sd.values())
    pt, st = folder / f"{key}.pt", folder / f"{key}.safetensors"
    name = sorted(sd)[count // 2]  # one tensor from the middle of the file
    save = measure_saves(sd, pt, st, repeats)
    sizes = {"torch": pt.stat().st_size, "safetensors": st.stat().st_size}
    del sd
    gc.collect()

    # Sanity: both files hold the same tensors, and the variants below return them.
    reference = torch.load(pt, weights_only=True)
    again = load_file(st, backend="pread")
    assert reference.keys() == again.keys()
    assert all(torch.equal(reference[k], again[k]) for k in reference)
    del reference, again
    gc.collect()

    eager = side_by_side(
        {
            "torch": lambda: torch.load(pt, weights_only=True),
            "safetensors": lambda: load_file(st, backend="pread"),
        },
        repeats,
    )
    lazy = side_by_side(
        {
            "torch": lambda: torch.load(pt, weights_only=True, mmap=True),
            "safetensors": lambda: load_file(st),
        },
        repeats,
    )

    def safetensors_one() -> torch.Tensor:
        with safe_open(st, framework="pt", backend="pread") as f:
            return f.get_tensor(name)

    def torch_mmap_one() -> torch.Tensor:
        return torch.load(pt, weights_only=True, mmap=True)[name].clone()

    def torch_full_one() -> torch.Tensor:
        return torch.load(pt, weights_only=True)[name]

    assert torch.equal(safetensors_one(), torch_mmap_one())
    assert torch.equal(safetensors_one(), torch_full_one())
    one = side_by_side(
        {
            "safetensors": safetensors_one,
            "torch_mmap": torch_mmap_one,
            "torch_full": torch_full_one,
        },
        repeats,
    )
    pt.unlink()
    st.unlink()
    one_summary = summarize(one, "torch_mmap", "safetensors")
    one_summary["ratio_full"] = (
        one_summary["median_s"]["torch_full"] / (one_summary["median_s"]["safetensors"])
    )
    return {
        "label": label,
        "tensors": count,
        "raw_bytes": raw,
        "file_bytes": sizes,
        "overhead_bytes": {fmt: size - raw for fmt, size in sizes.items()},
        "save": summarize(save, "torch", "safetensors"),
        "eager_load": summarize(eager, "torch", "safetensors"),
        "lazy_open": summarize(lazy, "torch", "safetensors"),
        "one_tensor": one_summary,
    }


# --- reporting --------------------------------------------------------------------------------


def table_md(sizes: dict[str, dict[str, Any]]) -> str:
    """One column per size; per operation one row per variant, then torch ÷ safetensors."""
    results = list(sizes.values())
    header = "| operation | variant | " + " | ".join(r["label"] for r in results) + " |"
    lines = [header, "| --- | --- | " + " | ".join("---:" for _ in results) + " |"]

    def row(operation: str, variant: str, cells: list[str]) -> None:
        lines.append(f"| {operation} | {variant} | " + " | ".join(cells) + " |")

    count = results[0]["tensors"]
    row(
        "bytes over the raw data",
        "torch.save",
        [f"+{r['overhead_bytes']['torch']:,} B" for r in results],
    )
    row("", "safetensors", [f"+{r['overhead_bytes']['safetensors']:,} B" for r in results])
    variants = (
        ("save", "save", ("torch.save", "save_file")),
        ("eager_load", "eager full load", ("torch.load", 'load_file(backend="pread")')),
        ("lazy_open", "lazy open", ("torch.load(mmap=True)", "load_file (mmap)")),
    )
    for op, title, (torch_name, st_name) in variants:
        row(f"**{title}**", torch_name, [fmt_time(r[op]["median_s"]["torch"]) for r in results])
        row("", st_name, [fmt_time(r[op]["median_s"]["safetensors"]) for r in results])
        row("", "*torch ÷ safetensors*", [f"*{fmt_ratio(r[op]['ratio'])}*" for r in results])
    one = [r["one_tensor"] for r in results]
    row(
        f"**one tensor of {count}**",
        "full torch.load, then pick",
        [fmt_time(o["median_s"]["torch_full"]) for o in one],
    )
    row(
        "",
        "torch.load(mmap=True)[name].clone()",
        [fmt_time(o["median_s"]["torch_mmap"]) for o in one],
    )
    row(
        "",
        'safe_open(backend="pread").get_tensor(name)',
        [fmt_time(o["median_s"]["safetensors"]) for o in one],
    )
    return "\n".join(lines)


def headline(sizes: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Ready-to-print strings for the page, taken at the smallest and largest sizes."""
    smallest, largest = sizes[next(iter(sizes))], sizes[list(sizes)[-1]]
    save_ratios = [r["save"]["ratio"] for r in sizes.values()]
    eager_ratios = [r["eager_load"]["ratio"] for r in sizes.values()]
    lazy = [r["lazy_open"]["median_s"] for r in sizes.values()]
    return {
        "largest": largest["label"],
        "smallest": smallest["label"],
        "tensors": str(largest["tensors"]),
        "overhead_torch": f"{largest['overhead_bytes']['torch']:,} B",
        "overhead_safetensors": f"{largest['overhead_bytes']['safetensors']:,} B",
        "save_ratio_largest": fmt_ratio(largest["save"]["ratio"]),
        "save_ratio_min": fmt_ratio(min(save_ratios)),
        "save_ratio_max": fmt_ratio(max(save_ratios)),
        "save_torch_largest": fmt_time(largest["save"]["median_s"]["torch"]),
        "save_safetensors_largest": fmt_time(largest["save"]["median_s"]["safetensors"]),
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = list(results["sizes"].values())
    mib = [r["raw_bytes"] / MIB for r in sizes]
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
        ax.set_xticks(mib, [r["label"] for r in sizes])
        ax.set_title(title)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    for ax in axes[1]:
        ax.set_xlabel("state dict size (float32)")
    for ax in axes[:, 0]:
        ax.set_ylabel("time (ms, log scale): median, bars min to max")
    prov = results["provenance"]
    fig.suptitle(
        f"torch.save vs safetensors, {prov['date']}: {prov['machine']['cpu']}, "
        f"{prov['machine']['cores']} cores; torch {prov['versions']['torch']}, "
        f"safetensors {prov['versions']['safetensors']}; {prov['repeats']} runs each",
        fontsize=10,
    )
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


# --- running ----------------------------------------------------------------------------------


def run(
    sizes: tuple[tuple[str, str, int, int], ...] = FULL_SIZES,
    repeats: int = FULL_REPEATS,
    mode: str = "full",
    log: Callable[[str], None] = lambda message: None,
) -> dict[str, Any]:
    """Measure every size; returns the results dict (nothing is written)."""
    with tempfile.TemporaryDirectory(prefix="bench-serialization-") as scratch:
        folder = Path(scratch)
        prov = provenance(mode, repeats, folder)
        measured: dict[str, dict[str, Any]] = {}
        for key, label, total, count in sizes:
            start = time.perf_counter()
            measured[key] = measure_size(key, label, total, count, repeats, folder)
            log(f"  {label}: {time.perf_counter() - start:.1f} s")
    return {
        "provenance": prov,
        "sizes": measured,
        "headline": headline(measured),
        "table_md": table_md(measured),
    }


def write(results: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, png_path = out_dir / f"{NAME}.json", out_dir / f"{NAME}.png"
    json_path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", "utf8")
    plot(results, png_path)
    return json_path, png_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes, 2 runs each: a smoke test, written to a temporary folder unless --out",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help=f"output folder (default {RESULTS_DIR})"
    )
    args = parser.parse_args(argv)
    if args.quick:
        sizes, repeats, mode = QUICK_SIZES, QUICK_REPEATS, "quick"
        # Never let smoke-test numbers replace the committed results by accident.
        out_dir = args.out or Path(tempfile.mkdtemp(prefix="bench-serialization-quick-"))
    else:
        sizes, repeats, mode = FULL_SIZES, FULL_REPEATS, "full"
        out_dir = args.out or RESULTS_DIR

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log(f"serialization benchmark ({mode}): {len(sizes)} sizes, {repeats} runs each")
    results = run(sizes, repeats, mode, log=log)
    json_path, png_path = write(results, out_dir)
    print(results["table_md"])
    print()
    print(results["provenance"]["summary"])
    print(results["provenance"]["page_cache"])
    print(f"wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
