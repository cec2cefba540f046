"""`resume-lab demo --world-size W`: A, B and C under torchrun, B1 = B's stop resumed by one
process. Bad input is refused before anything is launched; a launch that overruns is killed
with its workers; the slow test runs the whole demo at W=2."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import pytest
from torchrun import same_outputs

from resume_lab import distributed_demo
from resume_lab.cli import EXIT_OK, EXIT_USAGE, main
from resume_lab.launcher import LaunchError, launch


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own exits
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


BAD_INPUT = [
    (["--world-size", "0"], "argument --world-size: must be in 1..8"),
    (["--world-size", "9"], "argument --world-size: must be in 1..8"),
    (["--world-size", "two"], "argument --world-size: expected a whole number, got 'two'"),
    (["--world-size", "2", "--kill-at", "0"], "--kill-at 0 is outside 1..119"),
    (["--world-size", "2", "--steps", "10", "--kill-at", "10"], "outside 1..9"),
    (["--world-size", "2", "--steps", "1"], "the demo needs --steps 2 or more"),
    (["--world-size", "2", "--output-dir", "/proc/x"], "cannot write to output folder"),
]


def test_bad_input_is_one_line_exit_2_and_launches_nothing(tmp_path: Path, capsys, monkeypatch):
    def no_launch(*args, **kwargs):
        raise AssertionError("launched despite bad input")

    monkeypatch.setattr(distributed_demo, "launch", no_launch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "thesis.tex").write_text("precious", "utf8")
    foreign = (["--world-size", "2", "--output-dir", str(tmp_path)], "holds files the demo did not")
    for argv, message in [*BAD_INPUT, foreign]:
        code, out, err = run(["demo", *argv], capsys)
        lines = err.strip().splitlines()
        assert (code, out, len(lines)) == (EXIT_USAGE, "", 1), (argv, err)
        assert message in lines[0] and "Traceback" not in err, (argv, lines[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thesis.tex"]
    # the negative control's switch is hidden from train's help; --world-size is in demo's
    assert "skip-rng-restore" not in run(["train", "--help"], capsys)[1]
    assert "--world-size W" in run(["demo", "--help"], capsys)[1]


def process_state(pid: int) -> str | None:
    """The process's state letter, None once it is gone (a zombie, 'Z', is gone too)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None
    return None if state in "ZX" else state


@pytest.mark.heavy  # real processes, launched and killed
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_an_overrun_kills_the_launch_and_its_workers_in_their_own_sessions(tmp_path: Path):
    # a stand-in for torchrun: a worker in a session of its own, as torchrun starts them
    launcher = textwrap.dedent(f"""
        import subprocess, sys, time
        worker = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
        )
        open({str(tmp_path / "worker.pid")!r}, "w").write(str(worker.pid))
        print("started", flush=True)
        time.sleep(120)
    """)
    with pytest.raises(LaunchError, match=r"timed out after 5 s and killed(.|\n)*started"):
        launch([sys.executable, "-c", launcher], timeout=5.0)
    worker = int((tmp_path / "worker.pid").read_text())
    deadline = time.monotonic() + 5  # SIGKILL is sent, not awaited: give it a moment
    while process_state(worker) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_state(worker) is None


@pytest.mark.slow
def test_the_demo_at_two_ranks_passes_end_to_end(tmp_path: Path, capsys):
    code, out, err = run(
        ["demo", "--world-size", "2", "--steps", "24", "--output-dir", str(tmp_path)], capsys
    )
    assert code == EXIT_OK, out + err
    lines = out.splitlines()
    assert lines[0].startswith("resume lab at world size 2: seed 0, 24 updates, kill at 12")
    assert "2 logical shards" in lines[0]
    assert lines[-1] == "PASS: A == B (W=2) == B1 (W=1) byte for byte, C differs"
    assert "first at update 13" in out and "__0_0.distcp, __1_0.distcp" in out
    # five launches, each said in one line as it ends; B's first is the expected stop
    launched = [line for line in err.splitlines() if line.startswith("[demo] ")]
    assert len(launched) == 5, err
    assert "--stop-after 12: exit 1 (as asked: stopped, last at update 12)" in launched[1], err

    report = json.loads((tmp_path / "report.json").read_text("utf8"))
    assert report["resumed_at"] == {"B": 12, "B1": 12, "C": 12}
    assert report["differing_files"]["B"] == report["differing_files"]["B1"] == []
    assert report["first_divergent_step"] == {"B": None, "B1": None, "C": 13}
    assert [r["exit"] for r in report["launches"]] == [0, 1, 0, 0, 0]
    # checked again here, not only by the demo's own comparison
    assert same_outputs(tmp_path / "A", tmp_path / "B") == []
    assert same_outputs(tmp_path / "A", tmp_path / "B1") == []
    assert same_outputs(tmp_path / "A", tmp_path / "C") != []
    assert (tmp_path / "B1" / "last").is_symlink()  # copied as a link, not as a folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["A", "B", "B1", "C", "report.json"]
