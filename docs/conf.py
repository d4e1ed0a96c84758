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

# The notebooks run during the build so every page shows its outputs and figures (they need
# torch, jax, matplotlib and ipykernel: `nox -s docs` installs them). Results are cached under
# _build/.jupyter_cache and a notebook reruns only when its code changes; a cell that takes more
# than the timeout fails the build. GATHERX_DOCS_EXECUTE=0 renders them without running them.
nb_execution_mode = "off" if os.environ.get("GATHERX_DOCS_EXECUTE") == "0" else "cache"
nb_execution_raise_on_error = True
nb_execution_timeout = 120
nb_execution_show_tb = True
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
