"""Run each MyST notebook here top to bottom in a fresh kernel and time it: ``nox -s notebooks``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

HERE = Path(__file__).parent


def run(path: Path, timeout: int, out_dir: Path | None) -> float:
    """Execute one notebook in its own folder; return its wall time in seconds."""
    notebook = jupytext.read(path)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(HERE)}},
    )
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, out_dir / f"{path.stem}.ipynb")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help="notebook file names (default: all NN_*.md here)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per cell (default 300)")
    parser.add_argument("--out", type=Path, help="also save the executed notebooks (.ipynb) here")
    args = parser.parse_args(argv)

    paths = [HERE / name for name in args.names] or sorted(HERE.glob("[0-9][0-9]_*.md"))
    passed, failed = 0, 0
    for path in paths:
        try:
            elapsed = run(path, args.timeout, args.out)
        except CellExecutionError as exc:
            failed += 1
            print(f"FAILED {path.name}\n{exc}", flush=True)
        else:
            passed += 1
            print(f"{path.name}: {elapsed:.1f} s", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not paths else 0


if __name__ == "__main__":
    sys.exit(main())
