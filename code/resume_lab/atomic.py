"""Durable writes: a file's bytes reach the disk before any name points at
them, and a name changes in one atomic step (rename), made durable by syncing
the folder."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path
from typing import Any

import torch

from resume_lab.hashing import DEFAULT_HASH, FileDigest, HashingWriter
from resume_lab.run_files import TEMP_SUFFIX


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


# --8<-- [start:write_synced]
def write_synced(
    obj: Any, path: Path, algorithm: str = DEFAULT_HASH
) -> FileDigest:
    """torch.save `obj` to a new file and fsync it; return its size and digest,
    computed on the way to the disk."""
    with open(path, "xb") as f, HashingWriter(f, algorithm) as writer:
        try:
            # torch.save needs only write() and flush()
            torch.save(obj, writer)  # type: ignore[arg-type]
        except RuntimeError:
            # torch.save reports a failed write as "unexpected pos ..."
            if writer.error is None:
                raise  # not the disk: torch's message says what failed
            raise writer.error from None
        f.flush()
        os.fsync(f.fileno())
    return writer.digest()


# --8<-- [end:write_synced]


# --8<-- [start:atomic_save]
def atomic_save(
    obj: Any, path: str | os.PathLike[str], algorithm: str = DEFAULT_HASH
) -> FileDigest:
    """torch.save `obj` so that `path` holds either the old file or the complete
    new one.

    Returns the size and digest of the bytes written, computed while writing
    them. A failing write, file fsync or rename raises SaveError, which names
    the file and the cause; `path` is then left as it was. A failing fsync of
    the folder, after the rename, raises fsync_dir's OSError: the new file is
    already in place.
    """
    path = Path(path)
    tmp = temp_path(path)
    tmp.unlink(missing_ok=True)  # left by a save that was killed
    try:
        # the bytes are on disk before any name points at them
        digest = write_synced(obj, tmp, algorithm)
        # atomic on POSIX: readers see the old file or the new one
        os.replace(tmp, path)
    except OSError as err:
        # a full disk, a failed fsync or rename: say which file, and why
        raise SaveError(path, err) from err
    finally:
        # after a failure; after success it is already gone
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)  # the rename itself survives a power cut
    return digest


# --8<-- [end:atomic_save]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """The same write-fsync-rename-fsync sequence for a small file."""
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


# Linux's renameat2(2) flag; the call swaps two names in one atomic step.
RENAME_EXCHANGE = 2
AT_FDCWD = -100
# errors that mean "this system or filesystem cannot exchange", not a fault
NO_EXCHANGE = {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP}


def exchange(a: Path, b: Path) -> bool:
    """Swap the directory entries `a` and `b` in one atomic step: at every
    moment each name names a whole directory. False where the system has no
    such call (not Linux, an old kernel, a filesystem without it): the
    caller then needs another way."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    flags = RENAME_EXCHANGE
    status = renameat2(
        AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), flags
    )
    if status == 0:
        return True
    code = ctypes.get_errno()
    if code in NO_EXCHANGE:
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))
