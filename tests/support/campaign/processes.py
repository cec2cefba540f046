"""Processes for the campaign to kill: a warm Zygote forks them, and inside each one the lab's
own train loop saves at every update (and, when asked, SIGKILLs itself at a named phase of a
save)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from campaign.checks import temporaries
from resume_lab.callbacks import Callback, Checkpoint
from resume_lab.checkpoint import STATE_FILE, verify
from resume_lab.config import LabConfig
from resume_lab.run_folder import BEST, LAST

SUPPORT = Path(__file__).resolve().parents[1]
ROOT = SUPPORT.parents[1]

# The process the SIGKILL campaign kills: the lab's train loop, saving at every update,
# evaluating often so that `best` moves often too.
KILL_CONFIG = LabConfig(steps=100_000, eval_every=2, patience=None)
KILL_EVERY, KILL_KEEP = 1, 3


def send(message: dict[str, Any]) -> None:
    """One JSON line on stdout, in one write(): lines from several processes never mix."""
    os.write(1, (json.dumps(message) + "\n").encode())


class Reporter(Callback):
    """In the killed process: says where it resumed and acknowledges each completed boundary."""

    def __init__(self, saver: Checkpoint, cleaned: list[str]) -> None:
        self.saver, self.cleaned = saver, cleaned

    def on_fit_start(self, trainer: Any) -> None:  # after Checkpoint's own start-up clean-up
        folder = self.saver.folder
        best = folder / BEST
        send(
            {
                "ready": trainer.step,
                "best": verify(best)["step"] if best.is_symlink() else 0,
                "stale": temporaries(folder),
                "cleaned": self.cleaned,
            }
        )

    def on_boundary(self, trainer: Any) -> None:  # after Checkpoint.on_boundary returned
        send({"saved": trainer.step, "best": self.saver.best_step or 0})


# --- the named phases of a save and of a publish ----------------------------------------------

PHASES = (
    "after the history log is appended",
    "after state.pt is written",
    "before the manifest",
    "after the manifest",
    "before the directory rename",
    "after the directory rename",
    "before the best pointer swap",
    "after the best pointer swap",
    "before the last pointer swap",
    "after the last pointer swap",
    "during rotation, after the manifest is deleted",
    "during rotation, after state.pt is deleted",
)


def arm(phase: str, trainer: Any, after: int) -> None:
    """In a forked child only: SIGKILL this process at `phase` of the first save at update
    `after` or later. The lab's functions are wrapped in this process, never edited."""
    from resume_lab import checkpoint, file_store, history_log

    def die() -> None:
        send({"phase": phase, "step": trainer.step})
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # never reached: SIGKILL cannot be handled

    def wrap(owner: Any, name: str, when: str, applies: Callable[..., bool]) -> None:
        original = getattr(owner, name)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            due = trainer.step >= after and applies(*args, **kwargs)
            if due and when == "before":
                die()
            result = original(*args, **kwargs)
            if due and when == "after":
                die()
            return result

        setattr(owner, name, wrapped)

    def named(name: str, arg: int = 0) -> Callable[..., bool]:
        return lambda *args, **kwargs: Path(os.fsdecode(args[arg])).name == name

    def committing(src: Any, dst: Any, *rest: Any, **kwargs: Any) -> bool:
        return Path(src).name.startswith("tmp-step-") and Path(dst).name.startswith("step-")

    def rotating(name: str) -> Callable[..., bool]:
        """An unlink inside a committed checkpoint directory: rotation deletes the manifest
        by its path, then the rest with shutil.rmtree (relative to a directory descriptor)."""

        def applies(path: Any, *rest: Any, dir_fd: int | None = None, **kwargs: Any) -> bool:
            path = Path(os.fsdecode(path))
            if dir_fd is not None:
                path = Path(os.readlink(f"/proc/self/fd/{dir_fd}")) / path
            return path.name == name and path.parent.name.startswith("step-")

        return applies

    def always(*args: Any, **kwargs: Any) -> bool:
        return True

    table = {
        PHASES[0]: (history_log.HistoryLog, "sync", "after", always),
        PHASES[1]: (file_store, "write_synced", "after", named(STATE_FILE, 1)),
        PHASES[2]: (checkpoint, "write_manifest", "before", always),
        PHASES[3]: (checkpoint, "write_manifest", "after", always),
        PHASES[4]: (os, "rename", "before", committing),
        PHASES[5]: (os, "rename", "after", committing),
        PHASES[6]: (os, "replace", "before", named(BEST, 1)),
        PHASES[7]: (os, "replace", "after", named(BEST, 1)),
        PHASES[8]: (os, "replace", "before", named(LAST, 1)),
        PHASES[9]: (os, "replace", "after", named(LAST, 1)),
        PHASES[10]: (os, "unlink", "after", rotating("manifest.json")),
        PHASES[11]: (os, "unlink", "after", rotating(STATE_FILE)),
    }
    owner, name, when, applies = table[phase]
    wrap(owner, name, when, applies)


def saver_child(request: dict[str, Any]) -> int:
    """A restart of the lab's train loop, as `resume-lab train` does it: resume from `last` if
    there is one, then save at every update until update `until`."""
    from resume_lab.build import build_trainer
    from resume_lab.resume import resume

    folder = Path(request["folder"])
    cleaned: list[str] = []
    saver = Checkpoint(folder, every=KILL_EVERY, keep=KILL_KEEP, log=cleaned.append)
    resuming = (folder / LAST).is_symlink()
    # A fresh start uses the run's own seed; a restart any other (resume overwrites it).
    seed = request["seed"] if resuming else KILL_CONFIG.seed
    callbacks = [saver, Reporter(saver, cleaned)]
    trainer = build_trainer(KILL_CONFIG, init_seed=seed, callbacks=callbacks)
    if resuming:
        resume(trainer, folder / LAST)
    if request.get("phase"):
        arm(request["phase"], trainer, after=max(trainer.step + 1, request.get("after", 0)))
    trainer.fit(request.get("until", KILL_CONFIG.steps))
    return 0


def reference_run(folder: Path, until: int) -> Path:
    """The same run, never interrupted, in this process: what every killed run must end as."""
    from resume_lab.build import build_trainer

    saver = Checkpoint(folder, every=until, keep=KILL_KEEP)
    trainer = build_trainer(KILL_CONFIG, init_seed=KILL_CONFIG.seed, callbacks=[saver])
    trainer.fit(until)
    return folder / LAST


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
            "from campaign.processes import zygote_main; zygote_main()"
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

    def expect(self, *wanted: str, timeout: float = 60, keep: bool = False) -> Any:
        """The next message with one of the keys `wanted` (or a text line containing one); the
        others wait in `inbox`, in order, for drain(). `keep`: it waits there too."""

        def matches(message: Any) -> bool:
            return any(w in message for w in wanted)

        for i, message in enumerate(self.inbox):
            if matches(message):
                return self.inbox[i] if keep else self.inbox.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            message = self._next(deadline)
            if keep or not matches(message):
                self.inbox.append(message)
            if matches(message):
                return message

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
