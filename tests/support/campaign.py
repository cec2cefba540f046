"""The fault campaign's shared machinery: recording figures, a model of a power cut, the checks.

The campaign (tests/reliability/) proves that no checkpoint the lab writes is ever lost or
wrongly trusted. Its parts share what is here:

- `record()` writes the figures of a full run to $CAMPAIGN_RESULTS (never by default);
- `forbid_unpickling()` fails a test if anything is unpickled;
- `Disk` watches every call that changes files in one folder and models what a power cut
  keeps; `sweep()` stops or fails a save at each of those calls in turn;
- `restart_problems()` is the core check: what a restart would find wrong in a folder;
- `Zygote` forks the processes that the campaign kills, without paying for `import torch`
  each time.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime
import errno
import hashlib
import io
import json
import os
import pickle
import platform
import queue
import random
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

import resume_lab
from resume_lab import state_keys as keys
from resume_lab.callbacks import PUBLISHED, Callback, Checkpoint, finish_interrupted_publish
from resume_lab.checkpoint import CheckpointError, atomic_write_bytes, load_checkpoint, verify
from resume_lab.config import LabConfig

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = Path(__file__).resolve().parent

# The minimum counts for a full run; the committed results and the pages check them.
MINIMUMS = {"kills": 200, "flips": 1000, "sigterms": 10}

# --- figures of a full run --------------------------------------------------------------------

RESULTS_ENV = "CAMPAIGN_RESULTS"
# Resolved now, at collection: every test runs with its working directory in a temporary folder.
RESULTS = Path(os.environ[RESULTS_ENV]).resolve() if os.environ.get(RESULTS_ENV) else None
STARTED = time.monotonic()
RUN = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") + f"-{os.getpid()}"


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def provenance() -> dict[str, Any]:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    versions = {
        "torch": str(torch.__version__),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "resume_lab": resume_lab.__version__,
    }
    machine = f"{cpu_model()}, {cores} cores, {platform.system()} {platform.release()}"
    return {
        "run": RUN,
        "date": RUN[:10],
        "versions": versions,
        "machine": machine,
        "summary": f"torch {versions['torch']}, NumPy {versions['numpy']}, "
        f"Python {versions['python']} on {machine}",
        "seconds": round(time.monotonic() - STARTED, 1),
    }


def record(section: str, **figures: Any) -> None:
    """Store one part's figures in $CAMPAIGN_RESULTS, if set; a no-op otherwise.

    The file only ever holds one run: figures from an earlier run (another process) are dropped
    when this run records its first part. `losses` and `trusted_wrongly` are summed in `totals`.
    """
    if RESULTS is None:
        return
    results = json.loads(RESULTS.read_text("utf8")) if RESULTS.exists() else {}
    if results.get("provenance", {}).get("run") != RUN:
        results = {}
    results[section] = figures
    results["provenance"] = provenance()
    parts = [v for k, v in results.items() if k not in ("provenance", "totals")]
    results["totals"] = {
        "losses": sum(part.get("losses", 0) for part in parts),
        "trusted_wrongly": sum(part.get("trusted_wrongly", 0) for part in parts),
        "parts": len(parts),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(dict(sorted(results.items())), indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(RESULTS, text.encode("utf8"))


# --- small helpers ----------------------------------------------------------------------------


@contextlib.contextmanager
def global_state_kept() -> Iterator[None]:
    """For fixtures wider than one test (the root conftest restores per test): leave the
    thread count and the three global RNGs as they were found."""
    saved = torch.get_num_threads(), torch.get_rng_state(), random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        torch.set_num_threads(saved[0])
        torch.set_rng_state(saved[1])
        random.setstate(saved[2])
        np.random.set_state(saved[3])


def comparable(state: dict[str, Any]) -> dict[str, Any]:
    """A training state without what legitimately differs between runs: wall-clock step times."""
    state = dict(state)
    state[keys.HISTORY] = [
        {k: v for k, v in entry.items() if k != "step_time"} for entry in state[keys.HISTORY]
    ]
    state.pop(keys.VERSIONS, None)
    return state


@contextlib.contextmanager
def forbid_unpickling() -> Iterator[list[str]]:
    """Every way the lab could unpickle raises; the list collects any attempt, to be asserted."""
    attempts: list[str] = []
    saved = {
        (torch, "load"): torch.load,
        (pickle, "load"): pickle.load,
        (pickle, "loads"): pickle.loads,
        (pickle, "Unpickler"): pickle.Unpickler,
    }

    def forbidden(name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            attempts.append(name)
            raise AssertionError(f"{name} was called on a file that had not been verified")

        return call

    for (module, name), _ in saved.items():
        setattr(module, name, forbidden(f"{module.__name__}.{name}"))
    try:
        yield attempts
    finally:
        for (module, name), original in saved.items():
            setattr(module, name, original)


def flip_bit(data: bytes, bit: int) -> bytes:
    damaged = bytearray(data)
    damaged[bit // 8] ^= 1 << (bit % 8)
    return bytes(damaged)


def zip_regions(data: bytes) -> dict[str, tuple[int, int]]:
    """Byte ranges of a torch.save file: each entry (local header + data), then the directory."""
    regions = {}
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = sorted(archive.infolist(), key=lambda info: info.header_offset)
        for info in infos:
            start = info.header_offset
            name_len, extra_len = np.frombuffer(data[start + 26 : start + 30], dtype="<u2")
            end = start + 30 + int(name_len) + int(extra_len) + info.compress_size
            regions[info.filename.split("/", 1)[-1]] = (start, end)
        directory = max(end for _, end in regions.values())
    eocd = data.rfind(b"PK\x05\x06")
    regions["central directory"] = (directory, eocd)
    regions["end of archive"] = (eocd, len(data))
    return regions


def temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


# --- the core check: what would a restart find? ----------------------------------------------


def restart_problems(folder: Path, expect: dict[str, int]) -> list[str]:
    """Run the lab's own start-up repair on `folder`, then load each published checkpoint.

    `expect` maps a published name (last.pt, best.pt) to the newest step acknowledged for it
    before the fault (0: none yet): the checkpoint must verify, load with weights_only=True
    and be at least that new, and the best update that last.pt remembers must be in best.pt.
    Every problem is one line; an empty list means nothing was lost.
    """
    problems = []
    finish_interrupted_publish(folder)
    steps = {}
    for name, step in expect.items():
        if step == 0 and not (folder / name).exists():
            continue  # never saved, never acknowledged: nothing to lose
        try:
            state, _ = load_checkpoint(folder / name)
        except CheckpointError as err:
            problems.append(f"{name} lost: {err}")
            continue
        steps[name] = state[keys.STEP]
        if name == "last.pt":
            # What the run resumes with must be true: the best it remembers is on disk.
            claimed = state[keys.CALLBACKS]["checkpoint"]["best_step"] or 0
        if state[keys.STEP] < step:
            problems.append(f"{name} went back from update {step} to {state[keys.STEP]}")
    if "last.pt" in steps and steps.get("best.pt", 0) < claimed:
        problems.append(
            f"last.pt resumes believing update {claimed} is saved as best.pt, "
            f"which holds update {steps.get('best.pt')}"
        )
    return problems


def trusted_wrongly(folder: Path) -> list[str]:
    """Files in `folder` that pass verify() but do not load: a digest that vouched for damage."""
    wrong = []
    for path in sorted(folder.glob("*.pt")):
        try:
            verify(path)
        except CheckpointError:
            continue  # refused: never trusted
        try:
            load_checkpoint(path)
        except CheckpointError as err:
            wrong.append(f"{path.name} verified but does not load: {err}")
    return wrong


def leftovers(folder: Path, keep: int) -> list[str]:
    """After a clean save: anything beyond the published pairs and the last `keep` snapshots."""
    names = {p.name for p in folder.iterdir()}
    problems = [f"stale {name}" for name in sorted(names) if name.endswith(".tmp")]
    problems += [f"staged {name} left" for name in sorted(names) if name.startswith("best-")]
    for name in sorted(names):
        pair = name[:-3] + ".json" if name.endswith(".pt") else name[:-5] + ".pt"
        if name.endswith((".pt", ".json")) and pair not in names:
            problems.append(f"{name} has no {pair}")
    snapshots = [n for n in names if n.startswith("step-") and n.endswith(".pt")]
    if len(snapshots) > keep:
        problems.append(f"{len(snapshots)} numbered checkpoints kept, not {keep}")
    return problems


# --- a model of the disk, and a power cut -----------------------------------------------------


class SimulatedCrash(BaseException):
    """The machine stopped at this call. A BaseException, so no `except Exception` swallows it;
    `finally` blocks still run, but the crash state was taken before they did."""


@dataclass
class Call:
    kind: str  # open, write, fsync, fsync_dir, replace, link, unlink
    name: str  # the file (or folder) name it concerns


World = dict[str, bytes]  # the files of the folder as a power cut leaves them


class WatchedFile:
    """A file opened for writing in the watched folder: each write() is a call of its own."""

    def __init__(self, disk: Disk, file: Any, name: str) -> None:
        self._disk, self._file, self._name = disk, file, name

    def write(self, data: bytes) -> int:
        self._disk.call("write", self._name)
        self._disk.dirty.add(os.fstat(self._file.fileno()).st_ino)
        return self._file.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)

    def __enter__(self) -> WatchedFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._file.close()


class Disk:
    """Watches the calls that change files in `folder`, and models what a power cut keeps.

    Durable, in the model: the files as they were when watching started, and a file's data as
    of its last fsync. A file written since its last fsync, or never synced, comes back empty:
    the pessimistic case, and what ext4 with delayed allocation can leave. A power cut may or
    may not have kept the renames since the folder's last fsync, so there are two worlds: the
    names as they are, and the names as of the folder's last fsync.

    stop_at=i: simulate the power cut just before call i (the worlds are in `self.worlds`).
    fail_at=i: make call i raise `error` instead (the process lives on and cleans up). Like the
    real call, the error names the file for calls that take a path (open, rename, unlink), and
    not for write or fsync, which take a descriptor.
    """

    def __init__(
        self,
        folder: Path,
        *,
        stop_at: int | None = None,
        fail_at: int | None = None,
        error: Callable[[], OSError] | None = None,
    ) -> None:
        self.folder = Path(folder).resolve()
        self.stop_at, self.fail_at = stop_at, fail_at
        self.error = error or (lambda: OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        self.calls: list[Call] = []
        self.worlds: list[World] | None = None
        self.dirty: set[int] = set()
        names = self.names()
        self.synced_names = dict(names)
        self.synced_data = {ino: (self.folder / n).read_bytes() for n, ino in names.items()}
        self._pinned: list[int] = []  # open descriptors: a replaced inode's number is not reused

    def names(self) -> dict[str, int]:
        return {p.name: p.stat().st_ino for p in self.folder.iterdir() if p.is_file()}

    def power_cut(self) -> list[World]:
        def content(ino: int) -> bytes:
            if ino in self.dirty or ino not in self.synced_data:
                return b""
            return self.synced_data[ino]

        return [
            {name: content(ino) for name, ino in names.items()}
            for names in (self.names(), self.synced_names)
        ]

    def call(self, kind: str, name: str) -> None:
        index = len(self.calls)
        self.calls.append(Call(kind, name))
        if index == self.stop_at:
            self.worlds = self.power_cut()
            raise SimulatedCrash(f"power cut before call {index}: {kind} {name}")
        if index == self.fail_at:
            error = self.error()
            if kind in ("open", "replace", "rename", "link", "unlink"):
                error.filename = os.fspath(self.folder / name)
            raise error

    def _inside(self, path: Any) -> str | None:
        if isinstance(path, int):
            return None
        path = Path(os.fsdecode(path))
        return path.name if path.resolve().parent == self.folder else None

    def _pin(self, path: Any) -> None:
        with contextlib.suppress(OSError):
            self._pinned.append(os.open(path, os.O_RDONLY))

    @contextlib.contextmanager
    def watching(self) -> Iterator[Disk]:
        real = {
            "open": builtins.open,
            "fsync": os.fsync,
            "replace": os.replace,
            "rename": os.rename,
            "link": os.link,
            "unlink": os.unlink,
        }

        def watched_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            name = self._inside(file)
            if name is None or not set(mode) & set("wax+"):
                return real["open"](file, mode, *args, **kwargs)
            self.call("open", name)
            opened = real["open"](file, mode, *args, **kwargs)
            self.dirty.add(os.fstat(opened.fileno()).st_ino)  # "wb" truncates: changed already
            return WatchedFile(self, opened, name)

        def watched_fsync(fd: int) -> None:
            status = os.fstat(fd)
            if stat.S_ISDIR(status.st_mode) and status.st_ino == self.folder.stat().st_ino:
                self.call("fsync_dir", self.folder.name)
                real["fsync"](fd)
                self.synced_names = self.names()
                return
            name = next((n for n, ino in self.names().items() if ino == status.st_ino), None)
            if name is None:
                return real["fsync"](fd)
            self.call("fsync", name)
            real["fsync"](fd)
            self.synced_data[status.st_ino] = (self.folder / name).read_bytes()
            self.dirty.discard(status.st_ino)

        def renaming(kind: str) -> Callable[..., None]:
            def watched(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
                name = self._inside(dst)
                if name is not None:
                    self.call(kind, name)
                    self._pin(dst)
                real[kind](src, dst, *args, **kwargs)

            return watched

        def watched_unlink(path: Any, *args: Any, **kwargs: Any) -> None:
            name = self._inside(path)
            if name is not None:
                self.call("unlink", name)
                self._pin(path)
            real["unlink"](path, *args, **kwargs)

        builtins.open = watched_open
        os.fsync, os.replace, os.rename = watched_fsync, renaming("replace"), renaming("rename")
        os.link, os.unlink = renaming("link"), watched_unlink
        try:
            yield self
        finally:
            builtins.open = real["open"]
            os.fsync, os.replace, os.rename = real["fsync"], real["replace"], real["rename"]
            os.link, os.unlink = real["link"], real["unlink"]
            for fd in self._pinned:
                os.close(fd)


def fingerprint(world: World) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, hashlib.sha256(data).hexdigest()) for name, data in world.items()))


def materialize(world: World, folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name, data in world.items():
        (folder / name).write_bytes(data)
    return folder


def distinct_points(calls: list[Call]) -> list[int]:
    """Every call except a write that follows a write to the same file: stopping there gives
    the same worlds as stopping at the first write of the run (unsynced data is lost anyway)."""
    return [
        i
        for i, c in enumerate(calls)
        if not (c.kind == "write" and i and calls[i - 1].kind == "write" and calls[i - 1] == c)
    ]


@dataclass
class SweepResult:
    calls: list[Call]
    points: int = 0  # crash (or fault) points tried
    worlds: int = 0  # distinct disk states checked
    failures: list[str] = field(default_factory=list)


def sweep(
    run: Callable[[], Any],
    folder: Path,
    reset: Callable[[], None],
    check: Callable[[World], list[str]],
    *,
    every_call: bool,
    check_done: Callable[[World], list[str]] | None = None,
) -> SweepResult:
    """Stop `run` by a power cut before each call it makes in `folder`; check every world.

    `reset` puts the folder (and any object `run` changes) back before each attempt.
    `check(world)` lists what is wrong with a world; identical worlds are checked once.
    The completed run is checked too, as a power cut right after it, with `check_done`: a save
    that has returned must have made its new file durable.
    """
    reset()
    disk = Disk(folder)
    with disk.watching():
        run()
    result = SweepResult(calls=disk.calls)
    checked: dict[tuple[Any, ...], list[str]] = {}

    def judge(where: str, worlds: list[World], check: Callable[[World], list[str]]) -> None:
        for world in worlds:
            key = (check, fingerprint(world))
            if key not in checked:
                checked[key] = check(world)
            result.failures += [f"{where}: {problem}" for problem in checked[key]]

    judge("after the save returned", disk.power_cut(), check_done or check)
    points = range(len(disk.calls)) if every_call else distinct_points(disk.calls)
    for index in points:
        reset()
        crashed = Disk(folder, stop_at=index)
        with crashed.watching():
            try:
                run()
            except BaseException:  # the crash, or what torch.save made of it
                if crashed.worlds is None:
                    raise
        assert crashed.worlds is not None, f"the run never reached call {index}"
        call = disk.calls[index]
        judge(f"power cut before call {index} ({call.kind} {call.name})", crashed.worlds, check)
    result.points = len(points) + 1
    result.worlds = len(checked)
    return result


def copy_folder(source: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)


# --- atomic_save, over an existing checkpoint -------------------------------------------------


def a_training_state(step: int) -> dict[str, Any]:
    """A real checkpoint's contents: the lab's training state after `step` updates."""
    from resume_lab.build import build_trainer
    from resume_lab.resume import training_state

    trainer = build_trainer(LabConfig(steps=40, eval_every=4, patience=None), init_seed=0)
    trainer.fit(step)
    return training_state(trainer)


def atomic_save_sweep(workdir: Path, *, every_call: bool) -> SweepResult:
    """Power cuts during the lab's atomic_save (looked up when called, so that a test can put a
    broken one in its place) over an existing checkpoint: last.pt must always hold the previous
    checkpoint or the complete new one, and the new one once atomic_save has returned."""
    from resume_lab import checkpoint

    folder = workdir / "disk"
    folder.mkdir(parents=True)
    old, new = a_training_state(8), a_training_state(12)
    path = folder / "last.pt"
    checkpoint.atomic_save(old, path)
    old_bytes = path.read_bytes()
    template = workdir / "template"
    copy_folder(folder, template)
    checkpoint.atomic_save(new, path)
    new_bytes = path.read_bytes()

    def holds(*allowed: bytes) -> Callable[[World], list[str]]:
        def check(world: World) -> list[str]:
            held = world.get("last.pt")
            if held in allowed:
                return []
            size = "no file" if held is None else f"{len(held)} bytes"
            wanted = "the new checkpoint" if len(allowed) == 1 else "the old or the new one"
            return [f"last.pt holds {size}, not {wanted}"]

        return check

    return sweep(
        lambda: checkpoint.atomic_save(new, path),
        folder,
        lambda: copy_folder(template, folder),
        holds(old_bytes, new_bytes),
        every_call=every_call,
        check_done=holds(new_bytes),
    )


# --- a Checkpoint boundary, frozen just before it saves ---------------------------------------


BOUNDARY_CONFIG = LabConfig(steps=60, eval_every=2, patience=None)
BOUNDARY_EVERY, BOUNDARY_KEEP = 4, 2


class FreezeBeforeSaving(Callback):
    """Stops the run (from update `after` on) at the first boundary of the kind wanted, before
    the Checkpoint callback acts on it. Kinds: "save" (a numbered snapshot, published as
    last.pt), "best" (a new best.pt), "save+best" (both)."""

    class Frozen(Exception):
        pass

    def __init__(self, saver: Checkpoint, after: int, kind: str) -> None:
        self.saver, self.after, self.kind = saver, after, kind

    def on_boundary(self, trainer: Any) -> None:
        saves = trainer.step % self.saver.every == 0
        best = self.saver._best_is_new
        kind = "save+best" if saves and best else "save" if saves else "best" if best else None
        if trainer.step >= self.after and kind == self.kind:
            raise self.Frozen


@dataclass
class Boundary:
    """A trainer and its Checkpoint callback at an update boundary, before the callback runs."""

    trainer: Any
    saver: Checkpoint
    template: Path  # the folder as it was before the boundary
    saver_fields: dict[str, Any]
    expect: dict[str, int]  # newest step of each published name before the boundary
    expect_done: dict[str, int]  # ... and once the boundary has been saved

    def reset(self, folder: Path) -> None:
        copy_folder(self.template, folder)
        self.saver.__dict__.update(self.saver_fields)
        self.saver.folder = folder

    def run(self) -> None:
        self.saver.on_boundary(self.trainer)


def freeze_boundary(workdir: Path, kind: str) -> Boundary:
    from resume_lab.build import build_trainer

    folder = workdir / "frozen"
    folder.mkdir(parents=True)
    saver = Checkpoint(folder, every=BOUNDARY_EVERY, keep=BOUNDARY_KEEP)
    freeze = FreezeBeforeSaving(saver, after=12, kind=kind)
    trainer = build_trainer(BOUNDARY_CONFIG, init_seed=0, callbacks=[freeze, saver])
    try:
        trainer.fit(BOUNDARY_CONFIG.steps)
        raise AssertionError("no boundary of the kind wanted in the run")
    except FreezeBeforeSaving.Frozen:
        pass
    template = workdir / "template"
    copy_folder(folder, template)
    expect = {name: verify(template / name)["step"] for name in PUBLISHED}
    done = {
        name: trainer.step if part in kind else expect[name]
        for name, part in (("last.pt", "save"), ("best.pt", "best"))
    }
    fields = {k: v for k, v in saver.__dict__.items() if k != "folder"}
    return Boundary(trainer, saver, template, dict(fields), expect, done)


def boundary_check(
    boundary: Boundary, scratch: Path, *, then_save: bool, done: bool = False
) -> Callable[[World], list[str]]:
    """The core check for a world left by a fault at a boundary: a restart finds last.pt and
    best.pt at least as new as before (as new as the boundary itself, if `done`); with
    `then_save`, the next start also leaves no stale or half-published file once it has
    saved again."""
    counter = iter(range(1_000_000))
    expect = boundary.expect_done if done else boundary.expect

    def check(world: World) -> list[str]:
        folder = materialize(world, scratch / f"world-{next(counter)}")
        problems = restart_problems(folder, expect)
        if then_save and not problems:
            saver = Checkpoint(folder, every=BOUNDARY_EVERY, keep=BOUNDARY_KEEP)
            saver.on_fit_start(boundary.trainer)
            saver.save(boundary.trainer)
            problems += leftovers(folder, BOUNDARY_KEEP)
        shutil.rmtree(folder)
        return problems

    return check


# --- forking processes to kill ----------------------------------------------------------------


# The process the SIGKILL loop kills: the lab's train loop, saving at every update, evaluating
# often so that best.pt is published often too.
KILL_CONFIG = LabConfig(steps=1_000_000, eval_every=2, patience=None)


def send(message: dict[str, Any]) -> None:
    """One JSON line on stdout, in one write(): lines from several processes never mix."""
    os.write(1, (json.dumps(message) + "\n").encode())


class Reporter(Callback):
    """In the killed process: says where it resumed and acknowledges each completed boundary."""

    def __init__(self, saver: Checkpoint, repaired: list[str]) -> None:
        self.saver, self.repaired = saver, repaired

    def on_fit_start(self, trainer: Any) -> None:  # after Checkpoint's own start-up clean-up
        best = self.saver.folder / "best.pt"
        send(
            {
                "ready": trainer.step,
                "best": verify(best)["step"] if best.exists() else 0,
                "stale": temp_files(self.saver.folder),
                "repaired": self.repaired,
            }
        )

    def on_boundary(self, trainer: Any) -> None:  # after Checkpoint.on_boundary returned
        send({"saved": trainer.step, "best": self.saver.best_step or 0})


def saver_child(request: dict[str, Any]) -> int:
    """A restart of the lab's train loop, as `resume-lab train` does it, then save forever."""
    from resume_lab.build import build_trainer
    from resume_lab.resume import resume

    folder = Path(request["folder"])
    repaired = finish_interrupted_publish(folder)  # what cmd_train does first
    saver = Checkpoint(folder, every=1, keep=3)
    callbacks = [saver, Reporter(saver, repaired)]
    trainer = build_trainer(KILL_CONFIG, init_seed=request["seed"], callbacks=callbacks)
    if (folder / "last.pt").exists() or (folder / "last.json").exists():
        resume(trainer, folder / "last.pt")
    trainer.fit(KILL_CONFIG.steps)
    return 0


