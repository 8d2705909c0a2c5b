"""`check` and `cost` run with Python's cyclic garbage collector paused (issue 29): importing pulumi_aws
and running the program under mocks allocate ~270,000 long-lived objects, and the collector's passes
over them were ~0.2 s of a ~0.9 s check. The collector is back on when the command returns, so an
in-process caller (tests, CliRunner) keeps its own setting. Behaviour only, no timings."""

from __future__ import annotations

import gc

import pytest
from typer.testing import CliRunner

import gpuplan.check
from gpuplan.cli import app
from tests.conftest import ROOT

EXAMPLE = str(ROOT / "Pulumi.example.yaml")


@pytest.fixture
def seen(monkeypatch) -> list[bool]:
    """gc.isenabled() as the policy check found it."""
    states: list[bool] = []
    real = gpuplan.check.check_file

    def recording(*args, **kwargs):
        states.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(gpuplan.check, "check_file", recording)
    return states


@pytest.mark.parametrize("argv", [["check", EXAMPLE], ["cost", "--base", EXAMPLE, "--head", EXAMPLE, "--no-frontier"]])
def test_the_collector_is_paused_during_the_command_and_restored_after(seen, argv):
    assert gc.isenabled()
    done = CliRunner().invoke(app, argv)
    assert done.exit_code == 0, done.output
    assert seen == [False]
    assert gc.isenabled()


def test_a_caller_that_disabled_the_collector_keeps_it_disabled(seen):
    gc.disable()
    try:
        done = CliRunner().invoke(app, ["check", EXAMPLE])
        assert done.exit_code == 0, done.output
        assert seen == [False] and not gc.isenabled()
    finally:
        gc.enable()


def test_a_failing_command_restores_the_collector(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("workloads: [{name: x, kind: nope}]\n")
    done = CliRunner().invoke(app, ["check", str(bad)])
    assert done.exit_code == 2, done.output
    assert gc.isenabled()


def test_garbage_made_during_the_command_is_still_collected_and_nothing_stays_frozen(monkeypatch):
    import weakref

    real = gpuplan.check.check_file
    refs = []

    class Node:
        pass

    def cyclic(*args, **kwargs):
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle only the collector frees
        refs.append(weakref.ref(a))
        return real(*args, **kwargs)

    monkeypatch.setattr(gpuplan.check, "check_file", cyclic)
    done = CliRunner().invoke(app, ["check", EXAMPLE])
    assert done.exit_code == 0, done.output
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    gc.collect()
    assert refs[0]() is None


def test_a_callers_frozen_objects_stay_frozen(seen):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        done = CliRunner().invoke(app, ["check", EXAMPLE])
        assert done.exit_code == 0, done.output
        assert 0 < gc.get_freeze_count() <= frozen and seen == [False]  # none thawed, none added (some freed)
    finally:
        gc.unfreeze()
