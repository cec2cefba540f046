"""Atomic, hashed checkpoint files with a JSON manifest checked before anything
is unpickled."""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import io
import json
import os
import pickle
import platform
import re
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from resume_lab import state_keys as keys

MANIFEST_FORMAT = 1
TEMP_SUFFIX = ".tmp"
REQUIRED_MANIFEST_KEYS = ("bytes", "sha256", "step", "versions", "config")


class CheckpointError(Exception):
    """A checkpoint or its manifest is missing, damaged, or does not match;
    nothing was loaded."""


class SaveError(OSError):
    """Saving failed on the disk's side (full, read-only, I/O error); the target
    was not replaced.

    The message names the file and the cause; the original OSError is chained
    as __cause__ and its errno is kept, so `err.errno == errno.ENOSPC` still
    tells a full disk.
    """

    def __init__(self, path: Path, cause: OSError) -> None:
        reason = cause.strerror or str(cause) or type(cause).__name__
        super().__init__(
            f"could not save {path}: {reason}; {path.name} was not replaced"
        )
        self.errno = cause.errno


@dataclass(frozen=True)
class FileDigest:
    bytes: int
    sha256: str


class HashingWriter:
    """A write-only file wrapper that hashes and counts every byte on its way to
    disk.

    torch.save only calls write() and flush() on a file object and never seeks
    back, so the digest of the bytes passed through here is the digest of the
    file: no second read pass.

    On a fast disk SHA-256 is about as slow as the durable write itself, so
    hashing in line would nearly double a save. A large write is hashed by a
    helper thread while this one copies it into the file (both release the
    GIL), and the bytes written so far go to the disk in the background
    (fdatasync), so the final fsync has little left to wait for. Use it in a
    `with` block: leaving it waits for the helpers and raises a background
    sync's error.
    """

    # smaller writes are hashed inline: a hand-off would cost more
    PARALLEL_MIN = 256 * 1024

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._sha256 = hashlib.sha256()
        self._bytes = 0
        # why a write failed: torch.save reports it vaguely
        self.error: OSError | None = None
        # started by the first large write
        self._helpers: ThreadPoolExecutor | None = None
        self._syncing: Future[None] | None = None

    # --8<-- [start:hashing_writer]
    def write(self, data: bytes) -> int:
        self._bytes += len(data)
        try:
            if len(data) < self.PARALLEL_MIN:
                self._sha256.update(data)
                return self._file.write(data)
            return self._write_large(data)
        except OSError as err:
            self.error = err
            raise

    def _write_large(self, data: bytes) -> int:
        if self._helpers is None:
            self._helpers = ThreadPoolExecutor(
                max_workers=2, thread_name_prefix="checkpoint"
            )
        hashing = self._helpers.submit(self._sha256.update, data)
        try:
            written = self._file.write(data)
        finally:
            # torch may free `data` once write() returns: the hash is done first
            hashing.result()
        if self._syncing is None or self._syncing.done():
            if self._syncing is not None:
                # a failed background sync must not go unnoticed
                self._syncing.result()
            self._file.flush()
            self._syncing = self._helpers.submit(fdatasync, self._file.fileno())
        return written

    # --8<-- [end:hashing_writer]

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        """Wait for the helper threads; raise the background sync's error, if it
        had one."""
        helpers, syncing, self._helpers, self._syncing = (
            self._helpers,
            self._syncing,
            None,
            None,
        )
        if helpers is None:
            return
        try:
            if syncing is not None:
                syncing.result()
        except OSError as err:
            self.error = err
            raise
        finally:
            helpers.shutdown()

    def __enter__(self) -> HashingWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, *rest: object
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            # the error already on its way says more
            with contextlib.suppress(OSError):
                self.close()

    def digest(self) -> FileDigest:
        return FileDigest(self._bytes, self._sha256.hexdigest())