def cli_child(request: dict[str, Any]) -> int:
    """`python -m resume_lab ARGS` in a forked process: the same main(), the same signals."""
    from resume_lab.cli import main

    os.dup2(1, 2)  # its log lines come back on the same pipe
    sys.argv = ["resume-lab", *request["argv"]]
    return main()


def zygote_main() -> None:
    """Import and warm up torch once, then fork a fresh process per request."""
    from resume_lab.build import build_trainer

    torch.set_num_threads(1)
    build_trainer(LabConfig(steps=4), init_seed=0).fit(1)  # lazy imports and first-call set-up
    send({"zygote": os.getpid()})
    for line in sys.stdin:
        request = json.loads(line)
        if request["do"] == "fork":
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    devnull = os.open(os.devnull, os.O_RDONLY)
                    os.dup2(devnull, 0)
                    jobs = {"saver": saver_child, "cli": cli_child}
                    code = jobs[request["job"]](request)
                except BaseException as err:
                    send({"error": f"{type(err).__name__}: {err}"})
                finally:
                    with contextlib.suppress(Exception):
                        sys.stdout.flush()
                        sys.stderr.flush()
                    os._exit(code if isinstance(code, int) else 1)
            send({"forked": pid})
        elif request["do"] == "reap":
            _, status = os.waitpid(request["pid"], 0)
            send({"reaped": request["pid"], "code": os.waitstatus_to_exitcode(status)})


