"""`make test` schedules its xdist workers with tests/support/xdist_scheduling.py, which overrides
a private method of pytest-xdist. If an upgrade changes what it relies on, this fails first."""

import inspect

from xdist.scheduler import LoadScopeScheduling
from xdist_scheduling import ModuleOrSharedFolder


def scope(nodeid: str) -> str:
    # _split_scope reads nothing from the scheduler's state: no workers are needed
    return ModuleOrSharedFolder._split_scope(object.__new__(ModuleOrSharedFolder), nodeid)


def test_the_browser_tests_share_one_worker_and_any_other_test_keeps_to_its_module():
    assert scope("tests/browser/test_pages.py::test_x[index.html]") == "tests/browser/"
    assert scope("tests/browser/test_accessibility.py::test_y") == "tests/browser/"
    assert scope("tests/lab/test_lab_cli.py::test_y") == "tests/lab/test_lab_cli.py"
    assert scope("docs/lab.md::[CodeFence#3][line:12]") == "docs/lab.md"


def test_xdist_still_has_the_private_method_the_scheduler_overrides():
    method = getattr(LoadScopeScheduling, "_split_scope", None)
    assert method is not None, "pytest-xdist's LoadScopeScheduling lost _split_scope"
    assert list(inspect.signature(method).parameters) == ["self", "nodeid"], (
        "pytest-xdist's LoadScopeScheduling._split_scope changed its signature"
    )
