"""Compare the tests two full ``nox`` runs collected and ran, from their JUnit XML files.

Usage: ``python tools/compare_test_ids.py BEFORE_DIR AFTER_DIR``, each folder holding one
``SESSION-N.xml`` per pytest run (``--junitxml``). Prints, per session, the tests collected and
run (not skipped), then whether the tests after are a superset of those before: collected
anywhere, and run anywhere. Exits 1 if a test before is missing after.
"""

from __future__ import annotations

import collections
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def node_id(case: ET.Element) -> str:
    module, name = case.get("classname", ""), case.get("name", "")
    return f"{module.replace('.', '/')}.py::{name}" if module.startswith("tests.") else name


def read(folder: Path) -> dict[str, tuple[set[str], set[str], list[int]]]:
    """Session -> (collected, run) test ids, and [tests run, seconds] over its pytest runs."""
    found: dict[str, tuple[set[str], set[str], list[int]]] = collections.defaultdict(
        lambda: (set(), set(), [0, 0])
    )
    for path in sorted(folder.glob("*.xml")):
        session = re.sub(r"-\d+$", "", path.stem)
        collected, ran, totals = found[session]
        for case in ET.parse(path).iter("testcase"):
            collected.add(node_id(case))
            totals[1] += float(case.get("time", 0))
            if case.find("skipped") is None:
                ran.add(node_id(case))
                totals[0] += 1
    return dict(found)


def main(before_dir: str, after_dir: str) -> int:
    before, after = read(Path(before_dir)), read(Path(after_dir))
    for label, runs in (("before", before), ("after", after)):
        print(f"{label}: session, distinct tests collected, run; runs of tests, their seconds")
        for session, (collected, ran, (runs_, secs)) in sorted(runs.items()):
            print(f"  {session:36} {len(collected):6} {len(ran):6} {runs_:6} {secs:7.0f}")
        total = [sum(len(r[i]) for r in runs.values()) for i in (0, 1)]
        runs_, secs = (sum(r[2][i] for r in runs.values()) for i in (0, 1))
        print(f"  {'all sessions':36} {total[0]:6} {total[1]:6} {runs_:6} {secs:7.0f}")
    missing = 0
    for what, index in (("collected", 0), ("run", 1)):
        old = set().union(*(r[index] for r in before.values()))
        new = set().union(*(r[index] for r in after.values()))
        lost = sorted(old - new)
        missing += len(lost)
        print(f"{what}: {len(old)} distinct before, {len(new)} after, {len(lost)} lost")
        for test in lost[:50]:
            print(f"  lost: {test}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
