"""The lab's durable save against the floor, at one size.

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
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import blake3
import torch

from resume_lab.checkpoint import MANIFEST, STATE_FILE, save_checkpoint
from resume_lab.hashing import DEFAULT_HASH, HASHES, HashingWriter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import side_by_side
from verdicts import compare, spread

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


def measure(
    key: str,
    label: str,
    state: dict[str, Any],
    repeats: int,
    sync_before_save: bool,
    folder: Path,
) -> dict[str, Any]:
    floor_path = floor_file(folder, key)  # left for the hash measurement; remove() deletes it

    def floor() -> None:
        torch.save(state, floor_path)
        fsync_file(floor_path)

    def lab(algorithm: str, name: str) -> Any:
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

    medians = {name: statistics.median(times) for name, times in runs.items()}
    lab_default = save_variant(DEFAULT_HASH)
    other = next(save_variant(a) for a in sorted(HASHES) if a != DEFAULT_HASH)
    return {
        "label": label,
        "file_bytes": file_bytes,
        "default_hash": DEFAULT_HASH,
        "median_s": medians,
        "best_s": {name: min(times) for name, times in runs.items()},
        "ratio": medians[lab_default] / medians[FLOOR],
        "ratio_of": f"{lab_default} / {FLOOR}",
        "ratios": {name: m / medians[FLOOR] for name, m in medians.items() if name != FLOOR},
        "floor_spread": spread(runs[FLOOR]),
        "compare": {
            # the lab's save against the floor: is it slower beyond noise?
            "lab_vs_floor": compare(runs, lab_default, FLOOR),
            # hashing while writing: the two algorithms
            "algorithms": compare(runs, save_variant("blake3"), save_variant("sha256")),
            # the helper thread against hashing in line
            "helper_vs_inline": compare(runs, lab_default, INLINE),
            "default_vs_other": compare(runs, lab_default, other),
        },
        "runs_s": runs,
    }


def floor_file(folder: Path, key: str) -> Path:
    return folder / f"{key}-floor.pt"


def remove(folder: Path, key: str) -> None:
    floor_file(folder, key).unlink(missing_ok=True)
    for name in [f"{key}-{a}" for a in HASHES] + [f"{key}-{INLINE}"]:
        shutil.rmtree(folder / name, ignore_errors=True)