class Zygote:
    """A Python process with torch imported and warmed up that forks the campaign's victims.

    Its children are real, separate processes that receive real signals; only the seconds of
    `import torch` and first-call set-up are saved on each start. Messages from the zygote
    and its children come back as JSON lines; anything else a child prints comes back as text.
    """

    def __init__(self, log: Path) -> None:
        code = (
            f"import sys; sys.path.insert(0, {str(SUPPORT)!r}); "
            "import campaign; campaign.zygote_main()"
        )
        self.log = open(log, "w")  # noqa: SIM115 -- closed in close()
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            bufsize=1,
            cwd=ROOT,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.inbox: list[Any] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.expect("zygote", timeout=300)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _next(self, deadline: float) -> dict[str, Any] | str:
        line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
        if line is None:
            raise RuntimeError(f"the zygote exited; see {self.log.name}")
        return json.loads(line) if line.startswith("{") else line

    def expect(self, *wanted: str, timeout: float = 60) -> Any:
        """The next message with one of the keys `wanted` (or a text line containing one); the
        others wait in `inbox`, in order, for drain()."""

        def matches(message: Any) -> bool:
            return any(w in message for w in wanted)

        for i, message in enumerate(self.inbox):
            if matches(message):
                return self.inbox.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            message = self._next(deadline)
            if matches(message):
                return message
            self.inbox.append(message)

    def drain(self) -> list[Any]:
        messages, self.inbox = self.inbox, []
        return messages

    def request(self, **request: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()

    def fork(self, job: str, **request: Any) -> int:
        self.request(do="fork", job=job, **request)
        return self.expect("forked")["forked"]

    def reap(self, pid: int, timeout: float = 60) -> int:
        """Wait for child `pid` to end and return its exit code (-9 after SIGKILL)."""
        self.request(do="reap", pid=pid)
        return self.expect("reaped", timeout=timeout)["code"]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            assert self.process.stdin is not None
            self.process.stdin.close()
        self.process.kill()  # the idle process this object started, by its own handle
        self.process.wait()
        self.log.close()


def lab_command(*args: str) -> list[str]:
    """A real `python -m resume_lab ...` process."""
    return [sys.executable, "-m", "resume_lab", *args]


def send_signal(pid: int, signum: int = signal.SIGTERM) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
