"""The tests' shorthand for the lab's launcher (resume_lab.launcher): `resume_lab ARGS` at
world size W, to its end under a timeout (a gloo process can hang at exit, and a hung test must
fail, not block the suite), and the comparison of two run folders."""

from __future__ import annotations

from pathlib import Path

from resume_lab.compare import differing_files
from resume_lab.launcher import Launch, command, environment
from resume_lab.launcher import launch as launch_command

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 180.0


def lab_env() -> dict[str, str]:
    return environment()


def lab_command(world_size: int, args: list[str]) -> list[str]:
    """`python -m resume_lab ARGS` for W = 1 (no torchrun: the same code), torchrun
    --standalone for W > 1."""
    return command(world_size, "resume_lab", args)


def launch(world_size: int, args: list[str], *, timeout: float = TIMEOUT) -> Launch:
    """Run to the end; on overrun kill torchrun and every worker and fail (LaunchError)."""
    return launch_command(lab_command(world_size, args), timeout=timeout)


def train(world_size: int, folder: Path, *extra: str, timeout: float = TIMEOUT) -> Launch:
    return launch(
        world_size,
        ["train", "--output-dir", str(folder), "--quiet", *extra],
        timeout=timeout,
    )


def same_outputs(a: Path, b: Path) -> list[str]:
    """The names of the run outputs that differ byte for byte (empty: a bitwise match)."""
    return differing_files(a, b)
