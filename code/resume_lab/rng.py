"""Capture and restore the torch, Python and NumPy RNGs in a
weights_only-loadable form."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


# --8<-- [start:capture_rng]
def capture_rng() -> dict[str, Any]:
    """Generator states as tensors and plain values:
    torch.load(weights_only=True) accepts them.

    NumPy's legacy state holds a uint32 ndarray, which the restricted unpickler
    refuses; its key (and Python's 625 Mersenne Twister words) are stored as
    int64 tensors instead.
    """
    py_version, py_words, py_gauss = random.getstate()
    np_kind, np_key, np_pos, np_has_gauss, np_gauss = np.random.get_state(
        legacy=True
    )
    return {
        # uint8 tensor: dropout masks come from here
        "torch": torch.get_rng_state(),
        "python": {
            "version": py_version,
            "words": torch.tensor(py_words, dtype=torch.int64),
            "gauss": py_gauss,
        },
        "numpy": {
            "kind": np_kind,
            "key": torch.from_numpy(np.asarray(np_key, dtype=np.int64)),
            "pos": int(np_pos),
            "has_gauss": int(np_has_gauss),
            "cached_gaussian": float(np_gauss),
        },
    }


# --8<-- [end:capture_rng]


# --8<-- [start:restore_rng]
def restore_rng(state: dict[str, Any]) -> None:
    """Put every generator back.

    Call it after building fresh objects (init draws from the torch RNG) and
    before the first forward pass (dropout draws from it)."""
    torch.set_rng_state(state["torch"])
    python = state["python"]
    random.setstate(
        (python["version"], tuple(python["words"].tolist()), python["gauss"])
    )
    numpy_state = state["numpy"]
    np.random.set_state(
        (
            numpy_state["kind"],
            numpy_state["key"].numpy().astype(np.uint32),
            numpy_state["pos"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )


# --8<-- [end:restore_rng]


class ProcessRNG:
    """The process's generators as one stateful part of a Trainer (one
    process: dropout draws from the global torch RNG)."""

    def state_dict(self) -> dict[str, Any]:
        return capture_rng()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        restore_rng(state)
