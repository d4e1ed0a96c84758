"""nox sessions: tests per backend, cross-backend parity, lint, docs, notebooks, distributed.

Each test runs in the sessions whose environments hold its backends (tests/conftest.py routes
each test by ``--backends``), and every session's tests run under coverage.py; the last
session, ``coverage``, combines their data and reports line and branch coverage.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import nox

ROOT = Path(__file__).parent
CONSTRAINTS = str(ROOT / "constraints.txt")
PYTHON = "3.11"  # torch's CPU wheel on disk is for CPython 3.11
#: Where each session leaves its coverage data, one file per process (see pyproject.toml).
COVERAGE_DATA = ROOT / ".nox" / "_coverage"
# 7.11: `patch = subprocess` and `patch = fork` measure the child processes, forked ones anew
COVERAGE = "coverage[toml]>=7.11"
#: pytest's options that spread a run's tests over every CPU (pytest-xdist).
PARALLEL = ["-n", "auto", "--dist", "worksteal"]

nox.options.error_on_missing_interpreters = True
nox.options.reuse_existing_virtualenvs = False
# pip installs with --no-compile (below): Python writes the bytecode of only the modules that
# run, as they are first imported, instead of pip compiling each file of torch and jax. That
# needs writing bytecode allowed in the sessions, whatever the calling environment says.
os.environ["PYTHONDONTWRITEBYTECODE"] = ""

# What each backend's test session installs beyond `.[test]`.
BACKEND_DEPS = {
    "numpy": [],
    "torch": ["torch"],
    "jax": ["jax"],
    "array_api_strict": ["array-api-strict"],
}


def install(session: nox.Session, *args: str) -> None:
    """pip install under constraints.txt, which pins torch to the CPU wheel on disk."""
    session.install("--no-compile", "-c", CONSTRAINTS, *args, env={"PIP_CONSTRAINT": CONSTRAINTS})


_measuring: set[str] = set()


def coverage_env(session: nox.Session) -> dict[str, str]:
    """The environment that sends this session's coverage data to COVERAGE_DATA; on the
    session's first call, the data of its previous run is removed."""
    stem = ".coverage." + re.sub(r"[^A-Za-z0-9_]+", "-", session.name).strip("-")
    if stem not in _measuring:
        _measuring.add(stem)
        COVERAGE_DATA.mkdir(parents=True, exist_ok=True)
        for old in COVERAGE_DATA.glob(f"{stem}.*"):
            old.unlink()
    return {"COVERAGE_FILE": str(COVERAGE_DATA / stem)}


def measured(session: nox.Session, *args: str, **kwargs) -> None:
    """``python ARGS`` under coverage.py, its subprocesses measured too."""
    env = {**kwargs.pop("env", {}), **coverage_env(session)}
    session.run("python", "-m", "coverage", "run", *args, env=env, **kwargs)


def pytest(session: nox.Session, *args: str, require: str, **env: str) -> None:
    measured(session, "-m", "pytest", *args, "-p", "no:cacheprovider", *session.posargs,
             env={"GATHERX_REQUIRE": require, "GATHERX_HYPOTHESIS": "ci", **env})  # fmt: skip


#: What the test sessions install beyond `.[test]`: coverage.py, and pytest-xdist for PARALLEL.
TEST_TOOLS = [COVERAGE, "pytest-xdist>=3.2"]


