"""What the recorded runs on other torch releases say, worded for the *What changed* page.

The build asks `value(NAME)` for `{{ versions.NAME }}` (hooks/build_facts.py). Everything comes
from docs/assets/versions/torch-RELEASE.json (written by `python -m versions`) and the ledger;
nothing is typed here.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "assets" / "versions"
MARK = {"passed": "passes", "failed": "**fails**", "not run": "not run", "stated": "stated"}


def release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split(".")[:3])


@cache
def _read(path: Path, mtime: int) -> dict:
    return json.loads(path.read_text("utf8"))


def runs() -> list[dict]:
    """Every recorded run, oldest release first."""
    found = [_read(p, p.stat().st_mtime_ns) for p in RESULTS.glob("torch-*.json")]
    return sorted(found, key=lambda run: release_key(run["release"]))


def run_of(release: str) -> dict:
    for run in runs():
        if run["release"] == release.split("+")[0]:
            return run
    raise LookupError(
        f"no recorded run of torch {release} in {RESULTS.relative_to(ROOT)}; "
        "run `make test-versions`"
    )


def claims() -> list[dict]:
    """The ledger's entries, parsed once per version of the file (a page asks many times)."""
    ledger = ROOT / "docs" / "claims.yml"
    status = ledger.stat()
    return _parse(ledger, status.st_mtime_ns, status.st_size)["claims"]


@cache
def _parse(path: Path, mtime_ns: int, size: int) -> dict:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ten times faster
    return yaml.load(path.read_text("utf8"), Loader=loader)


def result(run: dict, claim_id: str) -> dict:
    return run["claims"].get(claim_id, {"result": "not recorded"})


def changed_between(old: str, new: str) -> list[dict]:
    """Claims whose proof fails on `old` and passes on `new`."""
    before, after = run_of(old), run_of(new)
    return [
        c
        for c in claims()
        if result(before, c["id"])["result"] == "failed"
        and result(after, c["id"])["result"] == "passed"
    ]


def failing_on(release: str) -> list[dict]:
    run = run_of(release)
    return [c for c in claims() if result(run, c["id"])["result"] == "failed"]


def pytest_said(summary: str) -> str:
    """pytest's last line, shortened: '2 failed, 414 passed ... in 110.71s (0:01:50)' → '2 failed,
    414 passed in 111 s'."""
    counts = re.findall(r"(\d+ (?:failed|passed|errors?))", summary)
    seconds = re.search(r" in ([\d.]+)s", summary)
    took = f" in {float(seconds[1]):.0f} s" if seconds else ""
    return ", ".join(counts) + took


def summary_table() -> str:
    lines = [
        "| torch | claims passing | failing | not run | stated | pytest |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for run in runs():
        counts = {k: 0 for k in ("passed", "failed", "not run", "stated")}
        for c in claims():
            outcome = result(run, c["id"])["result"]
            counts[outcome if outcome in counts else "not run"] += 1
        lines.append(
            f"| {run['torch']} | {counts['passed']} | {counts['failed']} | {counts['not run']} "
            f"| {counts['stated']} | {pytest_said(run['pytest'])} |"
        )
    return "\n".join(lines)


def claim_link(claim: dict) -> str:
    # underscores outside `code` would start emphasis (recipe_torchrun.py)
    parts = claim["claim"].rstrip(".").split("`")
    text = "`".join(p if i % 2 else p.replace("_", "\\_") for i, p in enumerate(parts))
    return f"[{text}]({claim['page']})".replace("|", "\\|")


def failure_table(release: str, chosen: list[dict]) -> str:
    if not chosen:
        return f"None: every proof that ran passed on torch {run_of(release)['torch']}."
    run = run_of(release)
    lines = ["| claim | where it fails | message |", "| --- | --- | --- |"]
    for c in chosen:
        found = result(run, c["id"])
        message = found.get("message", "").replace("|", "\\|").replace("`", "'")
        lines.append(f"| {claim_link(c)} | `{found.get('where', c['proof'])}` | `{message}` |")
    return "\n".join(lines)


def matrix() -> str:
    header = " | ".join(f"torch {run['release']}" for run in runs())
    lines = [f"| claim | {header} |", "| --- |" + " --- |" * len(runs())]
    for c in claims():
        cells = " | ".join(MARK.get(result(r, c["id"])["result"], "—") for r in runs())
        lines.append(f"| {claim_link(c)} | {cells} |")
    return "\n".join(lines)


def value(name: str, installed: str) -> str:
    """`{{ versions.NAME }}`; `installed` is the torch the site is built with."""
    oldest, newest = runs()[0]["release"], runs()[-1]["release"]
    values = {
        "oldest": lambda: oldest,
        "installed": lambda: installed.split("+")[0],
        "dates": lambda: ", ".join(sorted({run["date"] for run in runs()})),
        "newest": lambda: newest,
        "summary": summary_table,
        "matrix": matrix,
        "changed": lambda: failure_table(oldest, changed_between(oldest, installed)),
        "changed_count": lambda: str(len(changed_between(oldest, installed))),
        "newest_failures": lambda: failure_table(newest, failing_on(newest)),
        "newest_failure_count": lambda: str(len(failing_on(newest))),
        "oldest_failure_count": lambda: str(len(failing_on(oldest))),
    }
    if name not in values:
        raise LookupError(f"unknown fact; known: {', '.join(f'versions.{v}' for v in values)}")
    return values[name]()
