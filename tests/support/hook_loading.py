"""Load a build hook of hooks/ the way MkDocs loads it, for the tests of the hooks.

MkDocs imports `hooks/NAME.py` from its path as a module named NAME, with hooks/ first on
sys.path while the module runs and the old sys.path put back afterwards
(mkdocs/config/config_options.py, `Hooks._load_hook`), so a hook imports its neighbours by
name. The tests load hooks the same way, and nothing else adds hooks/ to sys.path.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

HOOKS = Path(__file__).resolve().parents[2] / "hooks"


def load_hook(name: str) -> ModuleType:
    path = HOOKS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    before = sys.path.copy()
    sys.path.insert(0, str(HOOKS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = before
    return module
