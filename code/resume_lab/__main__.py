"""`python -m resume_lab`: the same as the `resume-lab` command."""

import sys

from resume_lab.cli import main

if __name__ == "__main__":
    sys.exit(main())
