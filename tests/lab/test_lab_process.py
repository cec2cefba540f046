"""The command line as separate processes: a resume in a new process, and a real SIGTERM.

Each start of Python + torch costs a second or two, so these are the only subprocess tests:
the resume in a new process is heavy, and those that only repeat in a real process what
in-process tests already prove are slow (`make test` deselects both; `make test-all` runs
them).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from resume_lab.checkpoint import verify
from resume_lab.cli import EXIT_OK, EXIT_PREEMPTED, EXIT_USAGE, main

LAB = [sys.executable, "-m", "resume_lab"]


@pytest.mark.heavy  # two new processes of Python and torch: `make test-all` (page_fences/tiers.py)
def test_new_process_resume_equals_uninterrupted(tmp_path: Path, capsys):
    args = ["train", "--steps", "30", "--save-every", "5", "--quiet", "--threads", "1"]
    pieces = [*args, "--output-dir", str(tmp_path / "pieces"), "--stop-after", "12"]
    # The first piece runs in its own process: nothing of it survives but the files.
    first = subprocess.Popen(
        [*LAB, *pieces], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    # Meanwhile, the uninterrupted reference runs here.
    assert main([*args, "--output-dir", str(tmp_path / "whole")]) == EXIT_OK
    _, stderr = first.communicate(timeout=120)
    assert first.returncode == EXIT_PREEMPTED, stderr
    assert "Traceback" not in stderr
    assert verify(tmp_path / "pieces" / "last")["step"] == 12
    # The same command again, twice more, here: 12 -> 24 (preempted), 24 -> 30 (done).
    assert main(pieces) == EXIT_PREEMPTED
    assert main(pieces) == EXIT_OK
    capsys.readouterr()
    for name in ("final.pt", "history.json"):
        assert (tmp_path / "whole" / name).read_bytes() == (tmp_path / "pieces" / name).read_bytes()


@pytest.mark.slow
def test_sigterm_saves_at_a_boundary_and_exits_75(tmp_path: Path):
    folder = tmp_path / "run"
    command = [
        *LAB,
        "train",
        "--output-dir",
        str(folder),
        "--steps",
        "1000000",
        "--save-every",
        "1000000",
    ]
    child = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        for line in child.stderr:  # plain logs: not a terminal
            if "training updates" in line:
                break
        time.sleep(0.2)  # well inside the loop
        child.send_signal(signal.SIGTERM)
        for line in child.stderr:
            if "stopping at the next update boundary" in line:
                break
        child.send_signal(signal.SIGTERM)  # a second one while it saves: acknowledged, ignored
        child.wait(timeout=60)
        rest = child.stderr.read()
    finally:
        if child.poll() is None:
            child.kill()
        child.stderr.close()
        child.stdout.close()
    assert child.returncode == EXIT_PREEMPTED, rest
    assert "Traceback" not in rest
    manifest = verify(folder / "last")
    assert 0 < manifest["step"] < 1_000_000
    assert not [p for p in folder.iterdir() if "tmp-" in p.name]
    assert not (folder / "final.pt").exists()


@pytest.mark.slow
def test_usage_error_from_a_real_process(tmp_path: Path):
    result = subprocess.run([*LAB, "--kill-at", "0"], capture_output=True, text=True, timeout=60)
    assert result.returncode == EXIT_USAGE
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "--kill-at 0 is outside 1..119" in result.stderr
    assert result.stdout == ""


@pytest.mark.slow
def test_kill_9_while_saving_leaves_a_loadable_checkpoint(tmp_path: Path, capsys):
    """SIGKILL (no handler can run) into a process that saves after every update, then resume."""
    folder = tmp_path / "run"
    args = ["train", "--output-dir", str(folder), "--steps", "300", "--quiet"]
    child = subprocess.Popen([*LAB, *args, "--save-every", "1"], stderr=subprocess.PIPE, text=True)
    try:
        for line in child.stderr:
            if "training updates" in line:
                break
        time.sleep(0.5)  # a few dozen saves in: the kill most likely lands inside one
        child.kill()
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    # At once, before anything else touches the folder: `verify DIR/last` passes, whatever the
    # kill interrupted, and so does every checkpoint directory that has a manifest. Only one
    # that rotation was deleting (manifest first) may lack it, and it is older than `last`.
    assert main(["verify", str(folder / "last")]) == EXIT_OK
    assert f"{folder / 'last'}: OK" in capsys.readouterr().out
    newest = verify(folder / "last")["step"]
    assert newest > 0
    for checkpoint in sorted(folder.glob("step-*")):
        if (checkpoint / "manifest.json").exists():
            verify(checkpoint)
        else:
            assert int(checkpoint.name[5:]) < newest, f"{checkpoint.name} has no manifest"
    # The same command resumes (save cadence is not part of the configuration) and ends
    # bitwise equal to a run that was never killed.
    assert main([*args, "--save-every", "100"]) == EXIT_OK, capsys.readouterr().err
    whole = ["train", "--output-dir", str(tmp_path / "whole"), "--steps", "300", "--quiet"]
    assert main(whole) == EXIT_OK
    capsys.readouterr()
    for name in ("final.pt", "history.json"):
        assert (folder / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()
