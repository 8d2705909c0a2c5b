"""The chosen plan of every workload in a fixed generated corpus (240 specs and the examples) is the
recorded one: a search or estimator change that moves a choice fails here until it is re-recorded
(GPUPLAN_UPDATE_GOLDEN=1) and the move is explained in its commit."""

from __future__ import annotations

import json
import os

from tests.chosen_plans import GOLDEN, corpus, moves, record


def test_corpus_is_large_and_mixed():
    workloads = corpus()
    assert len(workloads) >= 240
    kinds = {w["kind"] for w in workloads}
    assert kinds == {"inference", "training", "fine-tuning"}


def test_no_chosen_plan_moved():
    now = record()
    if os.environ.get("GPUPLAN_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    recorded = json.loads(GOLDEN.read_text())
    moved = moves(recorded, now)
    assert not moved, f"{len(moved)} chosen plans moved:\n" + "\n".join(moved[:20])
    assert sum(v["outcome"] == "planned" for v in now.values()) >= 200
