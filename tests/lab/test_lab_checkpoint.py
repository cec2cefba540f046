"""A checkpoint directory: committed by one rename, verified file by file before anything is
unpickled, and named by pointers that change in one step."""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest
import torch

from resume_lab import atomic, checkpoint, run_folder
from resume_lab.atomic import SaveError
from resume_lab.checkpoint import (
    MANIFEST,
    STATE_FILE,
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
    verify,
)
from resume_lab.hashing import file_digest
from resume_lab.manifest import SEAL, seal_of
from resume_lab.run_folder import BEST, LAST, clean_start, committed, point, pointed, rotate

STATE = {"step": 3, "config": {"lr": 0.1}, "weights": torch.arange(1000, dtype=torch.float32)}


class ExplodesWhenPickled:
    def __reduce__(self):
        raise RuntimeError("boom: pickling failed halfway")


def save(folder: Path, state: dict = STATE, name: str = "step-000003", **kw) -> Path:
    return save_checkpoint(
        {STATE_FILE: state}, folder, name, step=state["step"], config=state["config"], **kw
    )


def tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry below `folder`: file contents, and symlink targets."""
    entries: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            entries[name] = f"-> {os.readlink(path)}"
        elif path.is_file():
            entries[name] = path.read_bytes()
    return entries


@pytest.fixture
def unpickling_forbidden(monkeypatch: pytest.MonkeyPatch):
    """Fail the test if anything is unpickled: rejection must come from the digests alone."""

    def forbidden(*args, **kwargs):
        raise AssertionError("unpickled a checkpoint that had not been verified")

    monkeypatch.setattr(torch, "load", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)


def test_a_checkpoint_is_a_directory_with_a_manifest(tmp_path: Path):
    path = save(tmp_path)
    assert path == tmp_path / "step-000003"
    assert sorted(p.name for p in path.iterdir()) == [MANIFEST, STATE_FILE]
    manifest = json.loads((path / MANIFEST).read_text("utf8"))
    assert manifest["format"] == 2 and manifest["step"] == 3 and manifest["hash"] == "blake3"
    digest = file_digest(path / STATE_FILE, "blake3")
    assert manifest["files"] == {STATE_FILE: {"bytes": digest.bytes, "digest": digest.digest}}
    assert manifest["versions"]["torch"] == str(torch.__version__)
    state, loaded = load_checkpoint(path)
    assert torch.equal(state["weights"], STATE["weights"]) and loaded == manifest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000003"]  # nothing temporary


def test_the_commit_order_is_files_manifest_directory_rename_parent(tmp_path: Path, monkeypatch):
    calls: list[str] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd):
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            same = status.st_ino == tmp_path.stat().st_ino
            calls.append("fsync parent" if same else "fsync checkpoint directory")
        else:
            name = next(
                p.name
                for p in tmp_path.rglob("*")
                if p.is_file() and p.stat().st_ino == status.st_ino
            )
            calls.append(f"fsync {name}")
        real_fsync(fd)

    def rename(src, dst):
        calls.append(f"rename {Path(src).name.split('-')[0]}- -> {Path(dst).name}")
        real_rename(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    save(tmp_path)
    assert calls == [
        f"fsync {STATE_FILE}",
        f"fsync {MANIFEST}",
        "fsync checkpoint directory",
        "rename tmp- -> step-000003",
        "fsync parent",
    ]


def test_sha256_manifests_verify_too(tmp_path: Path):
    path = save(tmp_path, algorithm="sha256")
    manifest = verify(path)
    assert manifest["hash"] == "sha256"
    assert (
        manifest["files"][STATE_FILE]["digest"] == file_digest(path / STATE_FILE, "sha256").digest
    )


def test_a_failed_pickle_leaves_the_folder_as_it_was(tmp_path: Path):
    save(tmp_path)
    before = tree(tmp_path)
    broken = {**STATE, "step": 4, "callback": ExplodesWhenPickled()}
    with pytest.raises(RuntimeError, match="boom"):
        save(tmp_path, broken, name="step-000004")
    assert tree(tmp_path) == before  # byte-identical, no temporary directory


class FullDisk:
    """A file that takes a kilobyte, then fails the way a full disk does."""

    def __init__(self, file):
        self.file, self.room = file, 1024

    def write(self, data):
        if len(data) > self.room:
            raise OSError(28, "No space left on device")
        self.room -= len(data)
        return self.file.write(data)

    def __getattr__(self, name):
        return getattr(self.file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()


def test_failure_mid_write_leaves_previous_checkpoint_untouched(tmp_path: Path, monkeypatch):
    """Like a full disk: the write fails after part of the file is out."""
    save(tmp_path)
    before = tree(tmp_path)
    real_open = open
    monkeypatch.setattr(atomic, "open", lambda *a: FullDisk(real_open(*a)), raising=False)
    with pytest.raises(SaveError, match="No space left on device") as caught:
        save(tmp_path, {**STATE, "step": 4}, name="step-000004")
    assert caught.value.errno == 28
    assert tree(tmp_path) == before


def test_failed_rename_leaves_no_temp_file(tmp_path: Path, monkeypatch):
    save(tmp_path)
    before = tree(tmp_path)

    def refuse(*args):
        raise PermissionError(13, "rename refused")

    monkeypatch.setattr(checkpoint.os, "rename", refuse)
    with pytest.raises(SaveError, match=r"step-000004: rename refused; step-000004 was") as e:
        save(tmp_path, {**STATE, "step": 4}, name="step-000004")
    assert isinstance(e.value.__cause__, PermissionError)
    assert tree(tmp_path) == before


def test_atomic_save_of_one_file_keeps_the_old_one_on_a_failed_rename(tmp_path, monkeypatch):
    path = tmp_path / "final.pt"
    atomic.atomic_save({"w": torch.ones(3)}, path)
    before = path.read_bytes()
    monkeypatch.setattr(atomic.os, "replace", lambda *a: (_ for _ in ()).throw(OSError(5, "EIO")))
    with pytest.raises(SaveError, match=r"final\.pt was not replaced"):
        atomic.atomic_save({"w": torch.zeros(3)}, path)
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["final.pt"]


# --- what verify refuses, before anything is unpickled ----------------------------------------


def flip_state_bit(path: Path) -> None:
    data = bytearray((path / STATE_FILE).read_bytes())
    data[len(data) // 2] ^= 0x01
    (path / STATE_FILE).write_bytes(bytes(data))


def flip_manifest_bit(path: Path) -> None:
    data = bytearray((path / MANIFEST).read_bytes())
    at = data.index(b'"digest": "') + 12  # a character of the digest itself
    data[at] ^= 0x01
    (path / MANIFEST).write_bytes(bytes(data))


def truncate(path: Path) -> None:
    (path / STATE_FILE).write_bytes((path / STATE_FILE).read_bytes()[:-100])


def remove_state(path: Path) -> None:
    (path / STATE_FILE).unlink()


def add_file(path: Path) -> None:
    (path / "extra.pt").write_bytes(b"not part of the checkpoint")


def edit_manifest(path: Path, *, reseal: bool = False, **changes) -> None:
    """Change the state file's entry; `reseal` also recomputes the manifest's own hash, as a
    forger who knows the format would."""
    manifest = json.loads((path / MANIFEST).read_text("utf8"))
    manifest["files"][STATE_FILE].update(changes)
    if reseal:
        manifest[SEAL] = seal_of(manifest)
    (path / MANIFEST).write_text(json.dumps(manifest), "utf8")


SEALED = r"manifest\.json: expected blake3 \w+ over its content, found \w+; the manifest was"

DAMAGE = {
    "bit flip in state.pt": (
        flip_state_bit,
        r"state\.pt: expected \d+ bytes with blake3 \w+, found",
    ),
    "bit flip in the manifest": (flip_manifest_bit, SEALED),
    "truncation": (truncate, r"state\.pt: expected (\d+) bytes .* found (?!\1)\d+ bytes"),
    "missing file": (remove_state, r"state\.pt: expected \d+ bytes .* found no such file"),
    "added file": (add_file, r"extra\.pt: expected no such file .* found 26 bytes"),
    "edited digest": (lambda p: edit_manifest(p, digest="0" * 64), SEALED),
    "edited size": (lambda p: edit_manifest(p, bytes=1), SEALED),
    "resealed edit": (
        lambda p: edit_manifest(p, digest="0" * 64, reseal=True),
        r"state\.pt: expected \d+ bytes with blake3 0{64}, found",
    ),
    "file entry without its size": (
        lambda p: edit_manifest(p, bytes=None, reseal=True),
        "its file list is damaged",
    ),
    "missing manifest": (lambda p: (p / MANIFEST).unlink(), "not a committed checkpoint"),
    "garbled manifest": (lambda p: (p / MANIFEST).write_text("{not json"), "not valid JSON"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_checkpoint_rejected_before_unpickling(
    tmp_path: Path, damage, unpickling_forbidden
):
    path = save(tmp_path)
    point(tmp_path, LAST, path)
    harm, message = DAMAGE[damage]
    harm(path)
    for target in (path, tmp_path / LAST, tmp_path):  # directory, pointer, run folder
        for check in (verify, load_checkpoint):
            with pytest.raises(CheckpointError, match=message) as caught:
                check(target)
            assert "\n" not in str(caught.value)  # one line


def test_manifest_must_match_contents(tmp_path: Path):
    """A manifest edited and resealed (its files' digests right, its step wrong) is caught
    after a safe load."""
    path = save(tmp_path)
    manifest = json.loads((path / MANIFEST).read_text("utf8"))
    forged = {**manifest, "step": 99}
    forged[SEAL] = seal_of(forged)  # resealed, as a forger who knows the format would
    (path / MANIFEST).write_text(json.dumps(forged), "utf8")
    verify(path)  # the files still match, and so does the manifest's own hash
    with pytest.raises(CheckpointError, match="'step'"):
        load_checkpoint(path)


def test_verified_but_unsafe_pickle_is_refused(tmp_path: Path):
    """A digest proves 'unchanged', not 'safe': a forged file with a matching manifest still
    goes through the restricted unpickler, which refuses it without running anything."""
    path = tmp_path / "step-000001"
    path.mkdir()
    torch.save({"step": 1, "payload": ExplodesWhenPickled}, path / STATE_FILE)  # a GLOBAL
    digest = file_digest(path / STATE_FILE, "blake3")
    manifest = checkpoint.make_manifest({STATE_FILE: digest}, step=1, config={}, algorithm="blake3")
    (path / MANIFEST).write_text(json.dumps(manifest), "utf8")
    with pytest.raises(CheckpointError, match="cannot be loaded safely"):
        load_checkpoint(path)


def test_the_hashed_handle_is_the_unpickled_one(tmp_path: Path, monkeypatch):
    """Renaming another file over state.pt after the check changes nothing that is loaded."""
    path = save(tmp_path)
    other = save(tmp_path, {**STATE, "weights": torch.zeros(1000)}, name="other")
    real_verify = checkpoint.verify

    def verify_then_swap(*args, **kwargs):
        manifest = real_verify(*args, **kwargs)
        os.replace(other / STATE_FILE, path / STATE_FILE)
        return manifest

    monkeypatch.setattr(checkpoint, "verify", verify_then_swap)
    state, _ = load_checkpoint(path)
    assert torch.equal(state["weights"], STATE["weights"])


# --- pointers, start-up, rotation ---------------------------------------------------------------


def test_a_pointer_is_a_relative_symlink_swapped_by_one_rename(tmp_path: Path, monkeypatch):
    first, second = save(tmp_path), save(tmp_path, {**STATE, "step": 4}, name="step-000004")
    point(tmp_path, LAST, first)
    renames: list[tuple[str, str]] = []
    real_replace = os.replace
    monkeypatch.setattr(
        os,
        "replace",
        lambda s, d: (renames.append((Path(s).name, Path(d).name)), real_replace(s, d)),
    )
    point(tmp_path, LAST, second)
    assert len(renames) == 1 and renames[0][1] == LAST and renames[0][0].startswith("last.tmp-")
    assert os.readlink(tmp_path / LAST) == "step-000004"  # relative: the folder can move
    assert pointed(tmp_path, LAST) == second and verify(tmp_path)["step"] == 4


def test_a_copied_checkpoint_still_verifies(tmp_path: Path):
    run = tmp_path / "run"
    run.mkdir()
    point(run, LAST, save(run))
    subprocess.run(["cp", "-rL", str(run / LAST), str(tmp_path / "copied")], check=True)
    assert verify(tmp_path / "copied")["step"] == 3
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(run, arcname="run")
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as tar:
        tar.extractall(tmp_path / "untarred", filter="tar")
    assert verify(tmp_path / "untarred" / "run")["step"] == 3  # the pointer travels too
    shutil.move(run, tmp_path / "moved")
    assert verify(tmp_path / "moved" / LAST)["step"] == 3


def test_a_dangling_pointer_is_named(tmp_path: Path):
    (tmp_path / LAST).symlink_to("step-000009")
    with pytest.raises(CheckpointError, match="points to step-000009, which does not exist"):
        verify(tmp_path)


def test_clean_start_removes_only_what_a_killed_save_left(tmp_path: Path):
    kept = save(tmp_path)
    point(tmp_path, LAST, kept)
    (tmp_path / "tmp-step-000004-0a1b2c3d").mkdir()
    (tmp_path / "tmp-step-000004-0a1b2c3d" / STATE_FILE).write_bytes(b"half")
    (tmp_path / "last.tmp-0a1b2c3d").symlink_to("step-000004")
    (tmp_path / "step-000002").mkdir()  # rotation killed after the manifest went
    (tmp_path / "step-000002" / STATE_FILE).write_bytes(b"whole, but no manifest")
    (tmp_path / "notes.tmp").write_bytes(b"not ours")
    removed = clean_start(tmp_path)
    assert len(removed) == 3 and all("left by an interrupted save" in line for line in removed)
    assert sorted(os.listdir(tmp_path)) == ["last", "notes.tmp", "step-000003"]
    assert verify(tmp_path / LAST)["step"] == 3


def test_rotation_keeps_the_newest_and_what_pointers_name(tmp_path: Path, monkeypatch):
    dirs = [save(tmp_path, {**STATE, "step": s}, name=f"step-{s:06d}") for s in (1, 2, 3, 4, 5)]
    point(tmp_path, BEST, dirs[0])
    point(tmp_path, LAST, dirs[4])
    deleted: list[str] = []
    real_unlink = os.unlink
    monkeypatch.setattr(
        os, "unlink", lambda p, *a, **k: (deleted.append(Path(p).name), real_unlink(p, *a, **k))
    )
    removed = rotate(tmp_path, keep=2)
    assert [p.name for p in removed] == ["step-000002", "step-000003"]
    assert [p.name for p in committed(tmp_path)] == ["step-000001", "step-000004", "step-000005"]
    assert deleted[0] == MANIFEST  # the manifest before anything else


def test_an_identical_recommit_keeps_the_existing_directory(tmp_path: Path):
    first = save(tmp_path)
    inode = first.stat().st_ino
    assert save(tmp_path) == first and first.stat().st_ino == inode  # kept, not rewritten
    changed = save(tmp_path, {**STATE, "weights": torch.zeros(1000)})
    assert changed.stat().st_ino != inode  # replaced
    assert torch.equal(load_checkpoint(changed)[0]["weights"], torch.zeros(1000))
    assert sorted(os.listdir(tmp_path)) == ["step-000003"]
    run_folder.clean_start(tmp_path)  # nothing left to clean
    assert sorted(os.listdir(tmp_path)) == ["step-000003"]


def test_a_replaced_checkpoint_is_swapped_in_one_step_so_best_never_dangles(
    tmp_path: Path, monkeypatch
):
    first = save(tmp_path)
    point(tmp_path, BEST, first)  # a best that names the step being replaced
    seen = []
    real_exchange = checkpoint.exchange

    def exchange_then_die(a: Path, b: Path) -> bool:
        assert real_exchange(a, b)  # this machine (Linux) exchanges atomically
        seen.append(verify(tmp_path / BEST)["files"])  # best names a whole checkpoint
        raise KeyboardInterrupt  # a kill right after the swap

    monkeypatch.setattr(checkpoint, "exchange", exchange_then_die)
    with pytest.raises(KeyboardInterrupt):
        save(tmp_path, {**STATE, "weights": torch.zeros(1000)})
    assert seen and torch.equal(load_checkpoint(tmp_path / BEST)[0]["weights"], torch.zeros(1000))
    clean_start(tmp_path)  # the replaced directory, if a kill left it under a temporary name
    assert sorted(os.listdir(tmp_path)) == [BEST, "step-000003"]


def test_without_an_atomic_exchange_a_replace_takes_two_renames(tmp_path: Path, monkeypatch):
    save(tmp_path)
    monkeypatch.setattr(checkpoint, "exchange", lambda a, b: False)
    changed = save(tmp_path, {**STATE, "weights": torch.zeros(1000)})
    assert torch.equal(load_checkpoint(changed)[0]["weights"], torch.zeros(1000))
    assert sorted(os.listdir(tmp_path)) == ["step-000003"]


def test_exchange_swaps_two_directories(tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "from-a").touch()
    assert atomic.exchange(tmp_path / "a", tmp_path / "b")
    assert os.listdir(tmp_path / "b") == ["from-a"] and os.listdir(tmp_path / "a") == []
    with pytest.raises(FileNotFoundError):
        atomic.exchange(tmp_path / "a", tmp_path / "missing")
