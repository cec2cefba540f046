"""torch.save vs safetensors: file size, save time, eager load, lazy open, one tensor of many.

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
served from the page cache (memory), not from the disk. Saves are timed without fsync, so they
measure serialization and the copy into the page cache. The page's figure is drawn from the
results by their view (bench/views/serialization.py).
"""

from __future__ import annotations

import gc
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ..plan import Plan
from ..timing import medians, side_by_side


def measure(plan: Plan) -> dict[str, Any]:
    """Every size of the plan: bytes on disk, and each operation's runs."""
    with tempfile.TemporaryDirectory(prefix="bench-serialization-") as scratch:
        return {
            key: measure_size(key, total, count, plan.serialization_repeats, Path(scratch))
            for key, total, count in plan.serialization_sizes
        }


def make_state_dict(total_bytes: int, count: int) -> dict[str, torch.Tensor]:
    """`count` float32 tensors of equal size adding up to `total_bytes`, random contents."""
    per = total_bytes // 4 // count
    gen = torch.Generator().manual_seed(0)
    return {f"layer{i:03d}.weight": torch.randn(per, generator=gen) for i in range(count)}


def summarize(runs: dict[str, list[float]]) -> dict[str, Any]:
    return {"median_s": medians(runs), "runs_s": runs}


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
    key: str, total_bytes: int, count: int, repeats: int, folder: Path
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
    return {
        "tensors": count,
        "raw_bytes": raw,
        "file_bytes": sizes,
        "overhead_bytes": {fmt: size - raw for fmt, size in sizes.items()},
        "save": summarize(save),
        "eager_load": summarize(eager),
        "lazy_open": summarize(lazy),
        "one_tensor": summarize(one),
    }
