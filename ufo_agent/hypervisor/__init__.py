"""What ufo-agent reads about the hypervisor, as pure parsers.

The libvirt driver (side effects) feeds these with domain XML and config
files; the parsers decide nothing about I/O and are tested on strings.
"""
