# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License.
"""Sphinx configuration of the ufo-nova documentation."""

project = 'ufo-nova'
copyright = '2026, ufo-nova developers'
extensions = [
    'oslo_config.sphinxext',
]
master_doc = 'index'
exclude_patterns = ['_build']
html_theme = 'alabaster'
pygments_style = 'sphinx'
