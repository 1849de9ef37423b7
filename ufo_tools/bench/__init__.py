"""Benchmarks behind ``ufo-bench``: each module has add_arguments and run."""
