"""What a page can name from a results file: the stored numbers, and what follows from them.

`view(name, results)` is the stored results of `docs/assets/bench/NAME.json` with the derived
figures (metrics.py), the targets and verdicts (targets.py), and the page's tables and sentences
added. The build calls it for every `{{ bench.NAME.* }}` (hooks/build_facts.py), and
`python -m bench` prints from it; nothing it computes is ever stored, so rewording a sentence or
changing a rule needs no new measurement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import metrics, performance_tables, performance_text, serialization_view
from .fmt import date
from .targets import evaluate_targets


def provenance_view(prov: dict[str, Any], plan: dict[str, Any] | None = None) -> dict[str, Any]:
    """The stored provenance with `date`, `load_average` and `summary` worded for a page."""
    m, v = prov["machine"], prov["versions"]
    start = prov["load_average_start"][0]
    end = prov["load_average_end"][0] if "load_average_end" in prov else None
    scratch = f", {m['scratch_fs']} scratch disk" if "scratch_fs" in m else ""
    words = (
        f"{m['cpu']} ({m['cores']} cores, {m['ram_gib']} GiB RAM{scratch}), {m['os']}; "
        f"torch {v['torch']}, numpy {v['numpy']}, safetensors {v['safetensors']}, "
        f"Python {v['python']}"
    )
    if plan is not None:
        words += "; " + plan_words(plan)
    load = f"{start:.1f} at the start" + ("" if end is None else f", {end:.1f} at the end")
    words += f"; 1-minute load average {load}, on {m['cores']} cores"
    return prov | {"date": date(prov["started"]), "load_average": load, "summary": words}


def plan_words(plan: dict[str, Any]) -> str:
    if plan.get("suite_repeats") is None:
        return f"median of {plan['serialization_repeats']} runs"
    repeats = sorted({plan["repeats"], plan["save_repeats"], plan["loop_repeats"]})
    runs = f"{repeats[0]} to {repeats[-1]}" if len(repeats) > 1 else str(repeats[0])
    return (
        f"medians of {runs} runs per timing, {plan['load_repeats']} fresh processes per load "
        f"path, {plan['suite_repeats']} run of make test and {plan['contract_repeats']} of the "
        "contract tests"
    )


def performance(results: dict[str, Any]) -> dict[str, Any]:
    out = metrics.derive_performance(results)
    out["provenance"] = provenance_view(results["provenance"], results["plan"])
    out["targets"] = evaluate_targets(out)
    out["all_met"] = all(t["met"] for t in out["targets"].values() if t["met"] is not None)
    out["hash_choice"] = performance_text.hash_choice(out["save"], out["hashing"])
    out["headline"] = performance_text.headline(out)
    out["table_md"] = performance_tables.table_md(out)
    out["sampler_table_md"] = performance_tables.sampler_table_md(out["sampler"])
    out["save_table_md"] = performance_tables.save_table_md(out["save"])
    out["hash_table_md"] = performance_tables.hash_table_md(out["save"], out["hashing"])
    out["load_table_md"] = performance_tables.load_table_md(out["verify_load"])
    return out


def serialization(results: dict[str, Any]) -> dict[str, Any]:
    out = metrics.derive_serialization(results)
    out["provenance"] = provenance_view(results["provenance"], results["plan"])
    out["headline"] = serialization_view.headline(out["sizes"])
    out["table_md"] = serialization_view.table_md(out["sizes"])
    return out


# Results files with a view of their own.
VIEWS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "performance": performance,
    "serialization": serialization,
}


def view(name: str, results: dict[str, Any]) -> dict[str, Any]:
    """The page's view of a results file. Any other file (campaign.json) is read as stored,
    with its provenance worded if provenance.py recorded it (it has `started`)."""
    if name in VIEWS:
        return VIEWS[name](results)
    prov = results.get("provenance")
    if isinstance(prov, dict) and "started" in prov:
        return results | {"provenance": provenance_view(prov)}
    return results


def distributed(results: dict[str, Any]) -> dict[str, Any]:
    """distributed.json: the DCP save and the throughput at several world sizes
    (bench/distributed_view.py words them)."""
    from . import distributed_view

    out = distributed_view.view(results)
    out["provenance"] = provenance_view(results["provenance"])
    out["provenance"]["summary"] += "; " + out["headline"]["setup"]
    return out


VIEWS["distributed"] = distributed
