"""The fence runner leans on pytest-markdown-docs' private runner API (markdown_docs_adapter.py).
If an upgrade changes it, this test fails and says what changed, before any page does."""

from page_fences.markdown_docs_adapter import internals_changed
from page_fences.pytest_plugin import IncludeAwareRunner


def test_the_private_runner_api_is_what_the_fence_runner_was_written_against():
    changed = internals_changed(IncludeAwareRunner)
    assert not changed, "pytest-markdown-docs changed; update markdown_docs_adapter.py:\n" + (
        "\n".join(changed)
    )
