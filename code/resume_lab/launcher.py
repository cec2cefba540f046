"""Launch `python -m MODULE` as one process or under torchrun (gloo ranks),
always under a timeout: the one launcher of the demo, the tests and the
bench.

- Environment: the children import this very package (installed or not),
  run one OpenMP thread each, and never join a torchrun group this process
  may have been started in.
- Output goes to files, not pipes: reading it never waits for a worker that
  still holds a pipe open, and nothing blocks when a pipe fills up.
- Killing: torchrun starts each worker in a session of its own, so killing
  torchrun's process group alone would leave the workers running. Every
  worker seen is tracked, and an overrun (or an interruption) kills the
  launch's group and every worker's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
# what torchrun gives its workers: a child must never inherit a parent's
TORCHRUN_VARIABLES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "ROLE_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
)


class LaunchError(Exception):
    """A launch did not end as expected (it overran and was killed, say);
    the message holds the command and its last output."""


def environment(*paths: str | os.PathLike[str]) -> dict[str, str]:
    """This process's environment for a child: the package's source root
    (and `paths`) first on PYTHONPATH, one OpenMP thread, no torchrun
    variables, and no warnings of torchrun's own (its OMP_NUM_THREADS
    notice) mixed into the lab's output."""
    env = dict(os.environ)
    roots = [str(PACKAGE_ROOT), *map(str, paths), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in roots if p)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONWARNINGS"] = "ignore"
    for name in TORCHRUN_VARIABLES:
        env.pop(name, None)
    return env


def command(world_size: int, module: str, args: Sequence[str]) -> list[str]:
    """`python -m MODULE ARGS` for W = 1 (no torchrun: the same code, a
    world of one); `torchrun --standalone --nproc-per-node W` for W > 1."""
    if world_size == 1:
        return [sys.executable, "-m", module, *args]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    per_node = f"--nproc-per-node={world_size}"
    return [*torchrun, per_node, "-m", module, *args]


def children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError):
                found += map(int, (task / "children").read_text().split())
    return found


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, read from /proc (Linux)."""
    found = []
    for child in children(pid):
        found += [child, *descendants(child)]
    return found


def alive(pid: int) -> bool:
    """Running (a zombie has ended: only its exit status is left)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in "ZX"


def rank_of(pid: int) -> int | None:
    """The RANK torchrun gave a worker, from its environment."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    ranks = [int(item[5:]) for item in environ if item.startswith(b"RANK=")]
    return ranks[0] if ranks else None


def kill_tree(proc: subprocess.Popen[bytes], seen: Sequence[int] = ()) -> None:
    """SIGKILL the launch's process group and every worker's (`seen` and
    those running now), then reap the launch."""
    groups = {proc.pid}  # start_new_session: its pid is its group's id
    for pid in [*seen, *descendants(proc.pid)]:  # before torchrun dies:
        with contextlib.suppress(ProcessLookupError):  # they move
            if alive(pid):
                groups.add(os.getpgid(pid))
    groups.discard(os.getpgrp())  # never this process's own group
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    proc.wait()


@dataclass(frozen=True)
class Launch:
    """A launch that ended: its command, exit status, output and time."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class Running:
    """One launch in a session of its own, output to files (`logs`, or a
    temporary folder); as a context manager, nothing it started outlives
    the block."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        logs: Path | None = None,
    ) -> None:
        self.argv = list(argv)
        # torchrun's workers train; a single process trains itself
        self.torchrun = "torch.distributed.run" in self.argv or any(
            Path(a).name == "torchrun" for a in self.argv[:1]
        )
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        if logs is None:
            self._scratch = tempfile.TemporaryDirectory()
            logs = Path(self._scratch.name)
        logs.mkdir(parents=True, exist_ok=True)
        self.stdout_path = logs / "stdout.log"
        self.stderr_path = logs / "stderr.log"
        self.started = time.perf_counter()
        with (
            open(self.stdout_path, "wb") as out,
            open(self.stderr_path, "wb") as err,
        ):
            self.proc = subprocess.Popen(
                self.argv,
                env=env if env is not None else environment(),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        self.seen: set[int] = set()

    def workers(self) -> dict[int, int]:
        """{rank: pid} of the processes that train now: torchrun's workers,
        or the launch itself when it is one process."""
        if not self.torchrun:
            return {0: self.proc.pid} if self.proc.poll() is None else {}
        found = {}
        for pid in children(self.proc.pid):
            rank = rank_of(pid)
            if rank is not None and alive(pid):
                found[rank] = pid
                self.seen.add(pid)
        return found

    def signal(self, signum: int) -> None:
        """`signum` to the launch's whole group (torchrun and what it has
        not moved into sessions of their own)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signum)

    def wait(self, timeout: float) -> int:
        """The exit status; on overrun every process is killed and
        LaunchError says so. Workers must not outlive their torchrun."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            self.workers()
            if time.monotonic() > deadline:
                self.kill()
                raise LaunchError(
                    f"timed out after {timeout:.0f} s and killed: "
                    f"{shown(self.argv)}{tail(self.stderr() or self.stdout())}"
                )
            time.sleep(0.02)
        end = time.monotonic() + 10  # torchrun reaps its workers itself
        while (
            left := [p for p in self.seen if alive(p)]
        ) and time.monotonic() < end:
            time.sleep(0.05)
        if left:
            self.kill()
            raise LaunchError(f"workers {left} outlived {shown(self.argv)}")
        return self.proc.returncode

    def kill(self) -> None:
        kill_tree(self.proc, sorted(self.seen))

    def stdout(self) -> str:
        return self.stdout_path.read_text("utf8", errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text("utf8", errors="replace")

    def result(self) -> Launch:
        seconds = time.perf_counter() - self.started
        code = self.proc.returncode
        return Launch(self.argv, code, self.stdout(), self.stderr(), seconds)

    def __enter__(self) -> Running:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        # an exception (Ctrl-C reaches the terminal's foreground group, not
        # a new session), or workers still running: kill them all
        if self.proc.poll() is None or any(alive(p) for p in self.seen):
            self.kill()
        if self._scratch is not None:
            self._scratch.cleanup()


def launch(
    argv: Sequence[str],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    logs: Path | None = None,
) -> Launch:
    """Run one command to its end; kill it and its workers if it overruns
    (LaunchError) or if this process is interrupted."""
    with Running(argv, env=env, cwd=cwd, logs=logs) as running:
        running.wait(timeout)
        return running.result()


def shown(argv: Sequence[str]) -> str:
    return " ".join(Path(a).name if a == sys.executable else a for a in argv)


def tail(text: str, lines: int = 12) -> str:
    kept = text.strip().splitlines()[-lines:]
    return "".join(f"\n  | {line}" for line in kept)
