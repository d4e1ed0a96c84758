"""``gatherx bench``: gatherx timed against each backend's native Gather formulations.

``python -m gatherx bench --help`` lists the options; ``docs/performance.md`` explains the method.
"""

from .cases import BACKENDS, CASES, GOALS, Case, Goal, goal_for
from .formulations import Entry, Inputs, build_entries, make_inputs, verify
from .harness import add_arguments, main, run
from .machine import Load, environment
from .report import Row, detail_table, fmt_time, summarize, summary_table
from .timing import CLOCKS, rounds

__all__ = [
    "BACKENDS", "CASES", "CLOCKS", "GOALS", "Case", "Entry", "Goal", "Inputs", "Load", "Row",
    "add_arguments", "build_entries", "detail_table", "environment", "fmt_time", "goal_for", "main",
    "make_inputs", "rounds", "run", "summarize", "summary_table", "verify",
]  # fmt: skip