def pyenv_python(version: str) -> str:
    """The newest pyenv-installed interpreter of ``version`` ("3.10"): pyenv's shims run only
    the active version. Elsewhere ``version`` itself, for nox to find on PATH."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    found = [p for p in root.glob(f"versions/{version}.*/bin/python{version}")
             if re.fullmatch(r"\d+\.\d+\.\d+", p.parents[1].name)]  # fmt: skip
    if not found:
        return version
    return str(max(found, key=lambda p: [int(n) for n in p.parents[1].name.split(".")]))


#: The newest Python: the backends whose wheels it has run there (torch's CPU wheel on disk is
#: for 3.11 only), with the newest NumPy and JAX the registry has; the floors run in `oldest`
#: and `oldest_jax`, on 3.10 and 3.11.
NEWEST = pyenv_python("3.13")
TEST_PYTHON = {"numpy": NEWEST, "torch": PYTHON, "jax": NEWEST, "array_api_strict": NEWEST}


@nox.session
@nox.parametrize(
    "python,backend",
    [(TEST_PYTHON[b], b) for b in BACKEND_DEPS],
    ids=[f"backend={b!r}" for b in BACKEND_DEPS],
)
def tests(session: nox.Session, backend: str) -> None:
    """The tests of one backend, with only what that backend needs installed, on the newest
    Python it has a wheel for: the NumPy session also runs those that need no framework, the
    JAX session the sharded tests too."""
    install(session, "-e", ".[test]", *BACKEND_DEPS[backend], *TEST_TOOLS)
    backend_suite(session, backend)
    if backend == "jax":
        sharded_suite(session)


def backend_suite(session: nox.Session, backends: str) -> None:
    """The tests that need one of ``backends`` (comma-separated, all required), parity aside:
    JAX's in both of its modes."""
    # The sharding tests need 4 XLA host devices: sharded_suite and the distributed session.
    skip = "--ignore=tests/test_jax_sharding.py"
    pytest(session, "-m", "not parity", f"--backends={backends}", skip, *PARALLEL,
           require=backends, JAX_ENABLE_X64="0")  # fmt: skip
    if "jax" in backends.split(","):
        # 64-bit types exist in JAX only with jax_enable_x64: the tests they change, again.
        pytest(session, "-m", "x64 and not parity", "--backends=jax", skip, *PARALLEL,
               require=backends, JAX_ENABLE_X64="1")  # fmt: skip


def sharded_suite(session: nox.Session) -> None:
    """The JAX sharding tests on 4 host CPU devices."""
    pytest(session, "tests/test_jax_sharding.py", require="jax",
           XLA_FLAGS="--xla_force_host_platform_device_count=4")  # fmt: skip


@nox.session(python=pyenv_python("3.10"))
def oldest(session: nox.Session) -> None:
    """The floors pyproject.toml declares: Python 3.10, NumPy 1.26 and array-api-compat 1.9,
    on the NumPy and array-API backends."""
    install(session, "-e", ".[test]", "numpy==1.26.4", "array-api-compat==1.9", *TEST_TOOLS)
    backend_suite(session, "numpy,array_api_strict")


@nox.session(python=PYTHON)
def oldest_jax(session: nox.Session) -> None:
    """JAX's floor, 0.7.2 (with NumPy 2.0, the oldest it takes), sharded tests included."""
    install(session, "-e", ".[test]", "jax==0.7.2", "jaxlib==0.7.2", "numpy==2.0.2", *TEST_TOOLS)
    backend_suite(session, "jax")
    sharded_suite(session)


@nox.session(python=PYTHON)
def parity(session: nox.Session) -> None:
    """Every backend against every other, the ONNX cases and onnxruntime, in one environment
    (which `nox` runs in the distributed session's)."""
    install(session, "-e", ".[test]", "torch", "jax", "onnxruntime", "array-api-strict", "dask",
            *TEST_TOOLS)  # fmt: skip
    parity_suite(session)


def parity_suite(session: nox.Session) -> None:
    pytest(session, "-m", "parity", require="torch,jax,onnx,onnxruntime,array_api_strict")
    # The accelerator checks that need no GPU, with the device bounds policy forced on the CPU.
    measured(session, "benchmarks/device_check.py", "--cpu")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff on everything, mypy on the package."""
    install(session, "ruff", "mypy", "numpy", "array-api-compat", "torch", "jax")
    session.run("ruff", "check", ".")
    # Markdown pages hold doctest sessions, whose layout is the output they show: Python only.
    session.run(
        "ruff", "format", "--check", "gatherx", "tests", "benchmarks", "tools", "noxfile.py"
    )
    session.run("mypy", "gatherx")


@nox.session(python=PYTHON)
def distributed(session: nox.Session) -> None:
    """Dask, JAX sharded over 4 host CPU devices, ONNX run/export with onnxruntime, their pages;
    then, in this environment that has every backend, the parity session's suite."""
    install(session, "-e", ".[test]", "dask[array]", "jax", "torch", "onnxruntime", "onnxscript",
            *TEST_TOOLS)  # fmt: skip
    # XLA makes 4 CPU devices only if asked before JAX starts: set here, for the whole run.
    pytest(session, "tests/test_dask.py", "tests/test_jax_sharding.py",
           "tests/test_onnx_interop.py", "docs/scale_out.md", "docs/onnx_interop.md",
           "--doctest-glob=*.md", "-o", "doctest_optionflags=NORMALIZE_WHITESPACE ELLIPSIS",
           *PARALLEL, require="dask,jax,torch,onnx,onnxruntime,onnxscript",
           XLA_FLAGS="--xla_force_host_platform_device_count=4")  # fmt: skip
    parity_suite(session)


