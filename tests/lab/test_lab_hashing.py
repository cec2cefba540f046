"""atomic_save hashes large writes in a helper thread and syncs in the background: same bytes,
same digest, no thread left behind, and a failed background sync is never swallowed."""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest
import torch

from resume_lab import hashing
from resume_lab.atomic import SaveError, atomic_save
from resume_lab.hashing import HASHES, HashingWriter, file_digest

SMALL = 4096  # the tests lower PARALLEL_MIN to this, so kilobytes take the large-write path


def state(step: int = 0) -> dict:
    gen = torch.Generator().manual_seed(step)
    return {"step": step, "model": {f"w{i}": torch.randn(2048, generator=gen) for i in range(6)}}


def helper_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("checkpoint")]


@pytest.fixture
def large_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every 8 KiB tensor counts as large; returns the descriptors synced in the background."""
    monkeypatch.setattr(HashingWriter, "PARALLEL_MIN", SMALL)
    synced: list[int] = []
    real = hashing.fdatasync

    def counting(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(hashing, "fdatasync", counting)
    return synced


@pytest.mark.parametrize("algorithm", sorted(HASHES))
def test_digest_is_the_files_digest_with_threads(
    tmp_path: Path, large_writes: list[int], algorithm: str
):
    path = tmp_path / "last.pt"
    digest = atomic_save(state(), path, algorithm)
    assert digest == file_digest(path, algorithm)  # streamed from disk: the same
    assert large_writes, "no write took the parallel path"
    assert helper_threads() == []  # shut down before atomic_save returned
    loaded = torch.load(path, weights_only=True)
    assert all(torch.equal(loaded["model"][k], v) for k, v in state()["model"].items())


def test_same_bytes_and_digest_as_inline_hashing(tmp_path: Path, monkeypatch):
    inline = atomic_save(state(), tmp_path / "inline.pt")  # 8 KiB tensors: all hashed inline
    monkeypatch.setattr(HashingWriter, "PARALLEL_MIN", SMALL)
    parallel = atomic_save(state(), tmp_path / "parallel.pt")
    assert inline == parallel
    assert (tmp_path / "inline.pt").read_bytes() == (tmp_path / "parallel.pt").read_bytes()


def test_small_saves_start_no_thread(tmp_path: Path, monkeypatch):
    started: list[object] = []
    monkeypatch.setattr(hashing, "ThreadPoolExecutor", lambda *a, **k: started.append(a))
    atomic_save(state(), tmp_path / "last.pt")  # every write is below PARALLEL_MIN
    assert started == []


def test_failed_background_sync_fails_the_save(tmp_path: Path, large_writes, monkeypatch):
    """fsync reports a write-back error once: if the background sync swallowed it, the final
    fsync could succeed on lost data. It must surface, and the old file must stay."""
    path = tmp_path / "last.pt"
    atomic_save(state(0), path)
    before = path.read_bytes()

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(hashing, "fdatasync", failing)
    with pytest.raises(SaveError) as caught:
        atomic_save(state(1), path)
    assert caught.value.errno == errno.EIO and "last.pt was not replaced" in str(caught.value)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]  # no temp file left
    assert helper_threads() == []


def test_failed_large_write_leaves_no_thread_and_no_temp(tmp_path: Path, large_writes):
    path = tmp_path / "last.pt"
    atomic_save(state(0), path)
    before = path.read_bytes()

    original = HashingWriter._write_large
    calls = 0

    def fail_second(self, data):
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(self, data)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(HashingWriter, "_write_large", fail_second)
        with pytest.raises((SaveError, RuntimeError)):
            atomic_save(state(1), path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]
    assert helper_threads() == []
