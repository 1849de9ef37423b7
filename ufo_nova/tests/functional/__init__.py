# Importing Nova's functional test package monkey patches the process the
# way Nova's own functional tests run (eventlet unless Nova is told to use
# native threads), before anything else is imported.
import nova.tests.functional  # noqa: F401
