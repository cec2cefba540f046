"""How bench starts a measurement's worker processes: `launch`, through the lab's one launcher
(`resume_lab.launcher`).

A worker is a module of bench/measurements run as `python -m` in the repository, with the lab
importable, OMP_NUM_THREADS=1 and none of an outer torchrun's variables; for W > 1 under
`torchrun --standalone`. Every launch runs under a timeout: a gloo process can hang at exit, and
an overrun kills torchrun and every worker's session (the launcher's job) and fails the
measurement. Output goes to files, never to pipes a hung worker could fill.
"""

from __future__ import annotations

from pathlib import Path

from resume_lab.launcher import command, environment
from resume_lab.launcher import launch as run_to_end

# The repository: every process bench starts runs in it.
ROOT = Path(__file__).resolve().parent.parent


def launch(world_size: int, module: str, args: list[str], timeout: float) -> float:
    """Run to the end and return its wall time; fail on a non-zero exit or an overrun."""
    argv = command(world_size, module, args)
    done = run_to_end(argv, timeout=timeout, env=environment(ROOT), cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"exit {done.returncode}: {argv}\n{done.stderr[-3000:]}")
    return done.seconds
