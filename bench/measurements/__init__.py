"""The measurement modules: each has `measure(plan) -> dict`, numbers and names only, no wording.

performance.json: sampler_position, save_speed, hash_speed, load_memory, loop_overhead,
suite_time. serialization.json: serialization. distributed.json: distributed_save,
distributed_train (each launches its own worker, `main` in the same module, under torchrun).
bench/__main__.py says which measurement fills which key of which results file.
"""
