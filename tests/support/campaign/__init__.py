"""The fault campaign's shared machinery (tests/reliability/ holds its parts).

The campaign proves that no checkpoint the lab writes is ever lost or wrongly trusted, in the
layout where a checkpoint is a directory committed by one rename and `last`/`best` are
symlinks swapped by one rename. Its modules:

- `results`: `record()` writes the figures of a full run to $CAMPAIGN_RESULTS (never by
  default);
- `checks`: `restart_problems()`, the core check (what a restart would find wrong in a run
  folder, with no repair step), `trusted_wrongly()`, `leftovers()`, `forbid_unpickling()`;
- `disk`: `Disk`, a model of a power cut over a tree (per-file and per-directory fsync), and
  `sweep()`, which cuts the power before each call of an operation in turn;
- `scenarios`: what the sweeps run (a commit and pointer swap, atomic_save, a Checkpoint
  boundary);
- `processes`: `Zygote`, which forks the processes the campaign kills without paying for
  `import torch` each time, and the named phases at which a child SIGKILLs itself.
"""

from campaign.checks import (
    flip_bit,
    forbid_unpickling,
    global_state_kept,
    leftovers,
    listing,
    pointer_exists,
    restart_problems,
    saved_state,
    temporaries,
    trainer_state,
    trusted_wrongly,
    zip_regions,
)
from campaign.disk import Call, Disk, SimulatedCrash, SweepResult, World, materialize, sweep
from campaign.processes import (
    KILL_CONFIG,
    PHASES,
    ROOT,
    SUPPORT,
    Zygote,
    lab_command,
    reference_run,
    send_signal,
)
from campaign.results import MINIMUMS, record
from campaign.scenarios import (
    Boundary,
    a_training_state,
    atomic_save_sweep,
    boundary_check,
    commit_and_point,
    commit_sweep,
    copy_folder,
    freeze_boundary,
)

__all__ = [
    "KILL_CONFIG",
    "MINIMUMS",
    "PHASES",
    "ROOT",
    "SUPPORT",
    "Boundary",
    "Call",
    "Disk",
    "SimulatedCrash",
    "SweepResult",
    "World",
    "Zygote",
    "a_training_state",
    "atomic_save_sweep",
    "boundary_check",
    "commit_and_point",
    "commit_sweep",
    "copy_folder",
    "flip_bit",
    "forbid_unpickling",
    "freeze_boundary",
    "global_state_kept",
    "lab_command",
    "leftovers",
    "listing",
    "materialize",
    "pointer_exists",
    "record",
    "reference_run",
    "restart_problems",
    "saved_state",
    "send_signal",
    "sweep",
    "temporaries",
    "trainer_state",
    "trusted_wrongly",
    "zip_regions",
]
