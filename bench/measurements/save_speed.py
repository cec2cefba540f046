"""The lab's durable save against the floor, at each size of the plan.

The floor is the least a durable write can do: torch.save(path), then one fsync. The lab's save is
`save_checkpoint({"state.pt": state}, folder, name)`: the state written through HashingWriter into
a temporary directory and fsynced, the manifest written last and fsynced, the directory fsynced,
renamed to its name and the parent fsynced. It is timed with each hash algorithm the lab accepts
(the hash is computed while writing), and once with the helper thread switched off (every write
hashed in line by the calling thread), to show what the thread buys.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import blake3
import torch

from resume_lab.checkpoint import MANIFEST, STATE_FILE, save_checkpoint
from resume_lab.hashing import DEFAULT_HASH, HASHES, HashingWriter

from ..plan import Plan
from ..timing import medians, side_by_side

FLOOR = "floor"
INLINE = "inline"  # the default algorithm, helper thread off


def save_variant(algorithm: str) -> str:
    return f"save_{algorithm}"


def make_state(total_bytes: int, count: int = 16) -> dict[str, Any]:
    """A checkpoint-shaped dict: `count` float32 tensors adding up to `total_bytes`, and a step."""
    per = total_bytes // 4 // count
    gen = torch.Generator().manual_seed(0)
    model = {f"layer{i:02d}.weight": torch.randn(per, generator=gen) for i in range(count)}
    return {"model": model, "step": 0}


@contextlib.contextmanager
def patched(owner: object, name: str, value: object) -> Iterator[None]:
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def independent_digest(path: Path, algorithm: str) -> str:
    """The file's digest, read whole by code that is not the lab's."""
    with open(path, "rb") as f:
        if algorithm == "sha256":
            return hashlib.file_digest(f, "sha256").hexdigest()
        hasher = blake3.blake3()
        while block := f.read(64 << 20):
            hasher.update(block)
        return hasher.hexdigest()


def measure_size(
    key: str, total: int, repeats: int, sync_before_save: bool, folder: Path
) -> dict[str, Any]:
    state = make_state(total)
    floor_path = folder / f"{key}-floor.pt"

    def floor() -> None:
        torch.save(state, floor_path)
        fsync_file(floor_path)

    def lab(algorithm: str, name: str) -> Callable[[], Path]:
        return lambda: save_checkpoint(
            {STATE_FILE: state}, folder, name, step=0, config={}, algorithm=algorithm
        )

    def inline() -> None:
        with patched(HashingWriter, "PARALLEL_MIN", sys.maxsize):
            lab(DEFAULT_HASH, f"{key}-{INLINE}")()

    def clean() -> None:
        floor_path.unlink(missing_ok=True)
        for name in [f"{key}-{a}" for a in HASHES] + [f"{key}-{INLINE}"]:
            shutil.rmtree(folder / name, ignore_errors=True)
        if sync_before_save:
            os.sync()  # no variant pays for another's write-back

    variants = {
        FLOOR: floor,
        **{save_variant(a): lab(a, f"{key}-{a}") for a in sorted(HASHES)},
        INLINE: inline,
    }
    runs = side_by_side(variants, repeats, before=clean)

    # Once more, untimed: each manifest's digest is the digest of the file it lists.
    clean()
    for algorithm in sorted(HASHES):
        checkpoint = lab(algorithm, f"{key}-{algorithm}")()
        manifest = json.loads((checkpoint / MANIFEST).read_text("utf8"))
        entry = manifest["files"][STATE_FILE]
        assert manifest["hash"] == algorithm
        assert entry["digest"] == independent_digest(checkpoint / STATE_FILE, algorithm)
        assert entry["bytes"] == (checkpoint / STATE_FILE).stat().st_size
    floor()
    file_bytes = floor_path.stat().st_size
    clean()
    return {
        "state_bytes": total,
        "file_bytes": file_bytes,
        "default_hash": DEFAULT_HASH,
        "median_s": medians(runs),
        "runs_s": runs,
    }


def measure(plan: Plan) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-save-") as scratch:
        return {
            key: measure_size(key, total, plan.save_repeats, plan.sync_before_save, Path(scratch))
            for key, total in plan.save_sizes
        }
