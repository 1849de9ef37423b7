# Unit tests of the classes that subclass Nova's (UFOFilter,
# UFOIdlePoolWeigher): they need Nova, so they run in tox -e nova-functional.
# Monkey patch the way Nova's own unit tests do, before anything else.
import nova.tests.unit  # noqa: F401
