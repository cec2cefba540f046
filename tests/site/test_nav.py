"""The navigation: labels are the pages' own titles, and the evidence comes after the lessons."""

from __future__ import annotations

from browser_site import mkdocs_config, nav_pages, page_title

EVIDENCE = ["lab.md", "performance.md", "changes.md", "claims.md"]


def test_every_nav_label_is_its_pages_title():
    for page in nav_pages():
        assert page.title == page_title(page.src), f"{page.src}: nav says {page.title!r}"


def test_the_overview_and_the_recipe_come_first_and_the_evidence_last():
    sources = [page.src for page in nav_pages()]
    assert sources[:2] == ["index.md", "recipe.md"]
    assert sources[-len(EVIDENCE) :] == EVIDENCE
    last = mkdocs_config()["nav"][-1]
    assert list(last) == ["Evidence"] and last["Evidence"] == EVIDENCE
