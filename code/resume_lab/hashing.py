"""Content hashes: computed while a file is written, or streamed from disk.

Two algorithms are accepted everywhere a digest is checked. BLAKE3 is the
default for new checkpoints because it is faster than SHA-256 (the
performance page measures both, on this machine); SHA-256 stays readable for
manifests that name it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import blake3

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from 3.12

DEFAULT_HASH = "blake3"


class Hasher(Protocol):
    def update(self, data: Buffer, /) -> Any: ...
    def hexdigest(self) -> str: ...


HASHES: dict[str, Callable[[], Hasher]] = {
    "blake3": blake3.blake3,
    "sha256": hashlib.sha256,
}


def new_hasher(algorithm: str) -> Hasher:
    try:
        return HASHES[algorithm]()
    except KeyError:
        raise ValueError(
            f"unknown hash algorithm {algorithm!r}; "
            f"this lab reads {', '.join(sorted(HASHES))}"
        ) from None


@dataclass(frozen=True)
class FileDigest:
    bytes: int
    digest: str


def fdatasync(fd: int) -> None:
    """Push a file's written bytes to the disk (fsync where there is no
    fdatasync, as on macOS)."""
    getattr(os, "fdatasync", os.fsync)(fd)


# a block read into one reused buffer: streaming keeps no second copy
READ_BLOCK = 8 << 20


def stream_digest(file: BinaryIO, algorithm: str) -> FileDigest:
    """Size and digest of an open file from its current position to the end."""
    hasher = new_hasher(algorithm)
    buffer = bytearray(READ_BLOCK)
    view = memoryview(buffer)
    size = 0
    while n := file.readinto(view):  # type: ignore[attr-defined]
        hasher.update(view[:n])
        size += n
    return FileDigest(size, hasher.hexdigest())


def file_digest(path: str | os.PathLike[str], algorithm: str) -> FileDigest:
    with open(path, "rb") as f:
        return stream_digest(f, algorithm)


class HashingWriter:
    """A write-only file wrapper that hashes and counts every byte on its way to
    disk.

    torch.save only calls write() and flush() on a file object and never seeks
    back, so the digest of the bytes passed through here is the digest of the
    file: no second read pass.

    A large write is hashed by a helper thread while this one copies it into
    the file (both release the GIL), and the bytes written so far go to the
    disk in the background (fdatasync), so the final fsync has little left to
    wait for. Use it in a `with` block: leaving it waits for the helpers and
    raises a background sync's error.
    """

    # smaller writes are hashed inline: a hand-off would cost more
    PARALLEL_MIN = 256 * 1024

    def __init__(self, file: BinaryIO, algorithm: str = DEFAULT_HASH) -> None:
        self._file = file
        self._hasher = new_hasher(algorithm)
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
                self._hasher.update(data)
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
        hashing = self._helpers.submit(self._hasher.update, data)
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
        helpers, syncing = self._helpers, self._syncing
        self._helpers = self._syncing = None
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
        return FileDigest(self._bytes, self._hasher.hexdigest())


def digest_bytes(data: bytes, algorithm: str = DEFAULT_HASH) -> str:
    hasher = new_hasher(algorithm)
    hasher.update(data)
    return hasher.hexdigest()
