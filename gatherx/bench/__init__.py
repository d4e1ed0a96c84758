"""``gatherx bench``: gatherx timed against each backend's native Gather formulations.

``python -m gatherx bench --help`` lists the options; ``docs/performance_details.md``
explains the method.
"""

from .cases import BACKENDS, CASES, Case
from .formulations import Entry, Inputs, build_entries, make_inputs, verify
from .harness import add_arguments, main, run, time_case
from .machine import Load, environment
from .report import Row, detail_table, fmt_time, summarize, summary_table
from .sweep import Result, Stats, draw_cases, statistics_of
from .timing import CLOCKS, rounds

__all__ = [
    "BACKENDS", "CASES", "CLOCKS", "Case", "Entry", "Inputs", "Load", "Result", "Row", "Stats",
    "add_arguments", "build_entries", "detail_table", "draw_cases", "environment", "fmt_time",
    "main", "make_inputs", "rounds", "run", "statistics_of", "summarize", "summary_table",
    "time_case", "verify",
]  # fmt: skip
