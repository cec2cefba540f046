"""The one way code runs isolated: seeded, optionally in a given folder, and leaving the global
state that torch, Python and NumPy keep per process as it found it.

Used by the fence runner (each fence and test: page_fences/pytest_plugin.py), by the build
(`{{ fence.ID.NAME }}`, `{{ output.NAME }}` in hooks/build_facts.py) and by fixtures wider than
one test.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

SEED = 0  # every fence and test starts from it


@contextlib.contextmanager
def isolated(directory: str | Path | None = None, *, seed: int | None = SEED) -> Iterator[None]:
    """Seed torch, Python and NumPy (unless `seed` is None), work in `directory` (if given),
    and afterwards put back the RNGs, thread count, default dtype, deterministic mode, grad
    mode, weights_only safe globals and working directory."""
    threads = torch.get_num_threads()
    dtype = torch.get_default_dtype()
    deterministic = torch.are_deterministic_algorithms_enabled()
    deterministic_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    grad_enabled = torch.is_grad_enabled()
    safe_globals = list(torch.serialization.get_safe_globals())
    torch_rng = torch.get_rng_state()
    python_rng = random.getstate()
    numpy_rng = np.random.get_state()
    cwd = os.getcwd()
    try:
        if directory is not None:
            os.chdir(directory)
        if seed is not None:
            torch.manual_seed(seed)
            random.seed(seed)
            np.random.seed(seed)
        yield
    finally:
        os.chdir(cwd)
        torch.set_num_threads(threads)
        torch.set_default_dtype(dtype)
        # Only when it changed: the first call in a process imports ~800 modules (0.8 s).
        if (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        ) != (deterministic, deterministic_warn_only):
            torch.use_deterministic_algorithms(deterministic, warn_only=deterministic_warn_only)
        torch.set_grad_enabled(grad_enabled)
        torch.serialization.clear_safe_globals()
        torch.serialization.add_safe_globals(safe_globals)
        torch.set_rng_state(torch_rng)
        random.setstate(python_rng)
        np.random.set_state(numpy_rng)
