"""The one-file store: one process keeps its whole training state in one
file, state.pt, committed with its manifest like any checkpoint.

A store says how a Trainer's model and optimizer are read and put back, and
which files hold them; what a checkpoint holds and the order of a resume
are resume.py's, the same for every store (dcp_store.py is the other).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from resume_lab import state_keys as keys
from resume_lab.atomic import write_synced
from resume_lab.checkpoint import load_checkpoint
from resume_lab.hashing import FileDigest
from resume_lab.loop import Trainer
from resume_lab.run_files import STATE_FILE
from resume_lab.state_file import Saved, check_keys


class FileStore:
    state_file: str = STATE_FILE
    layout: tuple[str, ...] = keys.ALL  # the keys of its state file
    volatile: frozenset[str] = frozenset()  # every file is the same bytes

    def weights(self, trainer: Trainer) -> dict[str, Any]:
        return {
            keys.MODEL: trainer.model.state_dict(),
            keys.OPTIMIZER: trainer.optimizer.state_dict(),
        }

    def write(
        self, trainer: Trainer, state: dict[str, Any], tmp: Path
    ) -> tuple[dict[str, FileDigest], Any]:
        """The whole state into tmp/state.pt, done when this returns."""
        return {STATE_FILE: write_synced(state, tmp / STATE_FILE)}, None

    def read(self, checkpoint: Path) -> Saved:
        state, manifest = load_checkpoint(checkpoint)
        check_keys(checkpoint / STATE_FILE, state, self.layout)
        return Saved(checkpoint, state, manifest, self)

    def load_weights(self, trainer: Trainer, saved: Saved) -> dict[str, Any]:
        """The model, then the optimizer's moments and the lr in use; the
        state file held them with everything else."""
        trainer.model.load_state_dict(saved.state[keys.MODEL])
        trainer.optimizer.load_state_dict(saved.state[keys.OPTIMIZER])
        return saved.state

    def whole_model(self, trainer: Trainer) -> dict[str, Any]:
        """The weights for final.pt."""
        return dict(trainer.model.state_dict())

    def describe(self, saved: Saved) -> list[str]:
        state = saved.state
        model = state[keys.MODEL]
        return [
            f"  model: {len(model)} tensors, "
            f"{sum(t.numel() for t in model.values()):,} parameters",
            f"  optimizer: {len(state[keys.OPTIMIZER]['state'])} parameter "
            f"states; scheduler at {state[keys.SCHEDULER]['last_epoch']} "
            "updates",
            f"  rng: {', '.join(state[keys.RNG])}; "
            f"sampler seed {state[keys.SAMPLER]['seed']}",
        ]
