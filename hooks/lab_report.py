"""The lab's facts: run the resume lab when the site is built, and put its real results on the
pages. Not a hook of its own: hooks/build_facts.py registers it for the prefix `lab`.

- `{{ lab.KEY.SUBKEY }}`: a value from the demo's report.json, e.g.
  `{{ lab.checkpoint_bytes.total }}`; integers are printed with thousands separators.
- `{{ lab.summary }}`: the report exactly as `python -m resume_lab demo` prints it.
- `assets/lab/curves.png`: losses of runs A, B and C per update, drawn from their history.json.

The demo runs with the lab's default configuration, in a temporary folder; nothing is written
into the repository. It and the curves are computed once for the lab's code and this file
(hooks/build_cache.py): a build after an edit elsewhere reuses them. lab.md says what the run
shows (B on A, C off it from the update after the kill): a run that does not show it fails the
build (`check_shown`).
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

import build_cache

CURVES = "assets/lab/curves.png"


def key(kind: str) -> str:
    """What the demo and the curves are computed from: this file's code, and the lab's modules
    it imports (at any depth)."""
    here = Path(__file__).resolve()
    return build_cache.key(kind, [(str(here), here.read_text("utf8"))])


def demo() -> dict[str, Any]:
    """The report, the printed summary, and the three runs' histories."""
    return build_cache.cached("lab-demo", key("lab-demo"), run_demo)


def run_demo() -> dict[str, Any]:
    import torch

    from resume_lab.config import LabConfig
    from resume_lab.experiment import default_kill_at, format_report, run_demo

    config = LabConfig()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as `python -m resume_lab` runs by default
    try:
        with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stderr(io.StringIO()):
            out = Path(scratch)
            report = run_demo(config, default_kill_at(config.steps), out)
            histories = {
                run: json.loads((out / run / "history.json").read_text("utf8")) for run in "ABC"
            }
    finally:
        torch.set_num_threads(threads)
    check_shown(report, histories)
    summary = format_report(report, Path("demo"))
    return {"report": report, "summary": summary, "histories": histories}


def check_shown(report: dict[str, Any], histories: dict[str, list[dict[str, Any]]]) -> None:
    """What lab.md says of the run it shows, on the losses the figure draws: B's equal A's at
    every update, C's equal A's up to the kill and differ at the update after it, the report's
    first divergence is that update, and the demo's own verdict passed."""
    from resume_lab.experiment import demo_passed

    loss = {run: {r["step"]: r["loss"] for r in histories[run]} for run in "ABC"}
    after_kill = report["kill_at"] + 1
    parted = min((s for s, x in loss["A"].items() if loss["C"].get(s) != x), default=None)
    wrong = [
        text
        for text, failed in (
            ("the demo's verdict is FAIL", not demo_passed(report)),
            ("B's loss differs from A's", loss["B"] != loss["A"]),
            (f"C's loss parts from A's at update {parted}", parted != after_kill),
            ("the report's first divergence", report["first_divergent_step"] != after_kill),
        )
        if failed
    ]
    if wrong:
        raise PluginError(
            f"lab.md says B stays on A and C leaves it at update {after_kill}, "
            f"but in this run: {'; '.join(wrong)}"
        )


def curves_png() -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lab = demo()
    report, histories = lab["report"], lab["histories"]
    fig, (ax, gap) = plt.subplots(
        2, 1, figsize=(8, 5.2), dpi=120, sharex=True, gridspec_kw={"height_ratios": [3, 1.3]}
    )
    styles = {
        "A": {"color": "#555555", "linewidth": 3.0, "label": "A uninterrupted"},
        "B": {"color": "#e65100", "linewidth": 1.2, "label": "B killed and resumed (on A)"},
        "C": {"color": "#1565c0", "linewidth": 1.0, "linestyle": "--", "label": "C no RNG restore"},
    }
    losses = {run: [r["loss"] for r in histories[run]] for run in styles}
    for run, style in styles.items():
        steps = [r["step"] for r in histories[run]]
        ax.plot(steps, losses[run], **style)
        if run != "A":
            diff = [abs(x - a) for x, a in zip(losses[run], losses["A"], strict=True)]
            gap.plot(steps, diff, **{**style, "label": None})
    for axis in (ax, gap):
        axis.axvline(report["kill_at"], color="#999999", linewidth=0.8)
    ax.annotate(
        f"killed at update {report['kill_at']}",
        (report["kill_at"], ax.get_ylim()[1]),
        xytext=(4, -12),
        textcoords="offset points",
        fontsize=8,
    )
    ax.set_ylabel("training loss")
    ax.legend(frameon=False)
    gap.set_ylabel("|loss − loss of A|")
    gap.set_xlabel("update")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def value(path: str) -> str:
    lab = demo()
    if path == "summary":
        return lab["summary"]
    found: Any = lab["report"]
    for key in path.split("."):
        if not isinstance(found, dict) or key not in found:
            raise LookupError(f"the lab's report has no {path!r} (stuck at {key!r})")
        found = found[key]
    if isinstance(found, bool) or not isinstance(found, int):
        return str(found)
    return f"{found:,}"


def add_files(files: Files, config) -> Files:
    png = build_cache.cached("lab-curves", key("lab-curves"), curves_png)
    files.append(File.generated(config, CURVES, content=png))
    return files
