"""The rules the ``gatherx`` command's options share: lists of names, backends, optional
packages and output files. Each refuses with a ValueError before any work is done, which the
command prints as one line with exit code 2."""

from __future__ import annotations

import argparse
import errno
import importlib.util
import os
from collections.abc import Mapping, Sequence


def names(text: str | None, known: Sequence[str], what: str) -> list[str]:
    """The comma-separated names of ``text``, each once in the order given; all of ``known``
    when ``text`` is None.

    Raises
    ------
    ValueError
        If ``text`` names nothing (an empty list silently meaning "all" would hide a mistyped
        shell variable) or a name not in ``known``.
    """
    if text is None:
        return list(known)
    chosen = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not chosen:
        msg = f"no {what} given (an empty list); choose from: {', '.join(known)}"
        raise ValueError(msg)
    unknown = [n for n in chosen if n not in known]
    if unknown:
        msg = f"unknown {what} {', '.join(unknown)}; known: {', '.join(known)}"
        raise ValueError(msg)
    return chosen


def installed(module: str) -> bool:
    """Whether ``module``'s top-level package can be imported (without importing it)."""
    return importlib.util.find_spec(module.partition(".")[0]) is not None


def backends(text: str | None, modules: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """The backends to run, and those left out as not installed: without ``--backends``
    (``text`` None), every backend of ``modules`` (name -> module it needs) that is installed;
    with it, the backends it names, each of which must be installed.

    Raises
    ------
    ValueError
        As `names` does, or if a backend named is not installed.
    """
    found = [name for name, module in modules.items() if installed(module)]
    if text is None:
        return found, [name for name in modules if name not in found]
    chosen = names(text, list(modules), "backend(s)")
    missing = [name for name in chosen if name not in found]
    if missing:
        msg = f"backend(s) not installed: {', '.join(missing)}"
        raise ValueError(msg)
    return chosen, []


def require(module: str, needed_by: str, install: str | None = None) -> None:
    """Refuse ``needed_by`` (an option, a command) when the optional package ``module`` it needs
    is not installed; ``install`` is what to ``pip install`` (``module`` by default)."""
    if not installed(module):
        msg = f"{needed_by} needs the {module} package: pip install {install or module}"
        raise ValueError(msg)


def writable(option: str, path: str) -> None:
    """Refuse an output file the run could not write at its end; the file is neither created
    nor truncated here."""
    folder = os.path.dirname(path) or os.curdir
    if os.path.isdir(path):
        reason: int | None = errno.EISDIR
    elif os.path.exists(path):
        reason = None if os.access(path, os.W_OK) else errno.EACCES
    elif not os.path.exists(folder):
        reason = errno.ENOENT
    elif not os.path.isdir(folder):
        reason = errno.ENOTDIR
    else:
        reason = None if os.access(folder, os.W_OK | os.X_OK) else errno.EACCES
    if reason is not None:
        msg = f"{option} {path}: cannot write it ({os.strerror(reason)})"
        raise ValueError(msg)


def at_least_one(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        msg = f"expected a whole number >= 1, not {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value