def fdatasync(fd: int) -> None:
    """Push a file's written bytes to the disk (fsync where there is no
    fdatasync, as on macOS)."""
    getattr(os, "fdatasync", os.fsync)(fd)


def temp_path(path: Path) -> Path:
    """Same folder as the target, so the final os.replace is a rename on one
    filesystem."""
    return path.with_name(path.name + TEMP_SUFFIX)


def fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable: the directory entry lives in the
    folder, not the file."""
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as err:
        # a few filesystems cannot fsync a directory; nothing more to do there
        if err.errno != errno.EINVAL:
            # name the folder
            raise OSError(err.errno, err.strerror, os.fspath(folder)) from err
    finally:
        os.close(fd)


# --8<-- [start:atomic_save]
def atomic_save(obj: Any, path: str | os.PathLike[str]) -> FileDigest:
    """torch.save `obj` so that `path` holds either the old file or the complete
    new one.

    Returns the size and SHA-256 of the bytes written, computed while writing
    them. A failing disk raises SaveError, which names the file and the cause;
    `path` is then left as it was.
    """
    path = Path(path)
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as f, HashingWriter(f) as writer:
            torch.save(obj, writer)
            f.flush()
            # the bytes are on disk before any name points at them
            os.fsync(f.fileno())
        # atomic on POSIX: readers see the old file or the new one
        os.replace(tmp, path)
    except OSError as err:
        # a full disk, a failed fsync or rename: say which file, and why
        raise SaveError(path, err) from err
    except RuntimeError:
        # torch.save reports a failed write as "unexpected pos ..."
        if writer.error is None:
            # not the disk: torch's own message says what could not be saved
            raise
        raise SaveError(path, writer.error) from writer.error
    finally:
        # after a failure; after success it is already gone
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)  # the rename itself survives a power cut
    return writer.digest()


# --8<-- [end:atomic_save]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """The same write-fsync-rename-fsync sequence for a small file (the
    manifest)."""
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        raise SaveError(path, err) from err
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def manifest_path(path: str | os.PathLike[str]) -> Path:
    """`last.pt` → `last.json`."""
    return Path(path).with_suffix(".json")


def versions() -> dict[str, str]:
    from resume_lab import __version__

    # str(): torch.__version__ is a TorchVersion, a class the restricted
    # unpickler refuses.
    return {
        "resume_lab": __version__,
        "torch": str(torch.__version__),
        "numpy": str(np.__version__),
        "python": platform.python_version(),
    }


# --8<-- [start:manifest]
def save_checkpoint(
    state: dict[str, Any],
    path: str | os.PathLike[str],
    *,
    step: int,
    config: dict[str, Any],
) -> dict[str, Any]:
    """atomic_save `state`, then write the manifest beside it (itself
    atomically).

    The manifest goes second, so it never describes bytes that are not on disk
    yet. A process killed between the two renames leaves an old manifest beside
    a new file: verify() then refuses the pair, it never trusts it.
    """
    path = Path(path)
    digest = atomic_save(state, path)
    manifest = {
        "format": MANIFEST_FORMAT,
        "file": path.name,
        "bytes": digest.bytes,
        "sha256": digest.sha256,
        "step": step,
        "config": config,
        "versions": versions(),
        # bitwise resume holds for the same thread count
        "threads": torch.get_num_threads(),
        "saved_at": datetime.datetime.now(datetime.UTC).isoformat(
            timespec="seconds"
        ),
    }
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(manifest_path(path), text.encode("utf8"))
    return manifest


# --8<-- [end:manifest]


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of checkpoint `path`, checked for shape only (not yet
    against the file)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    beside = manifest_path(path)
    if not beside.is_file():
        raise CheckpointError(
            f"{path}: its manifest {beside.name} is missing; "
            "refusing to load a checkpoint that cannot be verified"
        )
    try:
        manifest = json.loads(beside.read_text("utf8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(
            f"{path}: its manifest {beside.name} is not valid JSON ({err})"
        ) from None
    missing = [
        key
        for key in REQUIRED_MANIFEST_KEYS
        if not isinstance(manifest, dict) or key not in manifest
    ]
    if missing:
        raise CheckpointError(
            f"{path}: its manifest {beside.name} lacks {', '.join(missing)}; "
            "it was not written by this lab"
        )
    return manifest


def file_digest(path: str | os.PathLike[str]) -> FileDigest:
    """Size and SHA-256 of a file, read in blocks."""
    sha256 = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha256.update(block)
            size += len(block)
    return FileDigest(size, sha256.hexdigest())


def _check(
    path: Path, manifest: dict[str, Any], size: int, sha256: str
) -> None:
    if size != manifest["bytes"] or sha256 != manifest["sha256"]:
        raise CheckpointError(
            f"{path} does not match {manifest_path(path).name}: "
            f"expected {manifest['bytes']} bytes "
            f"with sha256 {manifest['sha256']}, "
            f"found {size} bytes with sha256 {sha256}; "
            "the file is damaged or was changed after it was saved"
        )


# --8<-- [start:verify]
def verify(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Check size and SHA-256 against the manifest, without unpickling anything.

    Returns the manifest; raises CheckpointError naming the file and both
    digests.
    """
    path = Path(path)
    manifest = read_manifest(path)
    sha256 = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha256.update(block)
    _check(path, manifest, path.stat().st_size, sha256.hexdigest())
    return manifest


