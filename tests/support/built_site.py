"""Build the site into a folder, strictly, in this process or in one of its own.

A build of one's own, `python tests/support/built_site.py DEST RECORD`, writes RECORD (JSON:
its exit status and log) when it ends, so that whoever waits for it reads how it went
(tests/support/site_fixture.py starts one as soon as a session knows it needs the site).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class BuiltSite:
    root: Path
    log: str

    def pages(self) -> list[Path]:
        return sorted(self.root.rglob("*.html"))


def build_command(dest: Path) -> list[str]:
    return [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(dest)]


def build_env(**env: str) -> dict[str, str]:
    return {**os.environ, "NO_MKDOCS_2_WARNING": "1", **env}


def build_site(dest: Path, **env: str) -> BuiltSite:
    run = subprocess.run(
        build_command(dest),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=build_env(**env),
    )
    if run.returncode != 0:
        raise AssertionError(f"mkdocs build --strict failed:\n{run.stdout}{run.stderr}")
    return BuiltSite(dest, run.stdout + run.stderr)


def write_record(record: Path, returncode: int, log: str) -> None:
    """RECORD appears whole or not at all: whoever waits for it never reads half of it."""
    handle, temporary = tempfile.mkstemp(dir=record.parent, prefix=".record-")
    with os.fdopen(handle, "w", encoding="utf8") as out:
        json.dump({"returncode": returncode, "log": log}, out)
    os.replace(temporary, record)


def read_record(root: Path, record: Path) -> BuiltSite:
    done = json.loads(record.read_text("utf8"))
    if done["returncode"] != 0:
        raise AssertionError(f"mkdocs build --strict failed:\n{done['log']}")
    return BuiltSite(root, done["log"])


def main(dest: str, record: str) -> int:
    """Build into DEST (the environment says how: SITE_URL) and record how it went."""
    run = subprocess.run(
        build_command(Path(dest)), cwd=ROOT, capture_output=True, text=True, env=build_env()
    )
    write_record(Path(record), run.returncode, run.stdout + run.stderr)
    return run.returncode


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
