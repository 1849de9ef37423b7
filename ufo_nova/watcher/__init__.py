"""ufo-nova's Watcher plugin: the ``ufo_overload_relief`` strategy.

Imported by watcher-decision-engine only; needs the ``watcher`` extra
(python-watcher).
"""
