"""The code on the pages is linted and formatted as snippets/ is (page_fences/lint.py):
one ruff run over every python fence, each written to a file named after its page and line."""

from page_fences.lint import page_fences, problems


def test_the_census_finds_the_inline_fences():
    # Include-only fences are linted as the files they include; the rest are here.
    found = page_fences()
    assert len(found) > 100
    assert all(item.fence.lang in {"py", "python", "python3"} for item in found)


def test_every_page_fence_passes_ruff_and_the_80_column_format():
    found = problems()
    assert not found, "\n".join(found) + "\nfix in place: python -m page_fences.lint --fix"
