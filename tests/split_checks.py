"""The forked-helper checks of tests/test_split_search.py, run in a fresh interpreter: a test process may
already hold threads (test_gate runs the Pulumi program at import, whose executor threads stay), and
planner/search/split.py rightly forks no helper beside a thread.

    python -m tests.split_checks NAME     # exits 0 when the check holds, 3 where no helper can be forked
"""

from __future__ import annotations

import os
import sys

from planner.search import split


def order() -> None:
    out = split.split_map(lambda x: (x * x, os.getpid(), sum(range(20000))), list(range(40)))
    assert [r[0] for r in out] == [x * x for x in range(40)]
    assert len({r[1] for r in out}) == 2  # a helper took some


def error() -> None:
    def fail_on_7(x):
        if x == 7:
            raise ValueError("item 7")
        return x

    try:
        split.split_map(fail_on_7, list(range(12)))
    except ValueError as exc:
        assert str(exc) == "item 7"
    else:
        raise AssertionError("no error raised")


def death() -> None:
    parent = os.getpid()

    def die_in_helper(x):
        if os.getpid() != parent:
            os._exit(3)  # the helper dies at its first item: nothing comes back
        return -x

    assert split.split_map(die_in_helper, list(range(10))) == [-x for x in range(10)]


def long() -> None:
    """More items than the queue's pipe is sure to hold: all searched here, none forked."""
    items = list(range(split.QUEUE_MAX_ITEMS + 1))
    assert split.split_map(lambda x: os.getpid(), items) == [os.getpid()] * len(items)


def plans() -> None:
    """The 405B plan and frontier at 512 nodes: one fork each (the frontier's spec and twin in one split),
    and every figure as one process finds it."""
    from planner.hardware.catalog import bundled
    from planner.pipeline import frontier, plan_workload
    from planner.search.tables import clear_search_tables
    from planner.workload.spec import parse_workloads

    raw = {"name": "train-405b", "kind": "training", "model": {"preset": "llama-3.1-405b"},
           "training": {"tokens": 1.0e12, "sequence_length": 8192, "global_batch_tokens": 1.6e7,
                        "deadline_hours": 2160}, "constraints": {"max_nodes": 512}}
    w, catalog = parse_workloads({"workloads": [raw]}, "t").workloads[0], bundled()

    def outcome():
        clear_search_tables()
        return plan_workload(w, catalog).model_dump_json(), repr(frontier(w, catalog))

    forked, real_fork = [], os.fork
    os.fork = lambda: forked.append(1) or real_fork()
    shared = outcome()
    assert len(forked) == 2, forked
    os.environ["GPUPLAN_WORKERS"] = "1"
    assert outcome() == shared
    assert len(forked) == 2


if __name__ == "__main__":
    if not split.may_fork():
        sys.exit(3)
    globals()[sys.argv[1]]()
