"""A progress bar on a terminal; plain log lines everywhere else.

No extra dependency."""

from __future__ import annotations

import sys
from typing import TextIO

from resume_lab.events import (
    COMPLETED,
    EARLY_STOPPING,
    SIGNAL,
    STOP_AFTER,
    TIME_BUDGET,
    Callback,
    StopReason,
)
from resume_lab.loop import Trainer

BAR_WIDTH = 30
# How the last line says why fit() returned.
ENDINGS = {
    COMPLETED: "completed",
    EARLY_STOPPING: "stopped early (no better validation accuracy)",
    SIGNAL: "stopped by a signal",
    TIME_BUDGET: "stopped: --time-budget used up",
    STOP_AFTER: "stopped by --stop-after",
}


class Progress(Callback):
    """Draws a bar on a TTY unless quiet; always writes evaluations and the end
    as plain lines."""

    def __init__(
        self,
        label: str,
        total: int,
        *,
        quiet: bool = False,
        stream: TextIO | None = None,
    ) -> None:
        self.label, self.total = label, total
        self.stream = stream if stream is not None else sys.stderr
        self.bar = not quiet and self.stream.isatty()
        self._drawn = False

    def line(self, text: str) -> None:
        if self._drawn:  # finish the bar's line first
            self.stream.write("\n")
            self._drawn = False
        self.stream.write(f"[{self.label}] {text}\n")
        self.stream.flush()

    def on_fit_start(self, trainer: Trainer) -> None:
        self.line(f"training updates {trainer.step + 1}..{self.total}")

    def on_step_end(self, trainer: Trainer) -> None:
        if not self.bar:
            return
        done = trainer.step / self.total
        filled = int(BAR_WIDTH * done)
        record = trainer.history[-1]
        self.stream.write(
            f"\r[{self.label}] {'#' * filled}{'.' * (BAR_WIDTH - filled)} "
            f"{trainer.step}/{self.total} loss {record['loss']:.4f}"
        )
        self.stream.flush()
        self._drawn = True

    def on_eval_end(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        self.line(
            f"update {trainer.step}: val_loss {metrics['val_loss']:.4f} "
            f"val_accuracy {metrics['val_accuracy']:.4f}"
        )

    def on_fit_end(self, trainer: Trainer, reason: StopReason) -> None:
        if reason == COMPLETED and trainer.step < self.total:
            # fit() was asked to stop here
            self.line(f"paused at update {trainer.step}")
        else:
            self.line(f"{ENDINGS.get(reason, reason)} at update {trainer.step}")
