"""Raw hash throughput of the algorithms the lab accepts, at each save size of the plan.

In memory: the state's tensor bytes, fed to the hasher as they are (what HashingWriter's helper
thread does with each write). From the file: the lab's own streaming digest (`file_digest`, one
reused 8 MiB buffer), over a file just written, so from the page cache; that is verify()'s speed.
BLAKE3 is also timed with its own threads (`max_threads=AUTO`) for context; the lab uses one.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3
import torch

from resume_lab.hashing import HASHES, file_digest, new_hasher

from ..plan import Plan
from ..timing import medians, side_by_side
from .save_speed import make_state

THREADED = "memory_blake3_threads"


def measure_size(total: int, repeats: int, folder: Path) -> dict[str, Any]:
    state = make_state(total)
    file = folder / "state.pt"
    torch.save(state, file)
    buffers = [t.view(torch.uint8).numpy() for t in state["model"].values()]

    def in_memory(make: Callable[[], Any]) -> Callable[[], str]:
        def run() -> str:
            hasher = make()
            for buffer in buffers:
                hasher.update(buffer)
            return hasher.hexdigest()

        return run

    variants: dict[str, Callable[[], Any]] = {}
    for algorithm in sorted(HASHES):
        variants[f"memory_{algorithm}"] = in_memory(lambda a=algorithm: new_hasher(a))
        variants[f"file_{algorithm}"] = lambda a=algorithm: file_digest(file, a)
    variants[THREADED] = in_memory(lambda: blake3.blake3(max_threads=blake3.blake3.AUTO))
    runs = side_by_side(variants, repeats)
    result = {
        "memory_bytes": sum(b.nbytes for b in buffers),
        "file_bytes": file.stat().st_size,
        "median_s": medians(runs),
        "runs_s": runs,
    }
    file.unlink()
    return result


def measure(plan: Plan) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-hash-") as scratch:
        return {
            key: measure_size(total, plan.repeats, Path(scratch)) for key, total in plan.save_sizes
        }
