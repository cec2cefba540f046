"""atomic_save, the manifest, and verification before unpickling."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path

import pytest
import torch

from resume_lab import checkpoint
from resume_lab.checkpoint import (
    CheckpointError,
    atomic_save,
    load_checkpoint,
    manifest_path,
    remove_stale_temp_files,
    save_checkpoint,
    verify,
)

STATE = {"step": 3, "config": {"lr": 0.1}, "weights": torch.arange(1000, dtype=torch.float32)}


class ExplodesWhenPickled:
    def __reduce__(self):
        raise RuntimeError("boom: pickling failed halfway")


def save(path: Path, state: dict = STATE) -> dict:
    return save_checkpoint(state, path, step=state["step"], config=state["config"])


def no_temp_files(folder: Path) -> bool:
    return not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.fixture
def unpickling_forbidden(monkeypatch: pytest.MonkeyPatch):
    """Fail the test if anything is unpickled: rejection must come from the digest alone."""

    def forbidden(*args, **kwargs):
        raise AssertionError("unpickled a checkpoint that had not been verified")

    monkeypatch.setattr(torch, "load", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)


def test_atomic_save_hashes_while_writing(tmp_path: Path):
    digest = atomic_save(STATE, tmp_path / "x.pt")
    data = (tmp_path / "x.pt").read_bytes()
    assert digest.bytes == len(data)
    assert digest.sha256 == hashlib.sha256(data).hexdigest()
    assert no_temp_files(tmp_path)


def test_manifest_beside_checkpoint(tmp_path: Path):
    manifest = save(tmp_path / "last.pt")
    on_disk = json.loads((tmp_path / "last.json").read_text("utf8"))
    assert on_disk == manifest
    assert {"bytes", "sha256", "step", "versions", "config"} <= manifest.keys()
    assert manifest["bytes"] == os.path.getsize(tmp_path / "last.pt")
    assert manifest["versions"]["torch"] == str(torch.__version__)
    state, loaded_manifest = load_checkpoint(tmp_path / "last.pt")
    assert torch.equal(state["weights"], STATE["weights"]) and loaded_manifest == manifest
    assert no_temp_files(tmp_path)


def test_failed_pickle_leaves_previous_checkpoint_untouched(tmp_path: Path):
    save(tmp_path / "last.pt")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    broken = {**STATE, "step": 4, "callback": ExplodesWhenPickled()}
    with pytest.raises(RuntimeError, match="boom"):
        save(tmp_path / "last.pt", broken)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # byte-identical
    verify(tmp_path / "last.pt")


def test_failure_mid_write_leaves_previous_checkpoint_untouched(tmp_path: Path, monkeypatch):
    """Like a full disk: the write fails after part of the file is out."""
    save(tmp_path / "last.pt")
    before = (tmp_path / "last.pt").read_bytes()
    original_write = checkpoint.HashingWriter.write

    def write_then_fail(self, data):
        if self._bytes > 1000:
            raise OSError(28, "No space left on device")
        return original_write(self, data)

    monkeypatch.setattr(checkpoint.HashingWriter, "write", write_then_fail)
    # torch's C++ writer may report the failure as its own RuntimeError while unwinding.
    with pytest.raises((OSError, RuntimeError)):
        save(tmp_path / "last.pt", {**STATE, "step": 4})
    assert (tmp_path / "last.pt").read_bytes() == before
    assert no_temp_files(tmp_path)


def test_failed_rename_leaves_no_temp_file(tmp_path: Path, monkeypatch):
    save(tmp_path / "last.pt")
    before = (tmp_path / "last.pt").read_bytes()

    def refuse(*args):
        raise PermissionError("rename refused")

    monkeypatch.setattr(checkpoint.os, "replace", refuse)
    with pytest.raises(checkpoint.SaveError, match=r"last\.pt: rename refused; last\.pt was") as e:
        atomic_save({"other": torch.zeros(3)}, tmp_path / "last.pt")
    assert isinstance(e.value.__cause__, PermissionError)
    assert (tmp_path / "last.pt").read_bytes() == before
    assert no_temp_files(tmp_path)


def flip_one_bit(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-100])


def edit_manifest_digest(path: Path) -> None:
    manifest = json.loads(manifest_path(path).read_text("utf8"))
    manifest["sha256"] = "0" * 64
    manifest_path(path).write_text(json.dumps(manifest), "utf8")


def edit_manifest_size(path: Path) -> None:
    manifest = json.loads(manifest_path(path).read_text("utf8"))
    manifest["bytes"] += 1
    manifest_path(path).write_text(json.dumps(manifest), "utf8")


def delete_manifest(path: Path) -> None:
    manifest_path(path).unlink()


def garble_manifest(path: Path) -> None:
    manifest_path(path).write_text("{not json", "utf8")


DAMAGE = {
    "bit flip": (flip_one_bit, "sha256"),
    "truncation": (truncate, "bytes"),
    "edited digest": (edit_manifest_digest, "sha256 0000"),
    "edited size": (edit_manifest_size, "bytes"),
    "missing manifest": (delete_manifest, "manifest last.json is missing"),
    "garbled manifest": (garble_manifest, "last.json is not valid JSON"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_checkpoint_rejected_before_unpickling(
    tmp_path: Path, damage, unpickling_forbidden
):
    path = tmp_path / "last.pt"
    save(path)
    expected_digest = json.loads(manifest_path(path).read_text("utf8"))["sha256"]
    harm, message = DAMAGE[damage]
    harm(path)
    for check in (verify, load_checkpoint):
        with pytest.raises(CheckpointError, match=message) as caught:
            check(path)
        assert str(path) in str(caught.value)
    if damage == "bit flip":  # names the file, the expected and the actual digest
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        assert expected_digest in str(caught.value) and actual in str(caught.value)


def test_manifest_must_match_contents(tmp_path: Path):
    """A manifest whose digest is right but whose step was edited is caught after a safe load."""
    path = tmp_path / "last.pt"
    save(path)
    manifest = json.loads(manifest_path(path).read_text("utf8"))
    manifest["step"] = 99
    manifest_path(path).write_text(json.dumps(manifest), "utf8")
    verify(path)  # the digest still matches the bytes
    with pytest.raises(CheckpointError, match="'step'"):
        load_checkpoint(path)


def test_verified_but_unsafe_pickle_is_refused(tmp_path: Path):
    """A digest proves 'unchanged', not 'safe': a forged file with a matching manifest still
    goes through the restricted unpickler, which refuses it without running anything."""
    path = tmp_path / "evil.pt"
    torch.save({"step": 1, "payload": ExplodesWhenPickled}, path)  # a class: needs a GLOBAL
    data = path.read_bytes()
    manifest = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "step": 1}
    manifest_path(path).write_text(json.dumps({**manifest, "versions": {}, "config": {}}), "utf8")
    with pytest.raises(CheckpointError, match="cannot be loaded safely"):
        load_checkpoint(path)


def test_stale_temp_file_is_cleaned_and_never_loaded(tmp_path: Path):
    save(tmp_path / "last.pt")
    (tmp_path / "last.pt.tmp").write_bytes(b"half a checkpoint from a killed process")
    (tmp_path / "last.json.tmp").write_bytes(b"{")
    (tmp_path / "notes.tmp").write_bytes(b"not ours")
    state, _ = load_checkpoint(tmp_path / "last.pt")  # the stale file is ignored
    assert state["step"] == 3
    removed = remove_stale_temp_files(tmp_path)
    assert sorted(p.name for p in removed) == ["last.json.tmp", "last.pt.tmp"]
    assert (tmp_path / "notes.tmp").exists()  # only our own leftovers are touched
    save(tmp_path / "last.pt")  # and a stale temp file cannot break the next save either
