"""The Checkpoint callback for W processes: the same cadence, best and
rotation policy; saving is collective, committing and the pointers are rank
0's. With `asynchronous`, training goes on while DCP writes, and the commit
waits until the write has finished."""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

from resume_lab.callbacks import Checkpoint
from resume_lab.checkpoint import verify
from resume_lab.events import StopReason
from resume_lab.run_folder import (
    LAST,
    checkpoint_name,
    clean_start,
    point,
    pointed,
    rotate,
)
from resume_lab.sharded import ShardedTrainer
from resume_lab.sharded_checkpoint import (
    PendingSave,
    commit,
    load_replicated,
    start_save,
)


class ShardedCheckpoint(Checkpoint):
    def __init__(
        self, *args: Any, asynchronous: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.asynchronous = asynchronous
        self.pending: PendingSave | None = None
        self.pending_pointers: tuple[str, ...] = ()
        self.group: Any = None

    def on_fit_start(self, trainer: ShardedTrainer) -> None:  # type: ignore[override]
        if trainer.world.is_writer:
            self.folder.mkdir(parents=True, exist_ok=True)
            for line in clean_start(self.folder):
                self.log(line)
        trainer.world.barrier()  # nobody writes before the folder is clean
        if self.asynchronous and trainer.world.distributed:
            # async_save runs its collectives from a thread: a group of its own
            self.group = dist.new_group(backend="gloo")
        last = pointed(self.folder, LAST)
        if last is not None and last.name == checkpoint_name(trainer.step):
            self._current = last

    def on_boundary(self, trainer: ShardedTrainer) -> None:  # type: ignore[override]
        # commit a finished background write as soon as it is seen
        if (
            self.pending is not None
            and trainer.world.is_writer
            and self.pending.written
        ):
            self.finish(trainer)
        super().on_boundary(trainer)

    def on_fit_end(self, trainer: ShardedTrainer, reason: StopReason) -> None:  # type: ignore[override]
        self.finish(trainer)
        current = self._current
        if current is not None and current.name == checkpoint_name(
            trainer.step
        ):
            if trainer.world.is_writer:
                point(self.folder, LAST, current)
        else:
            self.save(trainer, (LAST,))
        self.finish(trainer)
        trainer.world.barrier()  # `last` is committed before any rank exits

    def save(self, trainer: ShardedTrainer, pointers: tuple[str, ...]) -> None:  # type: ignore[override]
        if LAST in pointers:
            self.last_saved_step = trainer.step  # first: the save includes it
        self.finish(trainer)  # one write in flight at a time
        writer = trainer.world.is_writer
        self.pending = start_save(
            trainer,
            self.folder,
            log=self.history_log if writer else None,
            asynchronous=self.asynchronous,
            async_group=self.group,
        )
        self.pending_pointers = pointers
        self._current = self.pending.target
        if not self.asynchronous:
            self.finish(trainer)

    def finish(self, trainer: ShardedTrainer) -> None:
        """Wait for the write in flight; rank 0 commits it, checks it and
        moves its pointers."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        pending.wait()
        if not trainer.world.is_writer:
            return
        checkpoint = commit(pending, trainer.config.to_dict())
        verify(checkpoint)  # an unread checkpoint is a hope
        load_replicated(checkpoint)
        for pointer in self.pending_pointers:
            point(self.folder, pointer, checkpoint)
        rotate(self.folder, self.keep)
