"""Print the line and branch totals of the combined coverage data (``nox -s coverage``)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import coverage


def main() -> int:
    cov = coverage.Coverage()
    cov.load()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "coverage.json"
        cov.json_report(outfile=str(out))
        totals = json.loads(out.read_text())["totals"]
    lines, statements = totals["covered_lines"], totals["num_statements"]
    branches, all_branches = totals["covered_branches"], totals["num_branches"]
    print(
        f"lines {lines}/{statements} ({100 * lines / max(statements, 1):.2f}%), "
        f"branches {branches}/{all_branches} ({100 * branches / max(all_branches, 1):.2f}%), "
        f"total {totals['percent_covered']:.2f}%"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