@nox.session(python=PYTHON)
def release(session: nox.Session) -> None:
    """The sdist and wheel built with warnings as errors; the wheel installed alone into a fresh
    venv, away from the source tree, runs `gatherx check` and the README's examples there."""
    install(session, "build")
    tmp = Path(session.create_tmp()).resolve()
    dist = tmp / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    # PYTHONWARNINGS reaches the isolated build environment: a deprecated setting fails here.
    session.run("python", "-m", "build", "--outdir", str(dist), str(ROOT),
                env={"PYTHONWARNINGS": "error"})  # fmt: skip
    session.run("python", str(ROOT / "tools" / "check_release.py"), "contents", str(dist))
    venv = tmp / "wheel-venv"
    shutil.rmtree(venv, ignore_errors=True)
    session.run("python", "-m", "venv", str(venv))
    python = str(venv / "bin" / "python")
    (wheel,) = dist.glob("gatherx-*.whl")
    # torch and jax for the README's examples; the pins as everywhere else.
    session.run(python, "-m", "pip", "install", "-q", "--no-compile", "-c", CONSTRAINTS,
                f"gatherx[check] @ {wheel.as_uri()}", "torch", "jax",
                external=True, env={"PIP_CONSTRAINT": CONSTRAINTS})  # fmt: skip
    # The README's examples run here only, against the installed wheel.
    with session.chdir(tmp):
        session.run(python, str(ROOT / "tools" / "check_release.py"), "installed",
                    str(venv), str(ROOT / "README.md"), external=True,
                    env={"JAX_ENABLE_X64": "0"})  # fmt: skip


#: The array-API libraries verified beyond array-api-strict (pinned in constraints.txt).
LIBRARIES = ["cubed", "ndonnx", "sparse"]


@nox.session(python=PYTHON)
def libraries(session: nox.Session) -> None:
    """cubed, ndonnx and pydata sparse through the array-API backend, `gatherx check` on each
    namespace included (a test each, run beside the others)."""
    install(session, "-e", ".[test]", *LIBRARIES, *TEST_TOOLS)
    pytest(session, "tests/test_array_api_libraries.py", *PARALLEL,
           require="cubed,ndonnx,sparse,onnx,onnxruntime,ml_dtypes")  # fmt: skip


#: The executed notebooks (.ipynb, outputs and all) that the docs build renders.
EXECUTED = ROOT / "docs" / "_build" / "executed"


def notebooks_suite(session: nox.Session, out: Path) -> None:
    """`.[notebooks]` installed as a user would, its Jupyter setup tested, then every notebook
    run top to bottom in a fresh kernel, with its run time, and saved executed into ``out``."""
    install(session, "-e", ".[notebooks]", "pytest", "hypothesis", "nbclient", COVERAGE)
    # Run here, where matplotlib and jupytext are installed and required: nowhere is it skipped.
    # (The bench's plots too: the backend sessions have no matplotlib.)
    plots = [
        "tests/test_bench_sweep.py::test_sweep_plot_has_a_panel_per_backend",
        "tests/test_bench_sparse.py::test_sparse_run_writes_tables_json_and_plot",
        "tests/test_bench_sparse.py::test_sparse_plot_is_log_log_with_labels_and_a_legend",
    ]
    pytest(session, "tests/test_notebooks_config.py", "tests/test_import_and_cli.py", *plots,
           require="matplotlib,jupytext,jupyterlab,torch")  # fmt: skip
    shutil.rmtree(out, ignore_errors=True)
    session.run("python", "notebooks/execute.py", "--out", str(out), env={"JAX_ENABLE_X64": "0"})


@nox.session(python=PYTHON)
def notebooks(session: nox.Session) -> None:
    """`.[notebooks]` installed as a user would, its Jupyter setup tested, then every notebook
    run top to bottom in a fresh kernel, with its run time (the docs session does all this
    too, then renders the notebooks it ran)."""
    notebooks_suite(session, Path(session.create_tmp()).resolve() / "executed")


def chromium(session: nox.Session) -> str:
    """The headless browser the page check drives: Debian's chromium, installed if missing."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.name != "posix" or os.geteuid() != 0:
        session.error("the page check needs chromium (Debian: apt-get install chromium)")
    # CI runs as root with only the package registries reachable: Debian's apt is one.
    session.run("apt-get", "update", "-q", external=True)
    session.run("apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium",
                external=True, env={"DEBIAN_FRONTEND": "noninteractive"})  # fmt: skip
    return shutil.which("chromium") or session.error("apt-get installed no chromium binary")


def staged_docs(executed: Path) -> Path:
    """A copy of docs/ whose notebooks are the executed ones, for Sphinx to render as they are
    (docs/conf.py: GATHERX_DOCS_EXECUTE=0), so that no notebook runs twice."""
    stage = ROOT / "docs" / "_build" / "source"
    shutil.rmtree(stage, ignore_errors=True)
    shutil.copytree(ROOT / "docs", stage, ignore=shutil.ignore_patterns("_build"))
    for page in sorted((stage / "notebooks").glob("[0-9][0-9]_*.md")):
        page.unlink()
        shutil.copy2(executed / f"{page.stem}.ipynb", page.with_suffix(".ipynb"))
    return stage


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """The notebooks session's checks and runs, the docs pages' examples, the site built with
    the notebooks as they ran, then the built pages checked and photographed in headless
    Chromium. (The README's examples run in the release session, on the installed wheel.)"""
    notebooks_suite(session, EXECUTED)
    # ml_dtypes, and flatbuffers for jax.export's serialization, shown on the compilers page.
    install(session, "ml_dtypes", "flatbuffers", "sphinx>=7", "myst-nb>=1.1", "furo")
    # scale_out.md and onnx_interop.md need dask and onnxruntime: the distributed session runs them.
    pages = ["docs/index.md", "docs/api.md", "docs/semantics.md", "docs/support.md",
             "docs/errors.md", "docs/autograd.md", "docs/compilers.md",
             "docs/comparison.md"]  # fmt: skip
    # torch.compile and forward AD raise DeprecationWarnings inside torch itself, which the
    # project's filterwarnings=error would turn into failures of correct examples.
    measured(session, "-m", "pytest", *pages, "--doctest-glob=*.md", "-p", "no:cacheprovider",
             "-o", "doctest_optionflags=NORMALIZE_WHITESPACE ELLIPSIS",
             "-W", "ignore::DeprecationWarning", env={"JAX_ENABLE_X64": "0"})  # fmt: skip
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", str(staged_docs(EXECUTED)),
                "docs/_build/html", *session.posargs,
                env={"JAX_ENABLE_X64": "0", "GATHERX_DOCS_EXECUTE": "0"})  # fmt: skip
    browser = chromium(session)
    session.run("python", "docs/check_pages.py", "docs/_build/html",
                "--screenshots", "docs/_build/screenshots", "--chromium", browser)  # fmt: skip


@nox.session(python=PYTHON)
def coverage(session: nox.Session) -> None:
    """Line and branch coverage of gatherx, combined over the sessions that ran before."""
    if not any(COVERAGE_DATA.glob(".coverage.*")):
        session.skip(f"no coverage data in {COVERAGE_DATA}: run the test sessions first")
    install(session, COVERAGE)
    env = {"COVERAGE_FILE": str(COVERAGE_DATA / ".coverage")}
    session.run("coverage", "combine", "--keep", "-q", str(COVERAGE_DATA), env=env)
    session.run("coverage", "report", env=env)
    session.run("python", str(ROOT / "tools" / "coverage_total.py"), env=env)


nox.options.sessions = [
    "tests",
    "oldest",
    "oldest_jax",
    "libraries",
    "lint",
    "distributed",
    "docs",
    "release",
    "coverage",
]
