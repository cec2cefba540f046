"""Run the ledger's proofs on other torch releases and record, per claim, what happened.

    python -m versions                    # torch 2.8.0, a bare `torch`, and .venv's
    python -m versions --torch 2.8.0      # one release
    python -m versions --record-only      # rewrite the results from the last runs' raw files

Each release gets an environment of its own under build/torch-SPEC (a CUDA build of torch
from the registry, 5.5-6.5 GB with its nvidia packages; it runs on the CPU), with the
project's other pins and the lab installed without dependencies, so the pin on 2.13.0 does
not pull torch back. "newest" is what pip installs for a bare `torch` when that environment is
made; it is reused while its stamp (the spec, the pins, pyproject.toml) matches. The results
are named by the version the environment reports, never by a version typed here.

In each environment pytest runs the pages' python blocks (those not marked `notest`) and every
test the ledger names as a proof, with the markers a plain `pytest` uses (the slow and full
tiers left out: recorded as not run, deselected), in one process and with OMP_NUM_THREADS=1.
The results land in docs/assets/versions/torch-VERSION.json: when the run began, the commit
it ran (and whether the tree had uncommitted changes), the Python, NumPy and safetensors the
environment reports and whether torch saw a GPU, the command, and for each claim of the
ledger `passed`, `failed` with where (the fence and its line, `PAGE.md#ID, line N of the
block`, or a test's page line) and the message, or `not run` and why, with the digest of the
proof's text as it stood when the run began (versions/proofs.py). The site's *Other torch
releases* page renders these files.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import yaml

from versions.proofs import fence_where, page_fences, proof_digests

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "assets" / "versions"
BUILD = ROOT / "build"
EXCEPT_RECORDS = ":(exclude)docs/assets/versions"
DEFAULT_SPECS = ("2.8.0", "newest", "installed")
# What a plain `pytest` leaves out (pyproject.toml); those proofs are recorded as not run,
# with this reason when pytest reported them deselected (versions/report.py).
MARKERS = "not slow and not full"
DESELECTED = "deselected as slow or full"
TIMEOUT_S = 3 * 3600
TEST_PROOF = re.compile(r"^tests/[\w/]+\.py::")
# Tests of the recorded runs themselves: they read what this module writes, so running them
# inside a run would judge a half-written record. They run in `make test`, on the pinned torch.
OF_THE_RECORD = "tests/docs/test_versions.py"
FENCE_PROOF = re.compile(r"^(?P<page>[\w-]+\.md)#(?P<id>[\w-]+)$")


def python_of(spec: str) -> Path:
    if spec == "installed":
        return ROOT / ".venv" / "bin" / "python"
    return BUILD / f"torch-{spec}" / "bin" / "python"


def other_pins() -> list[str]:
    """requirements.txt without torch: every release runs with the same NumPy, safetensors..."""
    return [
        line
        for line in (ROOT / "requirements.txt").read_text("utf8").splitlines()
        if line.strip() and not line.startswith(("#", "torch=="))
    ]


def make_environment(spec: str) -> Path:
    """build/torch-SPEC with torch SPEC and the project's other pins; reused when stamped."""
    python = python_of(spec)
    if spec == "installed":
        return python
    folder = python.parents[1]
    pins = other_pins()
    stamp = folder / ".installed"
    # pyproject.toml says which of the repository's packages are installed (the lab,
    # page_fences, ...): a change to it installs the project again.
    wanted = "\n".join([spec, *pins, (ROOT / "pyproject.toml").read_text("utf8")])
    if stamp.is_file() and stamp.read_text("utf8") == wanted:
        return python
    if not python.is_file():
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    torch = "torch" if spec == "newest" else f"torch=={spec}"
    subprocess.run([*pip, torch, *pins], check=True)
    subprocess.run([*pip, "--no-deps", "--no-build-isolation", "-e", str(ROOT)], check=True)
    stamp.write_text(wanted, "utf8")
    return python


def ledger() -> list[dict]:
    return yaml.safe_load((ROOT / "docs" / "claims.yml").read_text("utf8"))["claims"]


