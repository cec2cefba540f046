"""World.agree on every rank that snippets/gloo_ranks.py starts: in each
round, rank r asks to stop with rounds[i][r] (None: go on)."""

from resume_lab.events import StopReason
from resume_lab.world import World


def stop_votes(
    rank: int, world_size: int, rounds: list[tuple[StopReason | None, ...]]
) -> list[StopReason | None]:
    world = World(rank, world_size)
    return [world.agree(votes[rank]) for votes in rounds]
