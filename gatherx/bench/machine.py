"""The machine a run saw: versions, CPUs, huge pages, and its load average during the run."""

from __future__ import annotations

import math
import os
import platform
import sys
from dataclasses import dataclass, field

import numpy as np


def load_average() -> float:
    """The one-minute load average, NaN where the platform has none (Windows)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan


@dataclass
class Load:
    """Load averages sampled between groups: a run's times mean little if it was high.

    The run itself keeps about one CPU busy (more with several torch threads), so the load is
    called high when it exceeds the number of CPUs: other processes then competed for them.
    """

    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)
    samples: list[float] = field(default_factory=list)

    def sample(self) -> None:
        value = load_average()
        if not math.isnan(value):
            self.samples.append(value)

    @property
    def peak(self) -> float:
        return max(self.samples, default=math.nan)

    @property
    def high(self) -> bool:
        return bool(self.samples) and self.peak > self.cpus

    def describe(self) -> str:
        if not self.samples:
            return f"{self.cpus} CPUs, load not available"
        return (f"{self.cpus} CPUs, load {self.samples[0]:.1f} at the start, "
                f"{self.peak:.1f} at most")  # fmt: skip

    def warning(self) -> str | None:
        """A sentence for the report when the load was high, else None."""
        if not self.high:
            return None
        return (
            f"warning: the load average reached {self.peak:.1f} on {self.cpus} CPUs during the "
            "run: other processes competed for the CPUs, so times and ratios are unreliable "
            "(rerun on an idle machine, with more --repeats, or with --clock cpu)"
        )


def environment(load: Load | None = None) -> str:
    """Versions of what was timed, the CPUs and their load, on one line."""
    parts = [f"Python {platform.python_version()}", f"NumPy {np.__version__}"]
    for module in ("torch", "jax", "onnxruntime"):
        if module in sys.modules:
            parts.append(f"{module} {sys.modules[module].__version__}")
    if "torch" in sys.modules:
        parts.append(f"torch threads {sys.modules['torch'].get_num_threads()}")
    if load is None:
        load = Load()
        load.sample()
    parts += [load.describe(), platform.machine()]
    return ", ".join(parts)


#: PyTorch's CPU allocator asks for transparent huge pages (allocations of 2 MiB and more)
#: only when the process starts with this variable set to 1; it reads it once.
THP_VARIABLE = "THP_MEM_ALLOC_ENABLE"


def torch_huge_pages() -> bool:
    """Whether PyTorch's CPU allocator asks for huge pages in this process."""
    return os.environ.get(THP_VARIABLE, "").strip() == "1"


def huge_pages(torch: bool = True) -> str:
    """One sentence on huge pages for large outputs: PyTorch's setting (if ``torch``, a run that
    times PyTorch), NumPy's, the system's."""
    parts = []
    if torch and torch_huge_pages():
        parts.append(f"PyTorch huge pages on ({THP_VARIABLE}=1)")
    elif torch:
        parts.append(
            f"PyTorch huge pages off ({THP_VARIABLE} is not 1; start Python with "
            f"{THP_VARIABLE}=1 to turn them on)"
        )
    get = getattr(getattr(np, "_core", np.core), "multiarray", None)
    numpy_on = getattr(get, "_get_madvise_hugepage", None)
    if numpy_on is not None:
        parts.append(f"NumPy huge pages {'on' if numpy_on() else 'off'}")
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled", encoding="ascii") as f:
            mode = f.read().split("[")[1].split("]")[0]
        parts.append(f"system transparent huge pages: {mode}")
    except (OSError, IndexError):
        pass
    return ", ".join(parts) or "huge pages unknown"


def machine_record(load: Load, torch: bool = True) -> dict[str, object]:
    """What a bench's JSON records of the machine and its load during the run (PyTorch's huge
    pages if ``torch``, a run that times PyTorch)."""
    return {
        "environment": environment(load),
        "huge_pages": huge_pages(torch),
        "load": {
            "cpus": load.cpus,
            "samples": [round(s, 2) for s in load.samples],
            "high": load.high,
            "warning": load.warning(),
        },
    }
