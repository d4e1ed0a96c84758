"""``tools/check_release.py`` refusing archives that hold more than a release should (the
release session runs it on the archives it builds from this tree)."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
