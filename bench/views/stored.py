"""The view of a results file the pages quote as stored: the fault campaigns' counts.

Their tests write them (campaign.json, recipe-campaign.json, ...); the page names a count as it
is, and the provenance, if provenance.py recorded it (it has `started`), worded as every page
words it.
"""

from __future__ import annotations

from typing import Any

from .. import provenance


def view(results: dict[str, Any]) -> dict[str, Any]:
    record = results.get("provenance")
    if isinstance(record, dict) and "started" in record:
        return results | {"provenance": provenance.worded(record)}
    return results
