import pytest
from built_site import BuiltSite, build_site


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> BuiltSite:
    return build_site(tmp_path_factory.mktemp("site"))
