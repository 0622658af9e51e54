"""The Label Studio tests' fixture: a real Label Studio on 127.0.0.1, one for each test module that asks."""
import pytest


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A started :class:`lsserver.Server` with a data folder of its own, stopped after the module's tests, or
    a skip that says how to install what is missing (:func:`lsserver.started_or_skip`). A module whose server
    needs more of Label Studio's settings defines its own."""
    from lsserver import started_or_skip

    s = started_or_skip(tmp_path_factory.mktemp("label-studio"))
    yield s
    s.stop()
