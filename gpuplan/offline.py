"""Run the Pulumi program without an engine: Pulumi's own unit-test mocks stand in for the CLI and
the provider, so `gpuplan check` sees exactly the resource properties the components register
(camelCase, numbers as floats), as the policy pack would during `pulumi preview`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
from pulumi.runtime.mocks import MockMonitor

PLACEHOLDER_AMI = "ami-00000000000000000"
SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's marker for a secret value on the wire
PLACEHOLDER_ACCOUNT = "123456789012"
OFFLINE_REGION = "us-east-1"
# The pulumi_aws services components/ create resources in, loaded file by file offline (gpuplan/slim_aws.py);
# a service missing here is only loaded whole, slower.
PROGRAM_SERVICES = ("ec2", "sagemaker", "iam", "fsx", "autoscaling", "appautoscaling", "ssm", "secretsmanager", "cloudwatch")


@dataclass
class Registered:
    type: str
    name: str
    inputs: dict
    outputs: dict
    urn: str = ""
    parent: str | None = None
    options: dict = field(default_factory=dict)
    dependencies: dict[str, list[str]] = field(default_factory=dict)  # property → URNs it was computed from
    secrets: set[str] = field(default_factory=set)  # top-level properties Pulumi keeps encrypted


@dataclass
class Recorder(pulumi.runtime.Mocks):
    """Answers every registration like a provider would (computed names and ARNs are unknown in preview)."""

    preview: bool = False
    resources: list[Registered] = field(default_factory=list)
    calls: list[tuple[str, dict]] = field(default_factory=list)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        outputs = dict(args.inputs)
        physical = f"{args.name}-1a2b3c"
        if not self.preview:
            if args.typ.startswith(("aws:sagemaker/", "aws:iam/", "aws:ec2/placementGroup")):
                outputs.setdefault("name", physical)
            if args.typ.startswith("aws:"):
                service = args.typ.split(":")[1].split("/")[0]
                outputs.setdefault("arn", f"arn:aws:{service}:{OFFLINE_REGION}:{PLACEHOLDER_ACCOUNT}:{physical}")
            if args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
                outputs["latestVersion"] = 1
            if args.typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
                outputs.setdefault("dnsName", f"fs-0123456789abcdef0.fsx.{OFFLINE_REGION}.amazonaws.com")
                outputs.setdefault("mountName", "abcdefgh")
        secrets = {k for k, v in args.inputs.items() if isinstance(v, dict) and SECRET_SIG in v}
        # policies see secret values in the clear (CrossGuard unwraps them), so the record does too
        inputs = {k: v["value"] if k in secrets else v for k, v in args.inputs.items()}
        self.resources.append(Registered(args.typ, args.name, inputs, outputs, secrets=secrets))
        return ("" if self.preview else f"{physical}-id"), outputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        self.calls.append((args.token, dict(args.args)))
        if args.token == "aws:ssm/getParameter:getParameter":
            return {"name": args.args["name"], "value": PLACEHOLDER_AMI, "insecureValue": PLACEHOLDER_AMI,
                    "type": "String", "id": args.args["name"]}
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": PLACEHOLDER_ACCOUNT, "arn": f"arn:aws:iam::{PLACEHOLDER_ACCOUNT}:user/offline",
                    "userId": "OFFLINE", "id": PLACEHOLDER_ACCOUNT}
        if args.token == "aws:secretsmanager/getSecretVersion:getSecretVersion":
            return {"arn": args.args["secretId"], "secretId": args.args["secretId"], "secretString": "offline-token",
                    "id": args.args["secretId"]}
        if args.token == "aws:ec2/getVpc:getVpc":  # EC2 serving admits the VPC's own CIDR by default
            return {"id": args.args.get("id", "vpc-offline"), "cidrBlock": "10.0.0.0/16"}
        if args.token == "aws:index/getRegion:getRegion":
            return {"name": OFFLINE_REGION, "region": OFFLINE_REGION, "id": OFFLINE_REGION}
        return {}

    def of_type(self, suffix: str) -> list[Registered]:
        return [r for r in self.resources if r.type.endswith(suffix)]


class _ParentMonitor(MockMonitor):
    """Keeps each registration's URN and parent URN, which the mock's resource args leave out."""

    def __init__(self, mocks: Recorder) -> None:
        super().__init__(mocks)
        self.lineage: dict[tuple[str, str], tuple[str, str]] = {}
        self.options: dict[tuple[str, str], dict] = {}
        self.dependencies: dict[tuple[str, str], dict[str, list[str]]] = {}

    def RegisterResource(self, request):  # noqa: N802 (the gRPC method name)
        self.lineage[(request.type, request.name)] = (self.make_urn(request.parent, request.type, request.name),
                                                      request.parent)
        self.options[(request.type, request.name)] = {
            "protect": request.protect, "retain_on_delete": request.retainOnDelete,
            "aliases": [a.spec.name for a in request.aliases if a.HasField("spec")] + list(request.aliasURNs),
            "ignore_changes": list(request.ignoreChanges)}
        self.dependencies[(request.type, request.name)] = {
            key: list(deps.urns) for key, deps in request.propertyDependencies.items() if deps.urns}
        return super().RegisterResource(request)


def synthesize(config: dict, preview: bool = False, project: str = "gpuplan") -> Recorder:
    """Run components.program.main() with `config` ({"ns:key": value}); values are handed over as the
    engine hands them, JSON strings for structured ones. pulumi.RunError carries a config problem."""
    from gpuplan.slim_aws import install

    install(PROGRAM_SERVICES)  # before the components first read pulumi_aws.<service>
    from components.program import main

    recorder = Recorder(preview=preview)
    monitor = _ParentMonitor(recorder)
    pulumi.runtime.set_mocks(recorder, project=project, stack="offline", preview=preview, monitor=monitor)
    pulumi.runtime.set_all_config({k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()})
    pulumi.runtime.test(main)()
    for r in recorder.resources:
        r.urn, r.parent = monitor.lineage.get((r.type, r.name), ("", None))
        r.parent = r.parent or None
        r.options = monitor.options.get((r.type, r.name), {})
        r.dependencies = monitor.dependencies.get((r.type, r.name), {})
    return recorder
