"""The lab's command line: the usage of each subcommand, as argparse
prints it."""

import contextlib
import io
import os

from resume_lab.cli import main
from resume_lab.parser import EPILOG

columns = os.environ.get("COLUMNS")
os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal's width; fix it


def help_text(*argv: str) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            main([*argv, "--help"])
        except SystemExit as done:  # --help prints and exits with status 0
            assert done.code == 0
        else:
            raise AssertionError("--help did not exit")
    return printed.getvalue()


usages = []
for command in ("demo", "train", "verify"):
    text = help_text(command)
    usage = text.split("\n\n")[0]  # the usage block, up to the first blank line
    assert usage.startswith(f"usage: resume-lab {command}")
    # Every help ends with them: the epilog, exit codes last.
    assert "exit codes:" in text and "75   preempted" in text
    assert text.rstrip().endswith(EPILOG.rstrip())
    assert EPILOG.rstrip().split("\n\n")[-1].startswith("exit codes:")
    usages.append(usage)
demo_help = help_text("demo")
for option in (
    "--seed",
    "--steps",
    "--accum",
    "--threads",
    "--kill-at",
    "--output-dir",
):
    assert option in demo_help
if columns is None:
    del os.environ["COLUMNS"]
else:
    os.environ["COLUMNS"] = columns
print("\n".join(usages))
