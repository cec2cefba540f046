"""The comparisons the demos and the tests make, with public names: two
states bitwise, two histories update by update, two run folders file by
file, and where a checkpoint's bytes go."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from resume_lab import state_keys as keys
from resume_lab.checkpoint import load_checkpoint, locate
from resume_lab.loop import DETERMINISTIC_FIELDS
from resume_lab.run_files import FINAL, HISTORY, HISTORY_LOG, STATE_FILE

CURVE_FIELDS = ("loss", "grad_norm", "lr")
# what a finished run leaves that a resumed run must match byte for byte
COMPARED = (FINAL, HISTORY, HISTORY_LOG)


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same dtype, shape and bytes: unlike `torch.equal`, -0.0 is not 0.0
    and a NaN equals the same NaN."""
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and torch.equal(
            a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)
        )
    )


def tensors_equal(a: Any, b: Any) -> bool:
    """Bitwise equality of nested dicts/lists of tensors and plain values
    (Composer-style)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and same_bytes(a, b)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(
            tensors_equal(a[k], b[k]) for k in a
        )
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(
            tensors_equal(x, y) for x, y in zip(a, b, strict=True)
        )
    return a == b


def first_divergent_step(
    reference: list[dict[str, Any]],
    other: list[dict[str, Any]],
    fields: Iterable[str] = DETERMINISTIC_FIELDS,
) -> int | None:
    """The first update whose record differs in any of `fields`; None if the
    runs agree."""
    fields = tuple(fields)
    for ours, theirs in zip(reference, other, strict=False):
        if any(ours[f] != theirs[f] for f in fields):
            return ours["step"]
    if len(reference) != len(other):
        return min(len(reference), len(other)) + 1
    return None


def curve(
    history: list[dict[str, Any]], fields: Iterable[str] = CURVE_FIELDS
) -> list[tuple[Any, ...]]:
    return [tuple(record[f] for f in fields) for record in history]


def storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    # What torch.save writes is each tensor's whole storage, not just its
    # visible elements.
    return sum(t.untyped_storage().nbytes() for t in tensors)


# --8<-- [start:checkpoint_bytes]
def checkpoint_bytes(path: str | os.PathLike[str]) -> dict[str, int]:
    """Where the bytes of a training checkpoint go, measured on the files
    themselves."""
    checkpoint = locate(path)
    state, _ = load_checkpoint(checkpoint)
    moments = [
        param_state[name]
        for param_state in state[keys.OPTIMIZER]["state"].values()
        for name in ("exp_avg", "exp_avg_sq")
    ]
    rng = state[keys.RNG]
    parts = {
        "parameters": storage_bytes(state[keys.MODEL].values()),
        "optimizer_moments": storage_bytes(moments),
        "rng_torch": storage_bytes([rng["torch"]]),
        "rng_numpy": storage_bytes([rng["numpy"]["key"]]),
        "rng_python": storage_bytes([rng["python"]["words"]]),
    }
    # the whole directory: state.pt and manifest.json
    total = sum(f.stat().st_size for f in checkpoint.iterdir())
    # torch.save's format: one data/N entry per storage
    with zipfile.ZipFile(checkpoint / STATE_FILE) as archive:
        stored = sum(
            info.file_size
            for info in archive.infolist()
            if "/data/" in info.filename
        )
    # The rest: other tensors (Adam step counts), the pickle
    # (config, history mark...), ZIP headers, the manifest.
    return {
        "total": total,
        **parts,
        "other_tensors": stored - sum(parts.values()),
        "rest": total - sum(parts.values()),
    }


# --8<-- [end:checkpoint_bytes]


def differing_files(a: Path, b: Path) -> list[str]:
    """The names of the COMPARED files that differ byte for byte between run
    folders `a` and `b` (empty: a bitwise match)."""
    return [n for n in COMPARED if (a / n).read_bytes() != (b / n).read_bytes()]
