"""Resuming the data position: StepIndexedSampler.batches(epoch, start_micro=k) against
replaying k micro-batches, warm (the epoch's order already drawn) and cold (a fresh sampler,
as a new process has, draws it first)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Any

import torch

from resume_lab.sampler import StepIndexedSampler

from ..plan import Plan
from ..timing import medians, side_by_side, timed


def autorange(fn: Callable[[], Any], min_seconds: float) -> int:
    """How many calls of `fn` take at least `min_seconds` (1, 2, 5, 10, 20, ...), as timeit."""
    number = 1
    while True:
        for factor in (1, 2, 5):
            n = number * factor
            if timed(lambda n=n: [fn() for _ in range(n)]) >= min_seconds:
                return n
        number *= 10


def per_call(fn: Callable[[], Any], number: int) -> Callable[[], None]:
    def loop() -> None:
        for _ in range(number):
            fn()

    return loop


def measure(plan: Plan) -> dict[str, Any]:
    n, micro, seed = plan.sampler_examples, plan.sampler_micro_batch, 0
    warm = StepIndexedSampler(n, micro, seed=seed)
    warm.order(0)  # the epoch's permutation, drawn once
    state = warm.state_dict()
    assert plan.sampler_ks[-1] < warm.micro_batches_per_epoch

    def fresh() -> StepIndexedSampler:
        sampler = StepIndexedSampler(n, micro, seed=seed + 1)  # a new process's own seed...
        sampler.load_state_dict(state)  # ...replaced by the checkpoint's
        return sampler

    per_k: dict[str, Any] = {}
    for k in plan.sampler_ks:

        def start(k: int = k) -> torch.Tensor:
            return next(warm.batches(0, start_micro=k))

        def replay(k: int = k) -> torch.Tensor:
            return next(islice(warm.batches(0), k, None))  # skip k micro-batches, take the next

        def cold_start(k: int = k) -> torch.Tensor:
            return next(fresh().batches(0, start_micro=k))

        def cold_replay(k: int = k) -> torch.Tensor:
            return next(islice(fresh().batches(0), k, None))

        expected = warm.order(0)[k * micro : (k + 1) * micro]
        for fn in (start, replay, cold_start, cold_replay):
            assert torch.equal(fn(), expected), (fn.__name__, k)

        warm_fns = {"start": start, "replay": replay}
        numbers = {name: autorange(fn, plan.min_sample_s) for name, fn in warm_fns.items()}
        runs = side_by_side(
            {name: per_call(fn, numbers[name]) for name, fn in warm_fns.items()}, plan.repeats
        )
        runs = {name: [t / numbers[name] for t in times] for name, times in runs.items()}
        cold = side_by_side({"start": cold_start, "replay": cold_replay}, plan.repeats)
        runs |= {f"cold_{name}": times for name, times in cold.items()}
        per_k[f"k_{k}"] = {
            "k": k,
            "median_s": medians(runs),
            "calls_per_sample": numbers,
            "runs_s": runs,
        }
    draws = side_by_side({"draw": lambda: fresh().order(0)}, plan.repeats)["draw"]
    return {
        "examples": n,
        "micro_batch": micro,
        "micro_batches_per_epoch": warm.micro_batches_per_epoch,
        "ks": list(plan.sampler_ks),
        "per_k": per_k,
        "permutation_s": medians({"draw": draws})["draw"],
    }
