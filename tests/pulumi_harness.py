"""Run the real __main__.py under Pulumi's unit-test mocks with a stack file's config, and keep
every registered resource's inputs as the engine sees them (camelCase, numbers as floats)."""

from __future__ import annotations

import json
import runpy
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import yaml

ROOT = Path(__file__).resolve().parent.parent
AMI = "ami-0123456789abcdef0"


@dataclass
class Registered:
    type: str
    name: str
    inputs: dict
    outputs: dict


@dataclass
class Mocks(pulumi.runtime.Mocks):
    preview: bool = False
    resources: list[Registered] = field(default_factory=list)
    calls: list[tuple[str, dict]] = field(default_factory=list)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        outputs = dict(args.inputs)
        physical = f"{args.name}-1a2b3c"
        if self.preview:  # computed outputs (names, ARNs) are unknown until the provider creates them
            self.resources.append(Registered(args.typ, args.name, dict(args.inputs), outputs))
            return "", outputs
        if args.typ.startswith(("aws:sagemaker/", "aws:iam/", "aws:ec2/placementGroup")):
            outputs.setdefault("name", physical)
        if args.typ.startswith("aws:"):
            service = args.typ.split(":")[1].split("/")[0]
            outputs.setdefault("arn", f"arn:aws:{service}:us-east-1:123456789012:{physical}")
        if args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            outputs["latestVersion"] = 1
        self.resources.append(Registered(args.typ, args.name, dict(args.inputs), outputs))
        return f"{physical}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        self.calls.append((args.token, dict(args.args)))
        if args.token == "aws:ssm/getParameter:getParameter":
            return {"name": args.args["name"], "value": AMI, "type": "String", "id": args.args["name"]}
        return {}

    def of_type(self, suffix: str) -> list[Registered]:
        return [r for r in self.resources if r.type.endswith(suffix)]


def stack_config(path: Path = ROOT / "Pulumi.example.yaml") -> dict:
    return yaml.safe_load(path.read_text())["config"]


def run_program(config: dict, preview: bool = False) -> Mocks:
    """A fresh program run: config values are JSON strings, as the engine hands them over."""
    mocks = Mocks(preview=preview)
    pulumi.runtime.set_mocks(mocks, project="gpuplan", stack="test", preview=preview)
    pulumi.runtime.set_all_config({k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()})

    @pulumi.runtime.test
    def program():
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")

    program()
    return mocks
