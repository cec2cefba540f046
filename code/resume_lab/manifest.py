"""A checkpoint's manifest: what the checkpoint holds (every file, its size
and content hash), what wrote it, and a hash of the manifest itself, so that a
change to any byte of it is refused before anything is unpickled."""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from resume_lab.hashing import HASHES, FileDigest, new_hasher
from resume_lab.run_files import MANIFEST
from resume_lab.versions import versions

MANIFEST_FORMAT = 2
# the manifest's own hash, over every other key (canonical JSON)
SEAL = "manifest_digest"
REQUIRED_KEYS = ("format", "step", "hash", "files", "config", SEAL)


class CheckpointError(Exception):
    """A checkpoint or its manifest is missing, damaged, or does not match;
    nothing was loaded."""


def seal_of(manifest: dict[str, Any]) -> str:
    content = {key: value for key, value in manifest.items() if key != SEAL}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"))
    hasher = new_hasher(manifest["hash"])
    hasher.update(canonical.encode("utf8"))
    return hasher.hexdigest()


def make_manifest(
    files: dict[str, FileDigest],
    *,
    step: int,
    config: dict[str, Any],
    algorithm: str,
) -> dict[str, Any]:
    manifest = {
        "format": MANIFEST_FORMAT,
        "step": step,
        "hash": algorithm,
        "files": {
            name: {"bytes": d.bytes, "digest": d.digest}
            for name, d in sorted(files.items())
        },
        "config": config,
        "versions": versions(),
        # bitwise resume holds for the same thread count
        "threads": torch.get_num_threads(),
        "saved_at": datetime.datetime.now(datetime.UTC).isoformat(
            timespec="seconds"
        ),
    }
    return {**manifest, SEAL: seal_of(manifest)}


def manifest_text(manifest: dict[str, Any]) -> bytes:
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()


def write_manifest(path: Path, manifest: dict[str, Any]) -> None:
    with open(path, "xb") as f:
        f.write(manifest_text(manifest))
        f.flush()
        os.fsync(f.fileno())


def manifest_of(checkpoint: Path) -> Path:
    """manifest.json inside a checkpoint directory; final.json beside a
    single-file checkpoint (final.pt)."""
    if checkpoint.is_dir():
        return checkpoint / MANIFEST
    return checkpoint.with_suffix(".json")


# --8<-- [start:read_manifest]
def read_manifest(checkpoint: Path) -> dict[str, Any]:
    """The manifest, parsed and checked against its own hash (not yet against
    the files it lists)."""
    path = manifest_of(checkpoint)
    if not path.is_file():
        raise CheckpointError(
            f"{path}: missing; {checkpoint} is not a committed checkpoint "
            "and is never loaded"
        )
    try:
        manifest = json.loads(path.read_text("utf8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(
            f"{path}: not valid JSON ({err}); the manifest was damaged"
        ) from None
    check_shape(path, manifest)
    if manifest[SEAL] != (found := seal_of(manifest)):
        raise CheckpointError(
            f"{path}: expected {manifest['hash']} {manifest[SEAL]} over its "
            f"content, found {found}; the manifest was changed after it was "
            "saved"
        )
    return manifest


# --8<-- [end:read_manifest]


def check_shape(path: Path, manifest: Any) -> None:
    """Every key the lab reads is there, with the type it expects."""
    missing = missing_keys(manifest, REQUIRED_KEYS)
    if missing:
        raise CheckpointError(
            f"{path}: lacks {', '.join(missing)}; it is damaged, or was not "
            "written by this version of the lab"
        )
    if manifest["hash"] not in HASHES:
        raise CheckpointError(
            f"{path}: names hash {manifest['hash']!r}; "
            f"this lab checks {', '.join(sorted(HASHES))}"
        )
    files = manifest["files"]
    entries_ok = isinstance(files, dict) and all(
        isinstance(entry, dict)
        and isinstance(entry.get("bytes"), int)
        and isinstance(entry.get("digest"), str)
        for entry in files.values()
    )
    if not entries_ok:
        raise CheckpointError(
            f"{path}: its file list is damaged (every entry needs an integer "
            "'bytes' and a string 'digest')"
        )


def missing_keys(value: Any, names: Iterable[str]) -> list[str]:
    """The names that `value`, a dict if it is whole, lacks."""
    return [n for n in names if not isinstance(value, dict) or n not in value]