def git(*words: str) -> str:
    return subprocess.run(
        ["git", *words], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def run_pytest(python: Path, raw: Path) -> subprocess.CompletedProcess[str]:
    """Run, keeping beside the raw results where each python fence stood, the commit and the
    digest of every proof when the run began, and when it began."""
    proofs = {str(e["proof"]).partition("::")[0] for e in ledger() if is_test(e)}
    files = sorted(proofs - {OF_THE_RECORD})
    raw.unlink(missing_ok=True)
    where = [[page, name, line] for page, name, line, _ in page_fences()]
    raw.with_suffix(".fences.json").write_text(json.dumps(where), "utf8")
    began = {
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": git("rev-parse", "HEAD"),
        # the records themselves do not count: an earlier run of this command rewrote them
        "uncommitted_changes": bool(
            git("status", "--porcelain", "--untracked-files=no", "--", ".", EXCEPT_RECORDS)
        ),
        "proofs": proof_digests(ledger()),
    }
    raw.with_suffix(".run.json").write_text(json.dumps(began), "utf8")
    command = [str(python), "-m", "pytest", "-p", "versions.report", "-p", "no:xdist"]
    command += ["-q", "--color=no", "-m", MARKERS, "docs", *files]
    environment = {**os.environ, "VERSIONS_REPORT": str(raw), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        command,
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def is_test(entry: dict) -> bool:
    return bool(TEST_PROOF.match(str(entry.get("proof", ""))))


def nodes_of(entry: dict, lines: dict[tuple[str, str], int], rows: dict[str, dict]) -> list[dict]:
    proof = str(entry.get("proof", ""))
    if fence := FENCE_PROOF.match(proof):
        line = lines.get((fence["page"], fence["id"]))
        prefix, suffix = f"docs/{fence['page']}::", f"[line:{line}]"
        return [r for n, r in rows.items() if n.startswith(prefix) and n.endswith(suffix)]
    return [r for n, r in rows.items() if n == proof]


def verdict(
    entry: dict, found: list[dict], fences: list[tuple[str, str | None, int]] | None = None
) -> dict[str, str]:
    if entry["status"] == "stated":
        return {"result": "stated"}
    if str(entry.get("proof", "")).startswith(OF_THE_RECORD):
        return {"result": "not run", "message": "a test of the recorded runs themselves"}
    failed = [r for r in found if r["outcome"] == "failed"]
    if failed:
        first = failed[0]
        said = {k: first[k] for k in ("where", "message") if k in first}
        if "where" in said and fences is not None:
            said["where"] = fence_where(said["where"], fences)
        return {"result": "failed", **said}
    if any(r["outcome"] == "passed" and r["when"] == "call" for r in found):
        return {"result": "passed"}
    if found and all(r["outcome"] == "deselected" for r in found):
        return {"result": "not run", "message": DESELECTED}
    if found:
        return {"result": "skipped", "message": str(found[0].get("message", ""))}
    return {"result": "not run", "message": "not collected"}


# What each environment reports, recorded with its results: the page names the NumPy and
# safetensors the runs had from these, not from the environment that builds the site.
# And whether torch saw a GPU there, for the record's `machine`.
DESCRIBED = ("torch", "python", "numpy", "safetensors", "cuda")


def describe(python: Path) -> dict[str, str]:
    script = (
        "import sys, numpy, safetensors, torch\n"
        "print(torch.__version__, sys.version.split()[0], numpy.__version__,"
        " safetensors.__version__, torch.cuda.is_available())"
    )
    out = subprocess.run(
        [str(python), "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    return dict(zip(DESCRIBED, out, strict=True))


def record(spec: str, raw: Path, summary: str) -> Path:
    python = python_of(spec)
    versions = describe(python)
    rows: dict[str, dict] = {}
    for line in raw.read_text("utf8").splitlines():
        row = json.loads(line)
        if row["node"] not in rows or row["outcome"] == "failed":
            rows[row["node"]] = row
    fences = [tuple(f) for f in json.loads(raw.with_suffix(".fences.json").read_text("utf8"))]
    lines = {(page, name): line for page, name, line in fences if name}
    began = json.loads(raw.with_suffix(".run.json").read_text("utf8"))
    claims = {}
    for e in ledger():
        claims[e["id"]] = verdict(e, nodes_of(e, lines, rows), fences)
        if e["id"] in began["proofs"]:
            claims[e["id"]]["proof_digest"] = began["proofs"][e["id"]]
    release = versions["torch"].split("+")[0]
    out = RESULTS / f"torch-{release}.json"
    results = {
        "torch": versions["torch"],
        "release": release,
        "python": versions["python"],
        "numpy": versions["numpy"],
        "safetensors": versions["safetensors"],
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        + ("a GPU torch can use" if versions.get("cuda") == "True" else "no GPU"),
        "date": began["started"][:10],
        "started": began["started"],
        "commit": began["commit"],
        "uncommitted_changes": began["uncommitted_changes"],
        "command": f"python -m versions --torch {spec}",
        "pytest": summary,
        "claims": claims,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, sort_keys=False) + "\n", "utf8")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", action="append", help="2.8.0, newest or installed")
    parser.add_argument("--record-only", action="store_true")
    options = parser.parse_args()
    for spec in options.torch or DEFAULT_SPECS:
        raw = BUILD / f"versions-{spec}.jsonl"
        summary_file = raw.with_suffix(".summary")
        if not options.record_only:
            python = make_environment(spec)
            print(f"torch {spec}: running the pages and the ledger's tests", flush=True)
            run = run_pytest(python, raw)
            lines = run.stdout.strip().splitlines()
            summary_file.write_text(lines[-1] if lines else run.stderr[-300:], "utf8")
        out = record(spec, raw, summary_file.read_text("utf8"))
        print(f"torch {spec}: {summary_file.read_text('utf8')} -> {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
