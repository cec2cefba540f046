"""Launch the lab under torchrun (or as one process) from a test, always
under a timeout: a gloo process can hang at exit, and a hung test must fail,
not block the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from resume_lab.distributed_demo import kill_tree

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TIMEOUT = 180.0


def lab_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "code")
    env["OMP_NUM_THREADS"] = "1"
    # torchrun's own warnings (OMP_NUM_THREADS notice) are not the lab's
    env["PYTHONWARNINGS"] = "ignore"
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    return env


def command(world_size: int, args: list[str]) -> list[str]:
    """`python -m resume_lab ARGS` for W = 1 (no torchrun: the same code),
    torchrun --standalone for W > 1."""
    if world_size == 1:
        return [sys.executable, "-m", "resume_lab", *args]
    return [
        str(BIN / "torchrun"),
        "--standalone",
        f"--nproc-per-node={world_size}",
        "-m",
        "resume_lab",
        *args,
    ]


def launch(
    world_size: int, args: list[str], *, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """Run to the end; on overrun kill torchrun and every worker (each in a
    session of its own) and fail. Output goes to files, not pipes: reading
    it never waits for a worker that still holds a pipe open."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            command(world_size, args),
            env=lab_env(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        try:
            returncode = proc.wait(timeout=timeout)
        except BaseException:
            kill_tree(proc)
            err.seek(0)
            raise AssertionError(
                f"timed out or interrupted after at most {timeout} s: "
                f"{command(world_size, args)}\n"
                f"{err.read().decode('utf8', 'replace')[-2000:]}"
            ) from None
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf8", "replace")
        stderr = err.read().decode("utf8", "replace")
    return subprocess.CompletedProcess(proc.args, returncode, stdout, stderr)


def train(
    world_size: int, folder: Path, *extra: str, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    return launch(
        world_size,
        ["train", "--output-dir", str(folder), "--quiet", *extra],
        timeout=timeout,
    )


def same_outputs(a: Path, b: Path) -> list[str]:
    """The names of the run outputs that differ byte for byte (empty: a
    bitwise match)."""
    names = ("final.pt", "history.json", "history.jsonl")
    return [name for name in names if (a / name).read_bytes() != (b / name).read_bytes()]
