"""How much each measurement does: the full plan `make bench` runs, and a quick smoke test.

One dataclass for every measurement. A results file records, as its `plan`, the part it was
measured with (`recorded`): `serialization_*` fields in serialization.json, `distributed_*`
fields in distributed.json, the others in performance.json; the mode in every one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

MIB = 1 << 20


@dataclass(frozen=True)
class Plan:
    mode: str
    repeats: int  # timing repetitions per variant (sampler, hashes, verify)
    min_sample_s: float  # a sampler timing repeats its call until a sample lasts this long
    sampler_examples: int
    sampler_micro_batch: int
    sampler_ks: tuple[int, ...]
    save_sizes: tuple[tuple[str, int], ...]  # (key, bytes)
    save_repeats: int
    sync_before_save: bool  # os.sync() before each timed save: no variant pays another's flush
    model_width: int  # the load model: `model_layers` Linear(width, width) layers
    model_layers: int
    load_repeats: int
    load_in_subprocess: bool  # a fresh interpreter per load, so each peak is that load's alone
    loop_updates: int
    loop_repeats: int
    suite_repeats: int  # 0: the suite is not measured (quick mode: it would run itself)
    contract_repeats: int
    # torch.save vs safetensors: (key, bytes of float32 data, number of tensors)
    serialization_sizes: tuple[tuple[str, int, int], ...]
    serialization_repeats: int
    # DCP over gloo ranks: a save of the state sharded over `save_world` ranks, against one
    # process saving the same bytes (key, bytes of float32 data)
    distributed_save_world: int
    distributed_save_sizes: tuple[tuple[str, int], ...]
    distributed_save_repeats: int
    distributed_sync_before_save: bool
    # the lab's throughput: `resume_lab train --shards L` at each world size
    distributed_worlds: tuple[int, ...]
    distributed_shards: int
    distributed_steps: int
    distributed_warmup_updates: int  # not counted: the first updates of a run
    distributed_train_runs: int  # timed runs per world size, after one untimed
    distributed_timeout_s: float  # per launch


FULL = Plan(
    mode="full",
    repeats=5,
    min_sample_s=0.02,
    sampler_examples=1_000_000,
    sampler_micro_batch=8,  # 125,000 micro-batches per epoch: k = 100,000 is inside epoch 0
    sampler_ks=(10, 100, 1_000, 10_000, 100_000),
    save_sizes=(("mb_10", 10**7), ("mb_100", 10**8), ("gb_1", 10**9)),
    save_repeats=7,  # a 1 GB durable write is bimodal on this disk: more runs, steadier median
    sync_before_save=True,
    model_width=4096,  # 16 × (4096² + 4096) float32 parameters = 1.07 GB
    model_layers=16,
    load_repeats=2,
    load_in_subprocess=True,
    loop_updates=2_000,
    loop_repeats=9,
    suite_repeats=1,
    contract_repeats=3,
    serialization_sizes=(
        ("mib_1", 1 * MIB, 32),
        ("mib_16", 16 * MIB, 32),
        ("mib_128", 128 * MIB, 32),
        ("mib_1024", 1024 * MIB, 32),
    ),
    serialization_repeats=7,
    distributed_save_world=2,
    distributed_save_sizes=(("mb_10", 10**7), ("mb_100", 10**8)),
    distributed_save_repeats=7,
    distributed_sync_before_save=True,
    distributed_worlds=(1, 2, 4),
    distributed_shards=4,
    distributed_steps=100,
    distributed_warmup_updates=10,
    distributed_train_runs=5,
    distributed_timeout_s=300.0,
)
QUICK = Plan(
    mode="quick",
    repeats=2,
    min_sample_s=0.001,
    sampler_examples=20_000,
    sampler_micro_batch=8,
    sampler_ks=(10, 100, 1_000),
    save_sizes=(("kib_64", 64 * 1024), ("kib_512", 512 * 1024)),
    save_repeats=2,
    sync_before_save=False,
    model_width=128,
    model_layers=4,
    load_repeats=1,
    load_in_subprocess=False,  # the numbers mean nothing at this size; the interpreters cost 3 s
    loop_updates=30,
    loop_repeats=1,
    suite_repeats=0,
    contract_repeats=0,
    serialization_sizes=(("kib_16", 16 * 1024, 4), ("kib_64", 64 * 1024, 4)),
    serialization_repeats=1,
    distributed_save_world=2,
    distributed_save_sizes=(("kib_512", 512 * 1024),),
    distributed_save_repeats=1,
    distributed_sync_before_save=False,
    distributed_worlds=(1, 2),
    distributed_shards=2,
    distributed_steps=8,
    distributed_warmup_updates=2,
    distributed_train_runs=1,
    distributed_timeout_s=180.0,
)

# These results files record the fields that start with their prefix; performance.json the rest.
OWN_PREFIX = {"serialization": "serialization_", "distributed": "distributed_"}


def recorded(plan: Plan, name: str) -> dict[str, Any]:
    """The part of the plan results file `name` was measured with (its mode, and its fields)."""
    own = OWN_PREFIX.get(name)

    def belongs(key: str) -> bool:
        return key.startswith(own) if own else not key.startswith(tuple(OWN_PREFIX.values()))

    return {k: v for k, v in dataclasses.asdict(plan).items() if k == "mode" or belongs(k)}
