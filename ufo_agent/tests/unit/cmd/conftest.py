import logging

import pytest

from ufo_agent.cmd import agent


@pytest.fixture
def agent_main_state():
    """Undo what ``agent.main`` leaves behind: options, log handlers."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        agent.CONF.reset()
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
