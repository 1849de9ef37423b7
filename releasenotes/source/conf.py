"""Sphinx configuration of the ufo-nova release notes."""

project = 'ufo-nova Release Notes'
copyright = '2026, ufo-nova developers'
extensions = ['reno.sphinxext']
master_doc = 'index'
exclude_patterns = ['_build']
html_theme = 'alabaster'