# --8<-- [end:verify]


def _first_line(err: Exception) -> str:
    """torch's unpickling errors are paragraphs with ANSI codes; keep the line
    that says why."""
    lines = [
        re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        for line in str(err).splitlines()
    ]
    reason = next(
        (
            line
            for line in lines
            if "Unsupported" in line or "unsupported" in line
        ),
        None,
    )
    return reason or next((line for line in lines if line), type(err).__name__)


def _check_contents(path: Path, state: Any, manifest: dict[str, Any]) -> None:
    """A training checkpoint must say what its manifest says (step and
    configuration)."""
    if not (isinstance(state, dict) and keys.STEP in state):
        # a flat state_dict (final.pt): nothing beyond the digest to compare
        return
    for key in (keys.STEP, keys.CONFIG):
        if state.get(key) != manifest[key]:
            raise CheckpointError(
                f"{path}: the manifest's {key!r} ({manifest[key]!r}) "
                f"does not match the checkpoint's ({state.get(key)!r})"
            )


# --8<-- [start:load_checkpoint]
def load_checkpoint(
    path: str | os.PathLike[str],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(state, manifest): verified first, then loaded with the restricted
    unpickler.

    The bytes are read once, so the bytes that were hashed are the bytes that
    are unpickled. weights_only=True builds only tensors, containers and
    primitives: no allowlist needed, because everything the lab saves is one of
    those.
    """
    path = Path(path)
    manifest = read_manifest(path)
    data = path.read_bytes()
    _check(path, manifest, len(data), hashlib.sha256(data).hexdigest())
    try:
        state = torch.load(
            io.BytesIO(data), weights_only=True, map_location="cpu"
        )
    except (pickle.UnpicklingError, RuntimeError) as err:
        # a digest only proves "unchanged"
        raise CheckpointError(
            f"{path}: matches its manifest but cannot be loaded safely: "
            f"{_first_line(err)}"
        ) from None
    _check_contents(path, state, manifest)
    return state, manifest


# --8<-- [end:load_checkpoint]


def remove_stale_temp_files(folder: str | os.PathLike[str]) -> list[Path]:
    """Delete `*.pt.tmp` / `*.json.tmp` left by a save that was killed (they are
    never loaded)."""
    stale = sorted(Path(folder).glob(f"*.pt{TEMP_SUFFIX}")) + sorted(
        Path(folder).glob(f"*.json{TEMP_SUFFIX}")
    )
    for tmp in stale:
        tmp.unlink(missing_ok=True)
    return stale
