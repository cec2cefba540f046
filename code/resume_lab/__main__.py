"""`python -m resume_lab`: the same as the `resume-lab` command."""

import sys

from resume_lab.cli import run

if __name__ == "__main__":
    sys.exit(run())
