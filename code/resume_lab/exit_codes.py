"""What `resume-lab` exits with, so a job scheduler can tell "finished" from
"preempted, run me again" from "this checkpoint is damaged"."""

# --8<-- [start:exit_codes]
EXIT_OK = 0
# a checkpoint failed verification, or the demo's A == B contract failed
EXIT_REJECTED = 1
# bad option value, unwritable output folder, another configuration's checkpoint
EXIT_USAGE = 2
# EX_IOERR: a checkpoint could not be written (disk full?); `last` intact
EXIT_SAVE_FAILED = 74
# EX_TEMPFAIL: stopped early on purpose, `last` saved; rerun the same command
EXIT_PREEMPTED = 75
EXIT_INTERRUPTED = 130  # Ctrl-C in the demo
# --8<-- [end:exit_codes]
