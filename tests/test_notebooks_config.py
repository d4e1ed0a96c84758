"""The repository's Jupyter setup: its MyST notebooks open, and save, as notebooks."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import need

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

ROOT = Path(__file__).parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.md"))
#: The command README.md gives for opening the notebooks.
OPEN = "JUPYTER_CONFIG_PATH=.jupyter jupyter lab notebooks/"


def contents_manager(root: Path):
    """jupytext's contents manager, the one JupyterLab uses once jupytext is installed."""
    jupytext = need("jupytext")
    return jupytext.TextFileContentsManager(root_dir=str(root))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_each_markdown_notebook_opens_as_a_notebook(path):
    model = contents_manager(path.parent).get(path.name)
    assert model["type"] == "notebook"
    notebook = model["content"]
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert len(code) == path.read_text(encoding="utf-8").count("```{code-cell} ipython3")
    assert code
    assert all(c.source.strip() and not c.outputs for c in code)


def test_saving_keeps_the_files_as_committed(tmp_path):
    """A notebook saved from Jupyter is the same MyST text: no outputs, no version stamp."""
    copy = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", copy)
    manager = contents_manager(copy)
    for path in NOTEBOOKS:
        manager.save(manager.get(path.name), path.name)
        assert (copy / path.name).read_text(encoding="utf-8") == path.read_text(encoding="utf-8")
    assert not list(copy.glob("*.ipynb"))


def test_scripts_next_to_the_notebooks_stay_files():
    assert contents_manager(ROOT / "notebooks").get("execute.py")["type"] == "file"


def test_double_click_opens_markdown_with_jupytext():
    """The repo's labconfig sets jupytext's viewer as the default for Markdown and MyST."""
    need("jupyterlab")
    code = ("import json, tempfile; from jupyterlab_server.settings_utils import _get_overrides; "
            "print(json.dumps(_get_overrides(tempfile.mkdtemp())[0]))")  # fmt: skip
    env = {"JUPYTER_CONFIG_PATH": str(ROOT / ".jupyter"), "PATH": ""}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    viewers = json.loads(result.stdout)["@jupyterlab/docmanager-extension:plugin"]
    assert viewers["defaultViewers"] == {
        "markdown": "Jupytext Notebook",
        "myst": "Jupytext Notebook",
    }


def test_the_viewer_name_is_the_installed_jupytext_extension_s():
    need("jupyterlab")
    from jupyter_core.paths import jupyter_path

    scripts = [p for d in jupyter_path("labextensions")
               for p in (Path(d) / "jupyterlab-jupytext" / "static").glob("*.js")]  # fmt: skip
    assert scripts, "jupytext's JupyterLab extension is not installed"
    factory = re.compile(r'FACTORY\s*=\s*"Jupytext Notebook"')
    assert any(factory.search(p.read_text(encoding="utf-8", errors="replace")) for p in scripts)


def test_notebooks_extra_and_readme_command():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {"jupyterlab", "jupytext", "matplotlib", "ipykernel", "array-api-strict"}
    names = {re.split(r"[<>=\[ ]", r)[0] for r in extra["optional-dependencies"]["notebooks"]}
    assert wanted <= names
    assert "gatherx[torch,jax]" in extra["optional-dependencies"]["notebooks"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert 'python -m pip install ".[notebooks]"' in readme
    assert OPEN in readme
