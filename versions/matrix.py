"""What the recorded runs on other torch releases say, worded for the *What changed* page.

The build asks `value(NAME)` for `{{ versions.NAME }}` (hooks/build_facts.py). Everything comes
from docs/assets/versions/torch-RELEASE.json (written by `python -m versions`) and the ledger;
nothing is typed here.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import cache
from pathlib import Path

import yaml

from versions.proofs import proof_digests

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


# The run the page calls the newest: the one made in the environment of a bare `torch`
# (versions/__main__.py), whatever its release, not the highest release recorded.
RECORDER = "python -m versions"
NEWEST_COMMAND = f"{RECORDER} --torch newest"


def newest_run() -> dict:
    for run in runs():
        if run.get("command") == NEWEST_COMMAND:
            return run
    raise LookupError(f"no run recorded by `{NEWEST_COMMAND}` in {RESULTS.relative_to(ROOT)}")


def libraries() -> str:
    """The NumPy and safetensors each run recorded: 'NumPy 2.4.6 and safetensors 0.8.0 on every
    release' when every run recorded the same, else release by release."""
    said = [
        (run["release"], f"NumPy {run['numpy']} and safetensors {run['safetensors']}")
        if {"numpy", "safetensors"} <= set(run)
        else (run["release"], "not recorded")
        for run in runs()
    ]
    if len({words for _, words in said}) == 1:
        return (
            "not recorded by any run"
            if said[0][1] == "not recorded"
            else f"{said[0][1]} on every release"
        )
    return "; ".join(f"on {release}, {words}" for release, words in said)


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
    """Claims whose proof fails on `old` and passes on `new`, both recorded with the proof's
    text as it is now (versions/proofs.py: a block with what it includes, a test function's
    source; not the code they call): a result recorded for an earlier text does not count."""
    before, after = run_of(old), run_of(new)
    now = proof_digests(claims())

    def current(run: dict, claim_id: str) -> bool:
        return result(run, claim_id).get("proof_digest") == now.get(claim_id)

    return [
        c
        for c in claims()
        if "requires" not in c
        and result(before, c["id"])["result"] == "failed"
        and result(after, c["id"])["result"] == "passed"
        and current(before, c["id"])
        and current(after, c["id"])
    ]


def cannot_run_on(release: str) -> list[dict]:
    """Claims whose proof fails on `release` because it calls an API that release lacks
    (`requires:` in the ledger): not a change of the claim, so not in changed_between."""
    run = run_of(release)
    return [c for c in claims() if "requires" in c and result(run, c["id"])["result"] == "failed"]


def requirement_table(release: str) -> str:
    """What each proof needs (the ledger's `requires:`) beside where it failed and the message
    the run recorded."""
    chosen = cannot_run_on(release)
    if not chosen:
        return f"None: no proof needs an API that torch {run_of(release)['torch']} lacks."
    run = run_of(release)
    lines = [
        "| claim | what its proof needs | where it fails | message |",
        "| --- | --- | --- | --- |",
    ]
    for c in chosen:
        found = result(run, c["id"])
        needs = c["requires"].replace("|", "\\|")
        message = found.get("message", "").replace("|", "\\|").replace("`", "'")
        where = found.get("where", c["proof"])
        lines.append(f"| {claim_link(c)} | {needs} | `{where}` | `{message}` |")
    return "\n".join(lines)


def proofs_of(chosen: list[dict]) -> str:
    """The distinct proofs of the claims chosen, after their count: ', both proved by `P`',
    ', all proved by `P`', ', proved by `P` and `Q`' (several claims may share one proof)."""
    proofs = [f"`{p}`" for p in dict.fromkeys(str(c.get("proof", "")) for c in chosen)]
    if not proofs:
        return ""
    listed = proofs[0] if len(proofs) == 1 else ", ".join(proofs[:-1]) + " and " + proofs[-1]
    if len(proofs) == 1 and len(chosen) > 1:
        return f", {'both' if len(chosen) == 2 else 'all'} proved by {listed}"
    return f", proved by {listed}"


def builds() -> str:
    """The torch builds of the runs made in environments of their own (not the site's), as
    each reported itself: '2.8.0+cu128 and 2.14.1+cu130'."""
    own = [r["torch"] for r in runs() if r.get("command") != f"{RECORDER} --torch installed"]
    return " and ".join(f"`{b}`" for b in own)


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


COLUMNS = {"passed": "claims passing", "failed": "failing", "not run": "not run"}
OTHER = "skipped or not recorded"


