"""What the loop and its callbacks share, and nothing else: the events the
Trainer emits, the Callback base, and why a run stops.

A leaf module: it imports nothing from the lab, so the loop, the callbacks,
the resume code and the session can all depend on it without a cycle.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


# --8<-- [start:events]
class Event(StrEnum):
    """The Trainer's events, in the order they fire within one update. The
    value is the Callback method that receives the event."""

    FIT_START = "on_fit_start"  # once, before the first update
    STEP_END = "on_step_end"  # after optimizer.step(); history written
    EVAL_END = "on_eval_end"  # after an evaluation; metrics passed along
    BOUNDARY = "on_boundary"  # end of the update: the place to save
    FIT_END = "on_fit_end"  # once, with the reason the run stopped


class StopReason(StrEnum):
    """Why fit() returned; compares equal to its plain string value."""

    COMPLETED = "completed"
    EARLY_STOPPING = "early_stopping"
    SIGNAL = "signal"  # SIGTERM or SIGINT
    TIME_BUDGET = "time_budget"
    STOP_AFTER = "stop_after"


# --8<-- [end:events]

COMPLETED = StopReason.COMPLETED
EARLY_STOPPING = StopReason.EARLY_STOPPING
SIGNAL = StopReason.SIGNAL
TIME_BUDGET = StopReason.TIME_BUDGET
STOP_AFTER = StopReason.STOP_AFTER
# Stopped early on purpose: the state is saved, rerunning resumes.
PREEMPTED = frozenset({SIGNAL, TIME_BUDGET, STOP_AFTER})


class Callback:
    """Every event the Trainer emits; each method does nothing until a
    subclass overrides it.

    A callback with a `state_key` has its state_dict() saved in every
    checkpoint and restored on resume: policy that counts (patience, schedules)
    must survive a restart.
    """

    state_key: str | None = None

    def on_fit_start(self, trainer: Any) -> None: ...
    def on_step_end(self, trainer: Any) -> None: ...
    def on_eval_end(self, trainer: Any, metrics: dict[str, float]) -> None: ...
    def on_boundary(self, trainer: Any) -> None: ...
    def on_fit_end(self, trainer: Any, reason: StopReason) -> None: ...

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass
