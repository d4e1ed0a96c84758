"""Checks of a release: what the sdist and wheel hold, and the installed wheel at work.

``contents DIST``: both archives hold the license and the changelog; the sdist nothing but the
package, those files, README.md, pyproject.toml and setuptools' own metadata (no tests, which
need the repository around them); the wheel declares its SPDX license and ships no tests.
``installed VENV README``: run by that venv's Python, away from the source tree, it imports
gatherx from the venv, runs ``gatherx check`` and README's examples.
"""

from __future__ import annotations

import doctest
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

LICENSE = "Apache-2.0"
#: What an sdist may hold besides the package: the files a user reads and the build needs, and
#: those setuptools writes into every sdist.
SDIST_FILES = {"LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml",
               "PKG-INFO", "setup.cfg", "MANIFEST.in"}  # fmt: skip
SDIST_FOLDERS = ("gatherx/", "gatherx.egg-info/")


def fail(msg: str) -> None:
    print(f"check_release: {msg}", file=sys.stderr)
    raise SystemExit(1)


def contents(dist: Path) -> None:
    (sdist,) = dist.glob("gatherx-*.tar.gz")
    (wheel,) = dist.glob("gatherx-*.whl")
    with tarfile.open(sdist) as tar:
        names = {name.partition("/")[2] for name in tar.getnames()}
    for want in ("LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml", "gatherx/py.typed"):
        if want not in names:
            fail(f"{sdist.name} lacks {want}")
    extra = sorted(n for n in names - SDIST_FILES - {"", "gatherx", "gatherx.egg-info"}
                   if not n.startswith(SDIST_FOLDERS))  # fmt: skip
    if extra:
        fail(f"{sdist.name} ships files outside the package: {', '.join(extra[:5])}")
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        (metadata,) = (n for n in names if n.endswith(".dist-info/METADATA"))
        meta = whl.read(metadata).decode()
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
        fail(f"{wheel.name} lacks its LICENSE")
    if f"License-Expression: {LICENSE}" not in meta.splitlines():
        fail(f"{wheel.name} does not declare License-Expression: {LICENSE}")
    if any(n.startswith(("tests/", "benchmarks/", "docs/")) for n in names):
        fail(f"{wheel.name} ships files outside the package")
    if "gatherx/py.typed" not in names:
        fail(f"{wheel.name} lacks gatherx/py.typed")
    print(f"check_release: {sdist.name} and {wheel.name} hold LICENSE ({LICENSE}) as they should")


def installed(venv: Path, readme: Path) -> None:
    import gatherx

    where = Path(gatherx.__file__).resolve()
    if not where.is_relative_to(venv.resolve()):
        fail(f"gatherx was imported from {where}, not from the wheel installed in {venv}")
    if (Path.cwd() / "gatherx").exists():
        fail("run this away from the source tree")
    cli = venv / "bin" / "gatherx"
    subprocess.run([str(cli), "check"], check=True)
    flags = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
    result = doctest.testfile(str(readme), module_relative=False, optionflags=flags)
    if result.failed or not result.attempted:
        fail(f"README.md examples: {result.failed} of {result.attempted} failed")
    print(
        f"check_release: the installed wheel passed gatherx check and {result.attempted} "
        "README examples"
    )


def main(argv: list[str]) -> None:
    if argv[:1] == ["contents"] and len(argv) == 2:
        contents(Path(argv[1]))
    elif argv[:1] == ["installed"] and len(argv) == 3:
        installed(Path(argv[1]), Path(argv[2]))
    else:
        fail("usage: check_release.py contents DIST | installed VENV README")


if __name__ == "__main__":
    main(sys.argv[1:])
