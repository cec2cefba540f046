"""Every name in a run folder, in one place: what `train` writes, what a
restart looks for, and what start-up clean-up may remove.

    run/
      step-000040/          a checkpoint, committed by one rename:
        state.pt              one process: the whole training state
        train_state.pt        W processes: what every rank holds alike,
        __0_0.distcp ...      beside each rank's tensors and DCP's
        .metadata             index of them (names DCP chooses)
        manifest.json         every file's size and hash, written last
      tmp-step-000060-1a2b  a save in progress (or killed): never loaded
      last -> step-000040   a relative symlink: what a restart resumes from
      best -> step-000040   the highest validation accuracy so far
      history.jsonl         one line per update, appended at each save
      timing.jsonl          each update's wall-clock time, beside it
      final.pt, final.json  a finished run's weights and their manifest
      history.json          a finished run's per-update records
      timing.json           and their wall-clock times
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

# --- a checkpoint directory and what it holds --------------------------------
STEP_NAME = re.compile(r"step-(\d{6,})")
STATE_FILE = "state.pt"
REPLICATED_FILE = "train_state.pt"
MANIFEST = "manifest.json"
# DCP's own names for what each rank writes and for its index
METADATA = ".metadata"
SHARD_SUFFIX = ".distcp"

# --- beside the checkpoints --------------------------------------------------
LAST = "last"
BEST = "best"
POINTERS = (LAST, BEST)
HISTORY_LOG = "history.jsonl"
# wall-clock step times: in no checkpoint's mark (they differ run to run)
TIMING_LOG = "timing.jsonl"

# --- what a finished run leaves ---------------------------------------------
FINAL = "final.pt"
HISTORY = "history.json"
TIMING = "timing.json"

# --- what is being written --------------------------------------------------
# a directory or pointer being written: never loaded, removed at the next
# start
TEMP_PREFIX = "tmp-"
# a single file being written (final.pt.tmp), renamed over its target
TEMP_SUFFIX = ".tmp"

NAMES = (
    STATE_FILE,
    REPLICATED_FILE,
    MANIFEST,
    METADATA,
    LAST,
    BEST,
    HISTORY_LOG,
    TIMING_LOG,
    FINAL,
    HISTORY,
    TIMING,
)


def checkpoint_name(step: int) -> str:
    """step-000040: six digits or more, so names sort as numbers do."""
    return f"step-{step:06d}"


def step_of(path: Path) -> int:
    match = STEP_NAME.fullmatch(path.name)
    if match is None:
        raise ValueError(f"{path.name} is not a checkpoint name")
    return int(match.group(1))


def temporary_name(name: str) -> str:
    """tmp-step-000040-1a2b3c4d: a fresh name beside `name`, so a save never
    writes into a directory that exists."""
    return f"{TEMP_PREFIX}{name}-{secrets.token_hex(4)}"
