"""Sphinx configuration for the gatherx site: MyST pages, numpydoc-style API, MyST notebooks."""

from __future__ import annotations

import os

import gatherx

project = "gatherx"
author = "the gatherx authors"
copyright = "the gatherx authors"
release = version = gatherx.__version__

extensions = [
    "myst_nb",  # MyST Markdown pages and notebooks (it brings myst_parser with it)
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # the package's docstrings are numpydoc style
    "sphinx.ext.mathjax",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
# notebooks/ is a symlink to the repository's notebooks folder; its README is for GitHub only.
exclude_patterns = ["_build", "notebooks/README.md", "notebooks/*.py", "**/.ipynb_checkpoints"]

myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3

# The notebooks are executed by `nox -s notebooks`; the site shows their code and text without
# running them again. GATHERX_DOCS_EXECUTE=1 renders them with outputs (needs torch and jax).
nb_execution_mode = "cache" if os.environ.get("GATHERX_DOCS_EXECUTE") == "1" else "off"
nb_execution_raise_on_error = True
nb_execution_timeout = 300
nb_merge_streams = True
nb_render_markdown_format = "myst"  # Markdown outputs (the notebooks' tables) as MyST, with tables

autodoc_typehints = "signature"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": False}
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

html_theme = "furo"
html_title = f"gatherx {release}"