def summary_table() -> str:
    """One row per run; a column for outcomes other than these only when one occurs."""
    counted = [Counter(result(run, c["id"])["result"] for c in claims()) for run in runs()]
    other = [sum(n for k, n in c.items() if k not in {*COLUMNS, "stated"}) for c in counted]
    names = [*COLUMNS.values(), *([OTHER] if any(other) else []), "stated"]
    lines = [
        "| torch | " + " | ".join(names) + " | pytest |",
        "| --- |" + " --- |" * (len(names) + 1),
    ]
    for run, counts, rest in zip(runs(), counted, other, strict=True):
        cells = [str(counts[k]) for k in COLUMNS] + ([str(rest)] if any(other) else [])
        cells.append(str(counts["stated"]))
        lines.append(
            f"| {run['torch']} | " + " | ".join(cells) + f" | {pytest_said(run['pytest'])} |"
        )
    return "\n".join(lines)


def not_run() -> str:
    """How many proofs each run left out, and why: '9 in the slow or full tier, 1 a test of
    the recorded runs themselves', once if every run says the same, else per release."""
    said = []
    for run in runs():
        why = Counter(
            result(run, c["id"]).get("message", "")
            for c in claims()
            if result(run, c["id"])["result"] == "not run"
        )
        said.append(
            ", ".join(f"{n} {m}" for m, n in sorted(why.items(), key=lambda i: (-i[1], i[0])))
        )
    if len(set(said)) == 1:
        return said[0] or "none"
    return "; ".join(
        f"on {run['release']}, {s or 'none'}" for run, s in zip(runs(), said, strict=True)
    )


def edited_since() -> list[dict]:
    """Claims whose proof's text is not, now, the one some run recorded (or that a run
    recorded without its proof's digest)."""
    now = proof_digests(claims())
    return [
        c
        for c in claims()
        if c["id"] in now
        and any(result(run, c["id"]).get("proof_digest") != now[c["id"]] for run in runs())
    ]


def edited_sentence() -> str:
    edited = edited_since()
    if not edited:
        return "Proofs whose text changed since the runs: none."
    return (
        f"Proofs whose text changed since the runs: {len(edited)} (or recorded without it); "
        "their results on this page are for the earlier text."
    )


def commits() -> str:
    found = sorted({run.get("commit", "")[:12] or "unrecorded" for run in runs()})
    dirty = any(run.get("uncommitted_changes") for run in runs())
    return ", ".join(f"`{c}`" for c in found) + (" with uncommitted changes" if dirty else "")


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


def mark(claim: dict, run: dict) -> str:
    found = result(run, claim["id"])["result"]
    if found == "failed" and "requires" in claim:
        return "cannot run: an API it needs is absent"
    return MARK.get(found, "—")


def matrix() -> str:
    header = " | ".join(f"torch {run['release']}" for run in runs())
    lines = [f"| claim | {header} |", "| --- |" + " --- |" * len(runs())]
    for c in claims():
        cells = " | ".join(mark(c, r) for r in runs())
        lines.append(f"| {claim_link(c)} | {cells} |")
    return "\n".join(lines)


def value(name: str, installed: str) -> str:
    """`{{ versions.NAME }}`; `installed` is the torch the site is built with."""
    oldest = runs()[0]["release"]

    def newest() -> str:
        return newest_run()["release"]

    values = {
        "oldest": lambda: oldest,
        "installed": lambda: installed.split("+")[0],
        "dates": lambda: ", ".join(sorted({run["date"] for run in runs()})),
        "commits": commits,
        "libraries": libraries,
        "not_run": not_run,
        "edited": edited_sentence,
        "edited_count": lambda: str(len(edited_since())),
        "newest": newest,
        "summary": summary_table,
        "matrix": matrix,
        "changed": lambda: failure_table(oldest, changed_between(oldest, installed)),
        "changed_count": lambda: str(len(changed_between(oldest, installed))),
        "changed_proofs": lambda: proofs_of(changed_between(oldest, installed)),
        "cannot_run": lambda: requirement_table(oldest),
        "cannot_run_count": lambda: str(len(cannot_run_on(oldest))),
        "cannot_run_proofs": lambda: proofs_of(cannot_run_on(oldest)),
        "builds": builds,
        "newest_failures": lambda: failure_table(newest(), failing_on(newest())),
        "newest_failure_count": lambda: str(len(failing_on(newest()))),
        "newest_failure_proofs": lambda: proofs_of(failing_on(newest())),
        "oldest_failure_count": lambda: str(len(failing_on(oldest))),
    }
    if name not in values:
        raise LookupError(f"unknown fact; known: {', '.join(f'versions.{v}' for v in values)}")
    return values[name]()
