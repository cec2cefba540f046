"""The docs include functions by section markers; every promised section must exist and compile."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

import resume_lab

PACKAGE = Path(resume_lab.__file__).parent
MARKER = re.compile(r"#\s*--8<--\s*\[(start|end):([\w-]+)\]")
PROMISED = [
    "atomic_save",
    "write_synced",
    "commit",
    "verify",
    "load_checkpoint",
    "point",
    "clean_start",
    "rotate",
    "save_training",
    "sync",
    "read_history",
    "sampler",
    "evaluate",
    "trainer_fit",
    "early_stopping",
    "checkpoint_callback",
    "capture_rng",
    "restore_rng",
    "resume",
    "lr_lambda",
]


def sections() -> dict[str, tuple[Path, str]]:
    found: dict[str, tuple[Path, str]] = {}
    for path in sorted(PACKAGE.glob("*.py")):
        lines = path.read_text("utf8").splitlines()
        open_at: dict[str, int] = {}
        for number, line in enumerate(lines):
            match = MARKER.search(line)
            if not match:
                continue
            kind, name = match.groups()
            if kind == "start":
                assert name not in found and name not in open_at, f"{path.name}: {name} twice"
                open_at[name] = number
            else:
                assert name in open_at, f"{path.name}:{number + 1}: [end:{name}] without a start"
                body = "\n".join(lines[open_at.pop(name) + 1 : number])
                found[name] = (path, body)
        assert not open_at, f"{path.name}: never ended: {sorted(open_at)}"
    return found


ALL = sections()


@pytest.mark.parametrize("name", PROMISED)
def test_promised_section_exists(name):
    assert name in ALL


@pytest.mark.parametrize("name", sorted(ALL))
def test_section_is_valid_python_on_its_own(name):
    path, body = ALL[name]
    compile(textwrap.dedent(body), f"{path.name}:{name}", "exec")
    assert len(body.splitlines()) <= 70, f"{name} is too long to read on a page"
