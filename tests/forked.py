"""Fresh processes forked from a parent that imported a framework and nothing of gatherx.

A fresh ``python -c`` spends 2-3 s importing torch before its first gatherx call. A child
forked from a parent that imported the framework and nothing else is the same process from the
script's ``import torch`` on: gatherx is imported and called for the first time in the child.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading

# The parent: imports the frameworks it is given, then forks one child per request line
# ({"code", "argv", "env", "stdout", "stderr"}) and answers {"pid"} then {"status"}. The child
# runs the code as `python -c` does, in a new __main__, its output in the given files.
PARENT = r"""
import importlib, json, os, sys, traceback, types
for name in sys.argv[1:]:
    importlib.import_module(name)
if any(m.partition(".")[0] == "gatherx" for m in sys.modules):
    raise SystemExit("the forking parent must not import gatherx")


def child(job):
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(os.open(job["stdout"], os.O_WRONLY), 1)
    os.dup2(os.open(job["stderr"], os.O_WRONLY), 2)
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    sys.argv = ["-c", *job["argv"]]
    os.environ.clear()
    os.environ.update(job["env"])
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    try:
        exec(compile(job["code"], "<string>", "exec"), main.__dict__)
        return 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


replies = sys.stdout
for line in sys.stdin:
    job = json.loads(line)
    replies.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            status = child(job)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            coverage = sys.modules.get("coverage")  # the child's own, restarted at the fork
            cov = coverage and coverage.Coverage.current()
            if cov:
                cov.stop()
                cov.save()
            os._exit(status)
    print(json.dumps({"pid": pid}), file=replies, flush=True)
    _, waited = os.waitpid(pid, 0)
    print(json.dumps({"status": os.waitstatus_to_exitcode(waited)}), file=replies, flush=True)
"""

_PARENTS: dict[tuple[object, ...], subprocess.Popen[str]] = {}
#: Set by pytest for each test, and read by nothing at a process's start.
_PER_TEST = frozenset({"PYTEST_CURRENT_TEST"})


def _parent(warm: tuple[str, ...], env: dict[str, str]) -> subprocess.Popen[str]:
    env = {k: v for k, v in env.items() if k not in _PER_TEST}
    key = (warm, tuple(sorted(env.items())))
    parent = _PARENTS.get(key)
    if parent is None or parent.poll() is not None:
        parent = subprocess.Popen(
            [sys.executable, "-c", PARENT, *warm],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        _PARENTS[key] = parent
    return parent


@atexit.register
def _close() -> None:
    for parent in _PARENTS.values():
        if parent.stdin:
            parent.stdin.close()  # its loop ends, and it exits as any process does
        try:
            parent.wait(timeout=60)
        except subprocess.TimeoutExpired:
            parent.kill()
            parent.wait()
        if parent.stdout:
            parent.stdout.close()


def run(
    code: str, args: tuple[str, ...], warm: tuple[str, ...], env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """``python -c code *args`` with environment ``env``, as a child forked from a parent that
    imported ``warm`` (and was started with the same environment)."""
    parent = _parent(warm, env)
    assert parent.stdin
    assert parent.stdout
    with tempfile.TemporaryDirectory() as tmp:
        out, err = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        for path in (out, err):
            open(path, "w").close()
        job = {"code": code, "argv": list(args), "env": env, "stdout": out, "stderr": err}
        parent.stdin.write(json.dumps(job) + "\n")
        parent.stdin.flush()
        reply = parent.stdout.readline()
        assert reply, f"the forking parent of {warm} ended (exit status {parent.poll()})"
        pid = json.loads(reply)["pid"]
        timer = threading.Timer(timeout, os.kill, (pid, 9))  # the child, never the parent
        timer.start()
        try:
            status = json.loads(parent.stdout.readline())["status"]
        finally:
            timer.cancel()
        with open(out) as o, open(err) as e:
            return subprocess.CompletedProcess(["-c", code, *args], status, o.read(), e.read())
