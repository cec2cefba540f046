"""A checkpoint is a directory, committed in one step: its manifest (every file
with its size and content hash) is written last, and a rename makes the whole
directory appear at once. Nothing is unpickled before the manifest vouches
for every byte.

One commit serves every store: save_checkpoint's files (one process's
state.pt) and the pieces DCP wrote for W processes alike."""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import torch

from resume_lab import state_keys as keys
from resume_lab.atomic import (
    SaveError,
    exchange,
    fsync_dir,
    write_synced,
)
from resume_lab.hashing import (
    DEFAULT_HASH,
    FileDigest,
    file_digest,
    stream_digest,
)
from resume_lab.manifest import (
    CheckpointError,
    make_manifest,
    manifest_of,
    read_manifest,
    write_manifest,
)
from resume_lab.run_files import (
    LAST,
    MANIFEST,
    STATE_FILE,
    TEMP_PREFIX,
    temporary_name,
)


# --8<-- [start:commit]
def save_checkpoint(
    files: dict[str, Any],
    folder: str | os.PathLike[str],
    name: str,
    *,
    step: int,
    config: dict[str, Any],
    algorithm: str = DEFAULT_HASH,
) -> Path:
    """torch.save each of `files` into the new checkpoint directory
    `folder/name`, which appears whole or not at all. Returns its path."""
    folder = Path(folder)
    tmp = folder / temporary_name(name)  # beside the target, never it
    with discarded_on_failure(tmp, folder / name):
        tmp.mkdir()
        digests = {
            filename: write_synced(obj, tmp / filename, algorithm)
            for filename, obj in files.items()
        }
    return commit(
        tmp,
        folder / name,
        digests,
        step=step,
        config=config,
        algorithm=algorithm,
    )


def commit(
    tmp: Path,
    target: Path,
    digests: dict[str, FileDigest],
    *,
    step: int,
    config: dict[str, Any],
    algorithm: str = DEFAULT_HASH,
    volatile: frozenset[str] = frozenset(),
) -> Path:
    """Make the files written into `tmp` the checkpoint `target`: the
    manifest last, then one rename. `digests` holds the files hashed while
    they were written; any other (DCP's pieces) is hashed here, once."""
    with discarded_on_failure(tmp, target):
        unhashed = sorted(p for p in tmp.iterdir() if p.name not in digests)
        digests = {
            **digests,
            **{p.name: file_digest(p, algorithm) for p in unhashed},
        }
        manifest = make_manifest(
            digests, step=step, config=config, algorithm=algorithm
        )
        write_manifest(tmp / MANIFEST, manifest)  # last: the commit record
        fsync_dir(tmp)  # the directory's entries are durable
        if target.exists():
            replace_existing(target, tmp, manifest, volatile)
        else:
            os.rename(tmp, target)  # the commit: one atomic step
        fsync_dir(target.parent)  # the commit survives a power cut
    # the copy an identical commit made redundant
    shutil.rmtree(tmp, ignore_errors=True)
    return target


# --8<-- [end:commit]


@contextlib.contextmanager
def discarded_on_failure(tmp: Path, target: Path) -> Iterator[None]:
    """A failure inside removes `tmp`, what was written of `target` so far;
    the disk's failures (full, read-only, I/O) come out as SaveError."""
    try:
        yield
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError) and not isinstance(err, SaveError):
            raise SaveError(target, err) from err
        raise


def replace_existing(
    target: Path,
    new: Path,
    manifest: dict[str, Any],
    volatile: frozenset[str] = frozenset(),
) -> None:
    """A checkpoint of this step was committed by a run that was then killed
    before it moved `last` on. A bitwise resume reproduces it byte for byte
    (all but `volatile`, files that differ on every save): keep it.
    Anything else (a resume that was not bitwise, say with another thread
    count) is replaced by one atomic exchange of the two directories, so a
    pointer that names this step (`best` may) never dangles. Where the
    system cannot exchange, two renames: a kill between them leaves no
    directory of this step, and a `best` naming it dangles until the step
    is committed again."""

    def kept(files: dict[str, Any]) -> dict[str, Any]:
        return {n: e for n, e in files.items() if n not in volatile}

    try:
        if kept(read_manifest(target)["files"]) == kept(manifest["files"]):
            return
    except CheckpointError:
        pass
    if exchange(new, target):
        shutil.rmtree(new, ignore_errors=True)  # now the replaced one
        return
    aside = target.with_name(f"{TEMP_PREFIX}{target.name}-replaced")
    shutil.rmtree(aside, ignore_errors=True)
    os.rename(target, aside)
    os.rename(new, target)
    shutil.rmtree(aside, ignore_errors=True)


# --- reading ---------------------------------------------------------------


