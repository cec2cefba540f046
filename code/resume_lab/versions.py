"""The versions that wrote a file: this lab's, torch's, NumPy's, Python's."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

import numpy as np
import torch

try:
    LAB_VERSION = version("resume-lab")
except PackageNotFoundError:  # a source tree that was never installed
    LAB_VERSION = "0+unknown"


def versions() -> dict[str, str]:
    # str(): torch.__version__ is a TorchVersion, a class the restricted
    # unpickler refuses.
    return {
        "resume_lab": LAB_VERSION,
        "torch": str(torch.__version__),
        "numpy": str(np.__version__),
        "python": platform.python_version(),
    }
