"""What both stores share: what a store does (Store), what a read of a
checkpoint returns (Saved), and the check that its state file holds every
key of the store's layout."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from resume_lab.hashing import FileDigest
from resume_lab.manifest import CheckpointError, missing_keys


def check_keys(path: Path, state: Any, names: Iterable[str]) -> None:
    """A training state holds every key of its layout."""
    missing = missing_keys(state, names)
    if missing:
        raise CheckpointError(
            f"{path}: not a training state, it lacks {', '.join(missing)}"
        )


@dataclass(frozen=True)
class Saved:
    """A checkpoint as read: every file verified, its state file loaded
    with the restricted unpickler; what a resume starts from."""

    checkpoint: Path
    state: dict[str, Any]
    manifest: dict[str, Any]
    store: Store  # the store that read it, and puts the rest back
    metadata: Any = None  # DCP's index, read through the allow-list


class Store(Protocol):
    """How a Trainer's model and optimizer are read and put back, and which
    files hold them: the one-file store (file_store.py) for one process,
    the DCP store (dcp_store.py) for a trainer on logical shards. (A
    `trainer` is loop.Trainer's, which this module does not import: the
    loop's modules sit below the stores'.)"""

    state_file: str  # the file the state is loaded from, first
    layout: tuple[str, ...]  # its keys
    volatile: frozenset[str]  # files whose bytes differ on every save

    def weights(self, trainer: Any) -> dict[str, Any]:
        """MODEL and OPTIMIZER, as this store saves them."""
        ...

    def write(
        self, trainer: Any, state: dict[str, Any], tmp: Path
    ) -> tuple[dict[str, FileDigest], Any]:
        """Every rank: `state` into the empty directory `tmp`; returns what
        was hashed while written, and a future if the write goes on."""
        ...

    def read(self, checkpoint: Path) -> Saved:
        """Every file verified, then the state file loaded."""
        ...

    def load_weights(self, trainer: Any, saved: Saved) -> dict[str, Any]:
        """The model and optimizer put back; returns the whole state."""
        ...

    def whole_model(self, trainer: Any) -> dict[str, Any]:
        """Every rank: the weights for final.pt (empty but on rank 0)."""
        ...

    def describe(self, saved: Saved) -> list[str]:
        """What holds the tensors, for `verify`."""
        ...
