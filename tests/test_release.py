"""What a release's archives hold: the sdist built from this tree, and ``tools/check_release.py``
refusing archives that hold more than they should."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from support import need

ROOT = Path(__file__).resolve().parents[1]
#: The files of this tree an sdist is built from, and a test file that must stay out of it.
SOURCES = ["gatherx", "pyproject.toml", "MANIFEST.in", "LICENSE", "README.md", "CHANGELOG.md"]


def _sdist(dist: Path, names: list[str]) -> None:
    with tarfile.open(dist / "gatherx-0.1.0.tar.gz", "w:gz") as tar:
        for name in names:
            info = tarfile.TarInfo(f"gatherx-0.1.0/{name}")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))


def _wheel(dist: Path) -> None:
    with zipfile.ZipFile(dist / "gatherx-0.1.0-py3-none-any.whl", "w") as whl:
        whl.writestr("gatherx/__init__.py", "")
        whl.writestr("gatherx/py.typed", "")
        whl.writestr("gatherx-0.1.0.dist-info/licenses/LICENSE", "")
        whl.writestr("gatherx-0.1.0.dist-info/METADATA", "License-Expression: Apache-2.0\n")


def check_contents(dist: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "check_release.py"), "contents",
                           str(dist)], capture_output=True, text=True, timeout=60)  # fmt: skip


PACKAGE = ["gatherx/__init__.py", "gatherx/py.typed", "LICENSE", "CHANGELOG.md", "README.md",
           "pyproject.toml", "PKG-INFO", "setup.cfg", "gatherx.egg-info/PKG-INFO"]  # fmt: skip


@pytest.mark.parametrize(
    "extra", [[], ["tests/test_parity.py"], ["benchmarks/bench_gather.py"], ["conftest.py"]]
)
def test_contents_refuses_an_sdist_with_files_outside_the_package(tmp_path, extra):
    _sdist(tmp_path, PACKAGE + extra)
    _wheel(tmp_path)
    result = check_contents(tmp_path)
    if not extra:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 1
    assert result.stderr == (
        f"check_release: gatherx-0.1.0.tar.gz ships files outside the package: {extra[0]}\n"
    )


def test_sdist_holds_the_package_and_its_files_only(tmp_path):
    """Built from this tree's MANIFEST.in, beside a tests/ folder (whose files setuptools takes
    into an sdist unless told not to)."""
    setuptools = need("setuptools")
    if int(setuptools.__version__.partition(".")[0]) < 77:  # pyproject.toml's build-system
        pytest.skip(f"the build needs setuptools 77 or later, not {setuptools.__version__}")
    tree = tmp_path / "tree"
    for name in SOURCES:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, tree / name)
    (tree / "tests").mkdir()
    (tree / "tests" / "test_x.py").write_text("")
    code = (f"import os, setuptools.build_meta as b; os.chdir({str(tree)!r}); "
            f"print(b.build_sdist({str(tmp_path)!r}))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    name = done.stdout.splitlines()[-1]
    with tarfile.open(tmp_path / name) as tar:
        names = {n.partition("/")[2] for n in tar.getnames()}
    tops = {n.partition("/")[0] for n in names if n}
    assert tops == {"gatherx", "gatherx.egg-info", "LICENSE", "CHANGELOG.md", "README.md",
                    "pyproject.toml", "PKG-INFO", "setup.cfg", "MANIFEST.in"}  # fmt: skip
    assert "gatherx/py.typed" in names
