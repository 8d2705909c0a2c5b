"""Issue 29: a user's file is composed by libyaml when its event scan finds it well formed and shallow, and
that path builds exactly what the Python parser builds and refuses exactly what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.workload import yamlsafe

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")


def _python(text: str):
    loader = yamlsafe._Loader(text)
    try:
        return loader.get_data()
    finally:
        loader.dispose()


@pytest.mark.parametrize("name", ["examples/workloads.yaml", "Pulumi.example.yaml"])
def test_the_fast_path_builds_what_the_python_parser_builds(name):
    text = (ROOT / name).read_text()
    depth, nodes, aliases = yamlsafe._scan(text)
    assert depth <= yamlsafe.C_COMPOSE_MAX_DEPTH and not aliases and nodes > 20
    assert yamlsafe.load_text(text) == _python(text)


@pytest.mark.parametrize("text, value", [
    ("a: 010\nb: 1:30\nc: yes\nd: 1e3\ne: .inf\nf: ~\ng: '010'\n", {"a": 10, "b": "1:30", "c": "yes", "d": 1000.0,
                                                                   "e": float("inf"), "f": None, "g": "010"}),
    ("base: &b {x: 1}\none: *b\ntwo: *b\n", {"base": {"x": 1}, "one": {"x": 1}, "two": {"x": 1}}),
])
def test_yaml_1_2_numbers_and_aliases_on_the_fast_path(text, value):
    assert yamlsafe._scan(text) is not None
    assert yamlsafe.load_text(text) == value == _python(text)


@pytest.mark.parametrize("text, problem", [
    ("a: 1\na: 2\n", "appears twice"),
    ("1: x\n", "is not text"),
    ("a: " + "9" * 200 + "\n", "digits"),
])
def test_the_fast_path_refuses_what_the_python_parser_refuses(text, problem):
    assert yamlsafe._scan(text) is not None  # well formed: libyaml composes it
    with pytest.raises(yaml.YAMLError) as fast:
        yamlsafe.load_text(text)
    with pytest.raises(yaml.YAMLError) as slow:
        _python(text)
    assert str(fast.value) == str(slow.value) and problem in str(fast.value)
    marks = [getattr(e.value, "problem_mark", None) for e in (fast, slow)]
    assert [(m.line, m.column) if m else None for m in marks][0] == [(m.line, m.column) if m else None for m in marks][1]


def test_deep_or_malformed_documents_go_through_the_python_parser():
    deep = "[" * (yamlsafe.C_COMPOSE_MAX_DEPTH + 1) + "]" * (yamlsafe.C_COMPOSE_MAX_DEPTH + 1)
    assert yamlsafe._scan(deep)[0] == yamlsafe.C_COMPOSE_MAX_DEPTH + 1
    with pytest.raises(RecursionError):
        yamlsafe.load_text("[" * 5000 + "]" * 5000)  # the Python composer's limit, as before
    assert yamlsafe._scan("a: [1, 2\n") is None  # libyaml's error: the Python parser words it
    with pytest.raises(yaml.YAMLError, match="flow sequence"):
        yamlsafe.load_text("a: [1, 2\n")
