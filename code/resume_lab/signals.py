"""SIGTERM / SIGINT become a flag that the loop reads at the next update
boundary."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from resume_lab.events import SIGNAL, Callback
from resume_lab.loop import Trainer


# --8<-- [start:preemption]
class PreemptionFlag(Callback):
    """Set by SIGTERM or SIGINT; at the next update boundary it asks the
    Trainer to stop, like any other stop condition, and the run saves.

    The handler only sets a flag: no exception is raised in the middle of a
    forward pass or, worse, of a save. A second signal while stopping is
    acknowledged and otherwise ignored, so it cannot interrupt the checkpoint
    being written.
    """

    def __init__(self) -> None:
        self.requested = False
        self.signal_name: str | None = None

    def on_boundary(self, trainer: Trainer) -> None:
        if self.requested:
            trainer.request_stop(SIGNAL)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.requested:
            message = (
                f"\n{name} again: still saving the checkpoint, please wait\n"
            )
        else:
            message = (
                f"\n{name}: stopping at the next update boundary and saving\n"
            )
            self.requested, self.signal_name = True, name
        # os.write: safe even if the signal interrupted a print
        os.write(2, message.encode())

    @contextmanager
    def installed(
        self,
        signums: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT),
        *,
        restore: bool = True,
    ) -> Iterator[PreemptionFlag]:
        """Handle `signums` inside the block.

        restore=False ignores them after it, until the process exits: a signal
        that lands after the save must not turn "saved, exit 75" into a
        kill."""
        previous = {
            signum: signal.signal(signum, self._handle) for signum in signums
        }
        try:
            yield self
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler if restore else signal.SIG_IGN)


# --8<-- [end:preemption]
