"""Runs of snippets/recipe.py for its tests, three ways:

- `fork_run`: a forked copy of this process (which imported torch and the recipe once) calls
  `recipe.main(argv)`; with a `Kill`, the child SIGKILLs itself at a named moment (`PHASES`),
  by wrapping the recipe's functions and `os`'s in the child only, never in this process.
- `HeldBack`: `python snippets/recipe.py ARGV`, a real process whose stdout is a pipe this
  process fills in advance, so the recipe can print exactly the lines it is allowed and then
  blocks inside the next print: a signal sent then lands at a known update, every time.
- `subprocess.run` (in the tests) for what only a new interpreter shows.

A new interpreter costs about two seconds of CPU (torch, then the ~800 modules the first
`torch.use_deterministic_algorithms` call imports); a fork costs milliseconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import termios
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from page_fences.isolation import isolated

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "snippets" / "recipe.py"
TIMEOUT = 120.0  # seconds; a run here takes well under one


def load_recipe() -> ModuleType:
    """The recipe as a module of its own (not in sys.modules), from its file."""
    spec = importlib.util.spec_from_file_location("recipe_under_test", RECIPE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def warm_up(recipe: ModuleType) -> None:
    """Make here, once, the first calls whose cost every forked child would otherwise pay:
    `use_deterministic_algorithms` (~800 imports), AdamW's first step, torch.save and
    torch.load. Global state (RNGs, deterministic mode, threads) is put back afterwards."""
    with isolated(seed=0):
        torch.use_deterministic_algorithms(True)
        x, y, val_x, val_y = recipe.make_data(1)
        model = recipe.make_model()
        opt, sched = recipe.make_optimizer(model, 10)
        recipe.one_update(model, opt, sched, [(x[:32], y[:32])])
        recipe.evaluate(model, val_x, val_y)
        buffer = io.BytesIO()
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, buffer)
        torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)


# --- moments to die at -------------------------------------------------------------------------


def named(name: str) -> Callable[[Path], bool]:
    return lambda path: path.name == name


def prefixed(prefix: str) -> Callable[[Path], bool]:
    return lambda path: path.name.startswith(prefix)


def inside(prefix: str) -> Callable[[Path], bool]:
    return lambda path: path.parent.name.startswith(prefix)


@dataclass(frozen=True)
class Phase:
    """A moment of a run: `when` ("before", "after", or "midway": half the bytes written and
    synced) a call to `hook` whose path argument (a rename's destination) `applies`."""

    name: str
    hook: str  # update | write_synced | fsync_dir | rename | replace | rmtree | unlink
    when: str
    applies: Callable[[Path], bool] = lambda path: True


MANIFEST, FINAL = named("manifest.json"), named("tmp-final.pt")
PHASES = {
    p.name: p
    for p in (
        Phase("after an update, before its save", "update", "after"),
        Phase("before state.pt is written", "write_synced", "before", named("state.pt")),
        Phase("midway through state.pt", "write_synced", "midway", named("state.pt")),
        Phase("after state.pt, before the manifest", "write_synced", "after", named("state.pt")),
        Phase("midway through the manifest", "write_synced", "midway", named("manifest.json")),
        Phase("after the manifest, before the rename", "write_synced", "after", MANIFEST),
        Phase("after the fsync, before the rename", "fsync_dir", "after", prefixed("tmp-step-")),
        Phase("after the rename, before the pointer swap", "rename", "after", prefixed("step-")),
        Phase("after tmp-latest, before its swap", "write_synced", "after", named("tmp-latest")),
        Phase("after the best swap, before the latest swap", "replace", "after", named("best")),
        Phase("after the latest swap, before prune", "replace", "after", named("latest")),
        Phase("inside prune, midway through a folder", "unlink", "after", inside("step-")),
        Phase("inside prune, after a folder is gone", "rmtree", "after", prefixed("step-")),
        Phase("before an uncommitted folder is dropped", "rmtree", "before", prefixed("tmp-")),
        Phase("after tmp-final.pt, before its rename", "write_synced", "after", FINAL),
    )
}


@dataclass(frozen=True)
class Kill:
    """SIGKILL at the first `phase` that comes at update `update` or later."""

    phase: str
    update: int


def _arm(recipe: ModuleType, kill: Kill, start: int, hits: Path) -> None:
    """In the child only: wrap what `kill.phase` names so that it dies there."""
    phase = PHASES[kill.phase]
    now = [start]  # the update the run is at

    def die(path: Path | None) -> None:
        hit = {"phase": phase.name, "update": now[0], "path": path and path.name}
        hits.write_text(json.dumps(hit))
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(TIMEOUT)  # never reached

    def due(path: Path | None) -> bool:
        return now[0] >= kill.update and (path is None or phase.applies(path))

    def wrap(owner: Any, name: str, path_of: Callable[..., Path | None]) -> None:
        original = getattr(owner, name)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            path = path_of(*args, **kwargs)
            if phase.hook == "update":
                result = original(*args, **kwargs)
                now[0] += 1
                if due(None):
                    die(None)
                return result
            if due(path) and phase.when == "before":
                die(path)
            if due(path) and phase.when == "midway":
                data = args[1]
                with open(args[0], "wb") as f:  # a torn write: half the bytes, synced
                    f.write(data[: len(data) // 2])
                    f.flush()
                    os.fsync(f.fileno())
                die(path)
            result = original(*args, **kwargs)
            if due(path) and phase.when == "after":
                die(path)
            return result

        setattr(owner, name, wrapped)

    def first(*args: Any, **kwargs: Any) -> Path:
        return Path(os.fsdecode(args[0]))

    def second(*args: Any, **kwargs: Any) -> Path:
        return Path(os.fsdecode(args[1]))

    def unlinked(*args: Any, dir_fd: int | None = None, **kwargs: Any) -> Path:
        path = Path(os.fsdecode(args[0]))  # shutil.rmtree unlinks names relative to dir_fd
        return Path(os.readlink(f"/proc/self/fd/{dir_fd}")) / path if dir_fd else path

    # The updates are counted in every case; the rest is wrapped only when it is the target.
    if phase.hook == "update":
        wrap(recipe, "one_update", lambda *a, **k: None)
    else:
        counted = recipe.one_update

        def one_update(*args: Any, **kwargs: Any) -> Any:
            result = counted(*args, **kwargs)
            now[0] += 1
            return result

        setattr(recipe, "one_update", one_update)  # noqa: B010 -- a module's attribute
        owner, path_of = {
            "write_synced": (recipe, first),
            "fsync_dir": (recipe, first),
            "rename": (os, second),
            "replace": (os, second),
            "rmtree": (shutil, first),
            "unlink": (os, unlinked),
        }[phase.hook]
        wrap(owner, phase.hook, path_of)


def latest_update(run: Path) -> int:
    """The update `latest` names (0 without one), read from its manifest, as the child sees
    it before it starts."""
    with contextlib.suppress(OSError, ValueError, KeyError):
        name = (run / "latest").read_text().strip()
        return int(json.loads((run / name / "manifest.json").read_bytes())["update"])
    return 0


# --- forked runs ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    code: int  # the exit status; -9 when the child SIGKILLed itself
    out: str
    err: str
    hit: dict[str, Any] | None  # where a Kill landed

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


_calls = count()


def fork_run(
    recipe: ModuleType,
    argv: list[str],
    logs: Path,
    kill: Kill | None = None,
    job: Callable[[], int] | None = None,
) -> Outcome:
    """`recipe.main(argv)` (or `job()`) in a forked child, one intra-op thread, its stdout and
    stderr in files under `logs`; with `kill`, the child SIGKILLs itself there."""
    logs.mkdir(parents=True, exist_ok=True)
    n = next(_calls)
    out, err, hits = (logs / f"{n}.{part}" for part in ("out", "err", "hit"))
    run = Path(argv[argv.index("--output-dir") + 1]) if "--output-dir" in argv else None
    start = latest_update(run) if run else 0
    pid = os.fork()
    if pid == 0:  # pragma: no cover -- the child
        code = 70
        try:
            # Threads of the parent's OpenMP pool do not exist here: with more than one,
            # the first parallel region would wait for them forever.
            torch.set_num_threads(1)
            sys.stdout = open(out, "w")  # noqa: SIM115 -- closed by os._exit
            sys.stderr = open(err, "w")  # noqa: SIM115
            os.dup2(sys.stdout.fileno(), 1)
            os.dup2(sys.stderr.fileno(), 2)
            if kill is not None:
                _arm(recipe, kill, start, hits)
            code = job() if job is not None else recipe.main(argv)
        except SystemExit as e:  # argparse's exit
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:  # as Python itself: the traceback, and 1
            traceback.print_exc()
            code = 1
        finally:
            with contextlib.suppress(BaseException):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    code = wait(pid)
    hit = json.loads(hits.read_text()) if hits.exists() else None
    return Outcome(code, out.read_text(), err.read_text(), hit)


def wait(pid: int, timeout: float = TIMEOUT) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"a forked run took over {timeout} s")
        time.sleep(0.002)


# --- real processes ------------------------------------------------------------------------------


def command(argv: list[str]) -> list[str]:
    return [sys.executable, str(RECIPE), *argv]


class HeldBack:
    """`python snippets/recipe.py ARGV` that may print `allowed` bytes and no more.

    Its stdout is a pipe that this process fills, before the start, with all but `allowed`
    bytes of padding, and does not read until `release`: once the recipe has printed its
    first lines (`allowed` is their length), its next print blocks until the pipe is read.
    A signal sent while the pipe is full lands at a known update: the recipe's handler runs
    inside that print (the write is retried after it, PEP 475).
    """

    def __init__(
        self, argv: list[str], allowed: int, stderr: Path, env: dict[str, str] | None = None
    ) -> None:
        read, write = os.pipe()
        self.read = read
        capacity = fcntl.fcntl(write, fcntl.F_GETPIPE_SZ)
        self.padding = capacity - allowed
        assert 0 < self.padding < capacity
        assert os.write(write, b"\n" * self.padding) == self.padding
        self.stderr = stderr
        with open(stderr, "wb") as err:
            self.process = subprocess.Popen(command(argv), stdout=write, stderr=err, env=env)
        os.close(write)

    def pending(self) -> int:
        buffer = bytearray(4)
        fcntl.ioctl(self.read, termios.FIONREAD, buffer)
        return int.from_bytes(buffer, sys.byteorder)

    def wait_full(self, timeout: float = TIMEOUT) -> None:
        """Until the recipe has printed every byte it may (or exited: that fails later)."""
        deadline = time.monotonic() + timeout
        capacity = fcntl.fcntl(self.read, fcntl.F_GETPIPE_SZ)
        while self.pending() < capacity and self.process.poll() is None:
            assert time.monotonic() < deadline, "the recipe never filled its pipe"
            time.sleep(0.005)

    def kill(self, timeout: float = TIMEOUT) -> tuple[int, str, str]:
        """SIGKILL, and wait for the death before reading: a writer blocked on a full pipe
        and woken by SIGKILL still completes its write if a read has made room first."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout)
        return self.release(timeout)

    def release(self, timeout: float = TIMEOUT) -> tuple[int, str, str]:
        """Read everything, wait for the end: exit status, stdout (less the padding), stderr."""
        chunks = []
        while chunk := os.read(self.read, 1 << 16):
            chunks.append(chunk)
        os.close(self.read)
        code = self.process.wait(timeout)
        out = b"".join(chunks)[self.padding :].decode()
        return code, out, self.stderr.read_text()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        with contextlib.suppress(OSError):
            os.close(self.read)
