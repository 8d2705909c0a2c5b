"""planner.json_stream (issue 29): `plan --format json` writes plan by plan, byte for byte what
render_json returns (the golden files pin that shape)."""

from __future__ import annotations

import io
from pathlib import Path

from planner import plan_file
from planner.json_stream import write_json
from planner.plan import PlanSet
from planner.report import render_json

ROOT = Path(__file__).resolve().parent.parent


def _streamed(plans: PlanSet) -> str:
    out = io.StringIO()
    write_json(plans, out)
    return out.getvalue()


def test_streamed_json_is_render_json_byte_for_byte():
    plans = plan_file(ROOT / "examples" / "workloads.yaml")
    assert len(plans.plans) >= 3
    assert _streamed(plans) == render_json(plans)
    one = plans.model_copy(update={"plans": plans.plans[:1], "catalog": 'odd "name" é'})
    assert _streamed(one) == render_json(one)


def test_an_empty_set_streams_as_rendered():
    empty = PlanSet(plans=[])
    assert _streamed(empty) == render_json(empty)
