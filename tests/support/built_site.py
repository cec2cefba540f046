"""Build the site once per test session, into a temporary folder, strictly."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class BuiltSite:
    root: Path
    log: str

    def pages(self) -> list[Path]:
        return sorted(self.root.rglob("*.html"))


def build_site(dest: Path, **env: str) -> BuiltSite:
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(dest)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", **env},
    )
    if run.returncode != 0:
        raise AssertionError(f"mkdocs build --strict failed:\n{run.stdout}{run.stderr}")
    return BuiltSite(dest, run.stdout + run.stderr)
