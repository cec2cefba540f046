"""Read DCP's `.metadata` without running it.

torch.distributed.checkpoint reads `.metadata` with plain pickle.load, so a
crafted file runs code on load, and a manifest does not help when the
attacker rewrote it too. This reader unpickles with an allow-list of the
classes a tensor-only checkpoint's metadata is made of, and refuses any
item stored as pickled bytes (DCP would load those with
torch.load(weights_only=False)).
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.metadata import (
    BytesStorageMetadata,
    Metadata,
    StorageMeta,
)
from torch.distributed.checkpoint.planner import ReadItem

from resume_lab.manifest import CheckpointError

# What torch 2.13 pickles into a tensor-only checkpoint's .metadata.
ALLOWED = {
    ("torch.distributed.checkpoint.metadata", name)
    for name in (
        "Metadata",
        "TensorStorageMetadata",
        "ChunkStorageMetadata",
        "TensorProperties",
        "MetadataIndex",
        "StorageMeta",
        "_MEM_FORMAT_ENCODING",
    )
} | {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch.serialization", "_get_layout"),
    ("torch", "Size"),
    ("pathlib", "PosixPath"),
}


class MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in ALLOWED:
            return super().find_class(module, name)
        if module == "torch" and isinstance(
            getattr(torch, name, None), torch.dtype
        ):
            return getattr(torch, name)
        raise pickle.UnpicklingError(
            f"{module}.{name} is not allowed in DCP metadata"
        )


# --8<-- [start:read_metadata]
def read_metadata(path: Path, data: bytes | None = None) -> Metadata:
    """The checkpoint's DCP metadata (`data`, the bytes of `path` if they
    were read already), or CheckpointError; nothing outside the allow-list
    is ever constructed or called."""
    data = path.read_bytes() if data is None else data
    try:
        metadata = MetadataUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, TypeError) as err:
        raise CheckpointError(f"{path}: refused, not loaded: {err}") from None
    if not isinstance(metadata, Metadata):
        raise CheckpointError(
            f"{path}: holds {type(metadata).__name__}, not DCP metadata"
        )
    for key, item in metadata.state_dict_metadata.items():
        if isinstance(item, BytesStorageMetadata):
            raise CheckpointError(
                f"{path}: item {key!r} is pickled bytes, which DCP would "
                "load with weights_only=False; this lab saves tensors only"
            )
    return metadata


# --8<-- [end:read_metadata]


class SafeReader(FileSystemReader):
    """FileSystemReader whose metadata is read_metadata()'s, read once
    already: DCP never unpickles the file itself."""

    def __init__(self, path: Path, metadata: Metadata) -> None:
        super().__init__(path)
        self.metadata = metadata

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        storage_meta = self.metadata.storage_meta or StorageMeta()
        storage_meta.load_id = self.load_id
        self.metadata.storage_meta = storage_meta
        return self.metadata


class TensorOnlyPlanner(DefaultLoadPlanner):
    """A second lock: even if bytes were requested, never torch.load them
    with weights_only=False."""

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        raise CheckpointError(
            f"{read_item.dest_index.fqn}: a pickled bytes item; refused"
        )
