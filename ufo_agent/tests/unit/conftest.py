import pytest

from ufo_agent.service import pidlock


@pytest.fixture(autouse=True)
def host_lock_dir(tmp_path_factory, monkeypatch):
    """The host-wide agent lock of each test: a directory of its own.

    Unit tests run agents side by side; none may take the real
    /run/ufo-agent lock (or find it held).
    """
    directory = tmp_path_factory.mktemp('run') / 'ufo-agent'
    monkeypatch.setattr(pidlock, 'HOST_LOCK_DIR', str(directory))
    return directory
