"""The guard of `make test`'s inner loop (page_fences/tiers.py), from inside it: this module is
marked none of heavy, slow, full, so starting gloo ranks or torchrun here must fail at once,
before any process starts. (Fences: tests/docs/test_runner.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch.multiprocessing

from page_fences.tiers import InnerLoopError, launches_torchrun

TORCHRUN = Path(sys.executable).parent / "torchrun"


def test_starting_ranks_in_the_inner_loop_fails_and_says_how_to_mark_the_test():
    with pytest.raises(InnerLoopError, match=r"mark it `@pytest\.mark\.heavy`"):
        torch.multiprocessing.start_processes(print, nprocs=2, start_method="fork")
    with pytest.raises(InnerLoopError, match="gloo ranks"):
        torch.multiprocessing.spawn(print, nprocs=2)


def test_launching_torchrun_in_the_inner_loop_fails_but_other_processes_start():
    with pytest.raises(InnerLoopError, match="starts torchrun"):
        subprocess.run([str(TORCHRUN), "--nproc-per-node=2", "-m", "resume_lab"], check=False)
    with pytest.raises(InnerLoopError, match="starts torchrun"):
        subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--help"])
    done = subprocess.run([sys.executable, "-c", "print('ran')"], capture_output=True, text=True)
    assert done.stdout == "ran\n"


@pytest.mark.parametrize(
    ("args", "torchrun"),
    [
        (["/venv/bin/torchrun", "--standalone", "-m", "resume_lab"], True),
        ("torchrun --nproc-per-node 2 train.py", True),
        ([sys.executable, "-m", "torch.distributed.run", "--standalone"], True),
        ([sys.executable, "-m", "resume_lab", "train"], False),
        ([sys.executable, "-c", "print('torchrun')"], False),
    ],
)
def test_what_counts_as_torchrun(args, torchrun: bool):
    assert launches_torchrun(args) is torchrun
