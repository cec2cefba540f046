"""Raw hash throughput of the algorithms the lab accepts, at one size.

In memory: the state's tensor bytes, fed to the hasher as they are (what HashingWriter's helper
thread does with each write). From the file: the lab's own streaming digest (`file_digest`, one
reused 8 MiB buffer), over a file just written, so from the page cache; that is verify()'s speed.
BLAKE3 is also timed with its own threads (`max_threads=AUTO`) for context; the lab uses one.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3
import torch

from resume_lab.hashing import HASHES, file_digest, new_hasher

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import side_by_side
from verdicts import compare

GB = 10**9
THREADED = "memory_blake3_threads"


def tensor_bytes(state: dict[str, Any]) -> list[Any]:
    return [t.view(torch.uint8).numpy() for t in state["model"].values()]


def measure(state: dict[str, Any], file: Path, repeats: int) -> dict[str, Any]:
    buffers = tensor_bytes(state)
    memory_bytes = sum(b.nbytes for b in buffers)
    file_bytes = file.stat().st_size

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
    medians = {name: statistics.median(times) for name, times in runs.items()}
    sizes = {name: file_bytes if name.startswith("file_") else memory_bytes for name in runs}
    return {
        "memory_bytes": memory_bytes,
        "file_bytes": file_bytes,
        "median_s": medians,
        "gb_per_s": {name: sizes[name] / m / GB for name, m in medians.items()},
        "compare": {
            "memory": compare(runs, "memory_blake3", "memory_sha256"),
            "file": compare(runs, "file_blake3", "file_sha256"),
        },
        "runs_s": runs,
    }
