"""Issue 31, the front door: schemas and a spec reference generated from the models, messages that
say how to fix themselves, context beyond training refused, help that fits 80 columns."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from gpuplan.cli import app
from planner import InfeasibleError, SpecError, load_workloads, plan_workloads
from tests.conftest import ROOT, write_yaml

runner = CliRunner()


def _spec(tmp_path, **fields):
    base = {"name": "w", "kind": "inference", "model": {"preset": "llama-3.1-8b"}}
    return write_yaml(tmp_path / "w.yaml", {"workloads": [{**base, **fields}]})


def _error(tmp_path, **fields) -> str:
    with pytest.raises(SpecError) as exc:
        load_workloads(_spec(tmp_path, **fields))
    return str(exc.value)


# 1. Schemas and the spec reference
@pytest.mark.parametrize("name", ["workloads", "stack", "overlay", "plan"])
def test_schema_command_prints_each_schema(name):
    result = runner.invoke(app, ["schema", name])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    assert schema["$schema"].startswith("https://json-schema.org/")
    text = result.output
    expected = {"workloads": "concurrent_requests", "stack": "gpuplan:workloads", "overlay": "instance_types",
                "plan": "usd_per_hour"}[name]
    assert expected in text


def test_schema_command_refuses_an_unknown_name():
    result = runner.invoke(app, ["schema", "nope"])
    assert result.exit_code == 2


def test_workloads_schema_rejects_a_typo_and_takes_a_hugging_face_id():
    from planner.report.schemas import schema_for

    schema = schema_for("workloads")
    serving = schema["$defs"]["Serving"]
    assert serving["additionalProperties"] is False
    assert serving["properties"]["concurrent_requests"]["default"] == 16
    model = schema["$defs"]["Workload"]["properties"]["model"]
    assert any(option.get("type") == "string" for option in model["anyOf"])


def test_committed_schemas_and_spec_doc_match_the_models():
    from planner.report.schemas import generated_files

    for path, text in generated_files().items():
        committed = (ROOT / path).read_text()
        assert committed == text, f"{path} is stale: run python scripts/generate_docs.py"


def test_examples_point_editors_at_the_schemas():
    for path, schema in (("examples/workloads.yaml", "../schemas/workloads.schema.json"),
                         ("examples/owned-hgx-h100.yaml", "../schemas/workloads.schema.json"),
                         ("Pulumi.example.yaml", "schemas/stack.schema.json")):
        first = (ROOT / path).read_text().splitlines()[0]
        assert first == f"# yaml-language-server: $schema={schema}", path
        assert (ROOT / path).parent.joinpath(schema).resolve().is_file()


def test_spec_doc_lists_every_field_with_unit_default_range_and_example():
    from planner.report.schemas import spec_rows

    rows = spec_rows()
    paths = {r.path for r in rows}
    for path in ("serving.concurrent_requests", "training.tokens", "constraints.max_nodes",
                 "model.architecture.layers", "allow_context_extension"):
        assert path in paths
    by_path = {r.path: r for r in rows}
    row = by_path["serving.max_time_to_first_token_ms"]
    assert (row.unit, row.range) == ("ms", "> 0, ≤ 3,600,000")
    assert by_path["constraints.max_nodes"].default == "64"
    assert by_path["training.tokens"].default == "required"
    assert all(r.example for r in rows), [r.path for r in rows if not r.example]
    doc = (ROOT / "docs" / "spec.md").read_text()
    assert "| `serving.concurrent_requests` |" in doc


def test_readme_points_at_the_spec_doc_not_design_md():
    readme = (ROOT / "README.md").read_text()
    assert "docs/spec.md" in readme
    assert "design.md" not in readme


# 2. Messages that fix themselves
def test_unknown_key_suggests_the_closest_known_one(tmp_path):
    message = _error(tmp_path, serving={"concurent_requests": 4})
    assert "did you mean concurrent_requests?" in message
    assert "workloads[0].serving.concurent_requests" in message
    assert "Extra inputs are not permitted" not in message


def test_unknown_key_with_no_close_match_lists_the_allowed_keys(tmp_path):
    message = _error(tmp_path, constraints={"zzz": 1})
    assert "allowed: region, families, instance_types, max_nodes" in message


def test_every_missing_architecture_field_is_reported_at_once(tmp_path):
    message = _error(tmp_path, model={"architecture": {"params": 7e9}})
    for field in ("layers", "hidden_size", "attention_heads", "kv_heads", "head_dim", "ffn_hidden_size",
                  "vocab_size"):
        assert field in message
    assert message.split("workloads[0].model: ")[1].count("missing") == 1


def test_architecture_typo_is_suggested(tmp_path):
    message = _error(tmp_path, model={"preset": "llama-3.1-8b", "architecture": {"hiden_size": 4096}})
    assert "did you mean hidden_size?" in message


def test_model_accepts_a_hugging_face_id_or_a_preset_name(tmp_path):
    spec = load_workloads(_spec(tmp_path, model="meta-llama/Llama-3.1-8B-Instruct"))
    assert spec.workloads[0].model.preset == "llama-3.1-8b"
    spec = load_workloads(_spec(tmp_path, model="mistral-7b"))
    assert spec.workloads[0].architecture.layers == 32


def test_unknown_hugging_face_id_says_what_is_accepted(tmp_path):
    message = _error(tmp_path, model="meta-llama/Llama-3.1-8B-Instructt")
    assert "did you mean meta-llama/llama-3.1-8b-instruct?" in message.lower()
    assert "valid dictionary" not in message


# 3. Every limit named
def test_concurrency_past_the_node_cap_names_the_cap_and_how_to_lift_it(tmp_path):
    spec = load_workloads(_spec(tmp_path, model={"preset": "llama-3.1-70b"},
                                serving={"concurrent_requests": 100_000}))
    with pytest.raises(InfeasibleError) as exc:
        plan_workloads(spec)
    text = str(exc.value)
    assert "constraints.max_nodes 64" in text
    assert "raise constraints.max_nodes" in text


def test_a_region_the_catalog_does_not_price_names_the_priced_regions(tmp_path):
    spec = load_workloads(_spec(tmp_path))
    with pytest.raises(SpecError) as exc:  # bad input the user can fix (exit 2), named before any search
        plan_workloads(spec, region="us-east-2")
    text = str(exc.value)
    assert "the catalog prices no instance type in us-east-2" in text
    assert "us-east-1" in text and "us-west-2" in text
    assert "gpuplan catalog refresh --region us-east-2" in text


# 4. Context beyond training, tokens below a batch
def test_serving_context_beyond_the_trained_length_is_an_error(tmp_path):
    message = _error(tmp_path, serving={"max_context_tokens": 200_000})
    assert "200000" in message and "131072" in message
    assert "allow_context_extension: true" in message and "RoPE scaling" in message


def test_context_extension_allowed_plans_with_a_warning(tmp_path):
    spec = load_workloads(_spec(tmp_path, serving={"max_context_tokens": 200_000}, allow_context_extension=True))
    assert spec.workloads[0].serving.max_context_tokens == 200_000


def test_training_sequence_beyond_the_trained_length_is_an_error(tmp_path):
    message = _error(tmp_path, kind="training", model={"preset": "mistral-7b"},
                     training={"tokens": 1e9, "sequence_length": 1_000_000})
    assert "sequence_length 1000000" in message and "32768" in message


def test_training_tokens_below_one_global_batch_is_an_error(tmp_path):
    message = _error(tmp_path, kind="training", training={"tokens": 1})
    assert "training.tokens" in message
    assert "4e+06" in message or "4,000,000" in message


# 5. Help and demo
def _commands(group, prefix=()):
    """Every leaf command (typer vendors click, so groups are known by their `commands`)."""
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _commands(command, (*prefix, name))
        else:
            yield (*prefix, name), command


def test_every_flag_has_a_description():
    root = typer.main.get_command(app)
    missing = [f"{' '.join(path)} {p.opts[0]}" for path, command in _commands(root) for p in command.params
               if p.param_type_name == "option" and not p.help]
    assert missing == []


def test_help_fits_80_columns():
    root = typer.main.get_command(app)
    for path, _ in [((), None), *_commands(root)]:
        result = subprocess.run([sys.executable, "-m", "gpuplan.cli", *path, "--help"], capture_output=True,
                                text=True, env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"}, cwd=ROOT)
        assert result.returncode == 0, result.stderr
        assert max(len(line) for line in result.stdout.splitlines()) <= 80, path
        assert "…" not in result.stdout, path


def test_summary_format_is_one_line_per_workload():
    result = runner.invoke(app, ["plan", str(ROOT / "examples" / "workloads.yaml"), "--format", "summary"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 + 4
    assert lines[1].split()[0] == "chat-8b"


def test_make_demo_prints_the_summary_and_writes_the_full_plans():
    makefile = (ROOT / "Makefile").read_text()
    demo = makefile.split("\ndemo:")[1].split("\n\n")[0]
    assert "--format summary" in demo
    assert "demo-plans/" in demo