def locate(path: str | os.PathLike[str]) -> Path:
    """The checkpoint that `path` names: a checkpoint directory, a pointer to
    one (`run/last`), a run folder (its `last`), or a single file with a
    `.json` manifest beside it (`final.pt`)."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise CheckpointError(
            f"{path} points to {os.readlink(path)}, which does not exist"
        )
    if path.is_dir() and not (path / MANIFEST).exists():
        last = path / LAST
        if last.is_symlink() or last.exists():
            return locate(last)  # a run folder
    if not path.exists():
        raise CheckpointError(f"{path}: no such checkpoint")
    if path.is_file() and (path.parent / MANIFEST).is_file():
        return path.parent.resolve()  # a file of a checkpoint: all of it
    takes = (
        "verify takes a run folder, a pointer such as last, a checkpoint "
        "directory, or a .pt file with its .json manifest beside it"
    )
    if path.is_file() and path.suffix != ".pt":
        raise CheckpointError(f"{path}: not a checkpoint; {takes}")
    if path.is_file() and not manifest_of(path).exists():
        raise CheckpointError(
            f"{path}: no {manifest_of(path).name} beside it, so nothing "
            f"vouches for it; {takes}"
        )
    return path.resolve()


def check_file(
    path: Path, file: IO[bytes], entry: dict[str, Any], algorithm: str
) -> None:
    """Stream `file` through the hash and compare with its manifest entry."""
    found = stream_digest(file, algorithm)  # type: ignore[arg-type]
    if (found.bytes, found.digest) != (entry["bytes"], entry["digest"]):
        raise CheckpointError(
            f"{path}: expected {entry['bytes']} bytes with {algorithm} "
            f"{entry['digest']}, found {found.bytes} bytes with {algorithm} "
            f"{found.digest}; the file is damaged or was changed after it "
            "was saved"
        )


def check_listing(checkpoint: Path, manifest: dict[str, Any]) -> None:
    """Every listed file present, and nothing unlisted beside them."""
    listed = manifest["files"]
    present = {p.name for p in checkpoint.iterdir()} - {MANIFEST}
    for name in sorted(set(listed) - present):
        entry = listed[name]
        raise CheckpointError(
            f"{checkpoint / name}: expected {entry['bytes']} bytes with "
            f"{manifest['hash']} {entry['digest']}, found no such file"
        )
    for name in sorted(present - set(listed)):
        size = (checkpoint / name).stat().st_size
        raise CheckpointError(
            f"{checkpoint / name}: expected no such file (it is not in "
            f"{MANIFEST}), found {size} bytes; something was added after "
            "the checkpoint was committed"
        )


# --8<-- [start:verify]
def verify(
    path: str | os.PathLike[str],
    opened: dict[str, IO[bytes]] | None = None,
) -> dict[str, Any]:
    """Check every file against the manifest, without unpickling anything.

    `path` may be a checkpoint directory, a pointer, a run folder or a
    single-file checkpoint. `opened` maps file names to handles to hash
    instead of opening them again. Returns the manifest.
    """
    checkpoint = locate(path)
    manifest = read_manifest(checkpoint)
    if checkpoint.is_dir():
        check_listing(checkpoint, manifest)
        files = {name: checkpoint / name for name in manifest["files"]}
    else:
        files = {checkpoint.name: checkpoint}
    for name, file_path in files.items():
        entry = manifest["files"].get(name)
        if entry is None:
            raise CheckpointError(f"{file_path}: not listed in its manifest")
        handle = (opened or {}).get(name)
        if handle is not None:
            check_file(file_path, handle, entry, manifest["hash"])
            continue
        with open(file_path, "rb") as f:
            check_file(file_path, f, entry, manifest["hash"])
    return manifest


# --8<-- [end:verify]


def first_line(err: Exception) -> str:
    """torch's unpickling errors are paragraphs with ANSI codes; keep the line
    that says why."""
    lines = [
        re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        for line in str(err).splitlines()
    ]
    reason = next(
        (line for line in lines if "nsupported" in line),
        None,
    )
    return reason or next((line for line in lines if line), type(err).__name__)


def check_contents(path: Path, state: Any, manifest: dict[str, Any]) -> None:
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
    path: str | os.PathLike[str], file: str = STATE_FILE
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(state, manifest): every file verified first, then the state file
    (`file` in a checkpoint directory) loaded with the restricted unpickler.

    The state file is opened once: the handle that was hashed is the handle
    that is unpickled, so a file renamed over it in between changes nothing.
    No second copy of the tensors is made: the hash reads the file through
    one fixed-size buffer, and the tensors are read once, into the state.
    """
    checkpoint = locate(path)
    state_path = checkpoint / file if checkpoint.is_dir() else checkpoint
    with verified(checkpoint, [state_path]) as (handles, manifest):
        state = unpickle(state_path, handles[0])
    check_contents(state_path, state, manifest)
    return state, manifest


@contextlib.contextmanager
def verified(
    checkpoint: Path, paths: list[Path]
) -> Iterator[tuple[list[IO[bytes]], dict[str, Any]]]:
    """`paths` opened once, then every file of `checkpoint` checked against
    its manifest (these through their handles); yields the handles rewound
    and the manifest: what is read from them next is what was hashed."""
    with contextlib.ExitStack() as stack:
        handles: list[IO[bytes]] = []
        for path in paths:
            try:
                handles.append(stack.enter_context(open(path, "rb")))
            except FileNotFoundError:
                verify(checkpoint)  # says which file is missing, and what
                raise  # was expected
        opened = {p.name: f for p, f in zip(paths, handles, strict=True)}
        manifest = verify(checkpoint, opened=opened)
        for handle in handles:
            handle.seek(0)
        yield handles, manifest


def unpickle(path: Path, file: IO[bytes]) -> Any:
    """torch.load with the restricted unpickler, `file` already verified;
    what it refuses is a CheckpointError."""
    try:
        return torch.load(file, weights_only=True, map_location="cpu")
    except (pickle.UnpicklingError, RuntimeError) as err:
        # a digest only proves "unchanged"
        raise CheckpointError(
            f"{path}: matches its manifest but cannot be loaded "
            f"safely: {first_line(err)}"
        ) from None


# --8<-- [end:load_checkpoint]
