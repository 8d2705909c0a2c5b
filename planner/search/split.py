"""One search shared with a forked helper process (issue 29: the 405B training search over the whole catalog
at 4,096 nodes, and its frontier). Each instance type's search is independent and pure, so a process forked
from the planner (sharing its loaded catalog and tables) can search some of the types while this one searches
the rest; the answers come back in the types' order, each exactly what this process would have found.

The types are handed out one at a time through a pipe both processes read (each read of a record is atomic),
so whichever is free takes the next: no estimate of a type's cost is needed to balance them."""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

WORKERS_ENV = "GPUPLAN_WORKERS"  # 1: everything in this process (shared with planner/search/parallel.py)
_RECORD = 2  # bytes per queued index
# The whole queue is written before the fork, so it must fit a pipe's buffer: 4,096 bytes is the least a Linux
# pipe holds (one page, when the user's pipe pages run short; pipe(7)). A catalog has ~60 types.
QUEUE_MAX_ITEMS = 4096 // _RECORD
_in_helper = False  # set in a forked process (plan_each's workers, this module's helper): it forks no further


def mark_helper() -> None:
    """This process is a forked worker already sharing the cores: it searches alone."""
    global _in_helper
    _in_helper = True


def may_fork() -> bool:
    """A helper process can be forked here: Linux, more than one usable core, not inside a worker,
    GPUPLAN_WORKERS not 1, and no other thread running (forking beside a running thread, the Pulumi runtime's
    gRPC ones for instance, can leave the child holding a lock no thread will release). A fork without exec
    is not safe on macOS, whose system libraries are not fork-safe (CPython's multiprocessing spawns there)."""
    if _in_helper or not sys.platform.startswith("linux") or threading.active_count() > 1:
        return False
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    cap = os.environ.get(WORKERS_ENV, "")
    return cores > 1 and not (cap.isdigit() and int(cap) <= 1)


def split_map(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """[fn(item) for item in items], with a forked helper taking items too where may_fork(). What the helper
    learns on the way (the search tables it fills) stays in it: a caller that would search the same items again
    asks for both searches in one fn (pipeline.frontier's spec and its deadline-free twin)."""
    if len(items) < 2 or len(items) > QUEUE_MAX_ITEMS or not may_fork():
        return [fn(item) for item in items]
    queue_r, queue_w = os.pipe()
    os.write(queue_w, b"".join(i.to_bytes(_RECORD, "big") for i in range(len(items))))  # fits the pipe: never blocks
    os.close(queue_w)  # the queue ends when both have read it all
    result_r, result_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the helper: searches until the queue is empty, sends its answers, leaves without cleanup
        os.close(result_r)
        mark_helper()
        status = 0
        try:
            done, _ = _drain(fn, items, queue_r)
            payload = pickle.dumps(done, pickle.HIGHEST_PROTOCOL)
            with os.fdopen(result_w, "wb") as out:
                out.write(payload)
        except BaseException:  # noqa: BLE001 - the parent redoes whatever did not come back
            status = 1
        finally:
            os._exit(status)  # no atexit, no flushing of buffers the parent owns
    os.close(result_w)
    received, finished = b"", False
    try:
        mine, _ = _drain(fn, items, queue_r, raise_errors=True)
        with os.fdopen(result_r, "rb") as inp:
            result_r = -1  # closed with the file
            received = inp.read()
        finished = True
    finally:
        if not finished:  # an error here: the helper's answers are not wanted, and it may be blocked writing them
            os.kill(pid, signal.SIGKILL)
            if result_r >= 0:
                os.close(result_r)
        os.close(queue_r)
        os.waitpid(pid, 0)
    results: dict[int, R] = dict(mine)
    try:
        results.update(pickle.loads(received) if received else ())
    except Exception:  # noqa: BLE001 - a helper that died mid-write: its items are searched here
        pass
    # whatever the helper did not send back (it failed, or died) is searched here, so its error is raised here
    return [results[i] if i in results else fn(items[i]) for i in range(len(items))]


def _drain(fn, items, queue_r: int, raise_errors: bool = False) -> tuple[list[tuple[int, object]], int | None]:
    """Take indices off the queue until it is empty: [(index, fn(item))], and the index that failed (helper)."""
    done = []
    while record := os.read(queue_r, _RECORD):
        i = int.from_bytes(record, "big")
        try:
            done.append((i, fn(items[i])))
        except Exception:
            if raise_errors:
                raise
            return done, i
    return done, None
