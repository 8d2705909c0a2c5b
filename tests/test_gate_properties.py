"""Issue 24: random mutations of the planned stack's resources (instance types, counts, tags, the
container's environment, IAM policies and trust, security-group rules, metadata and volumes, the
training network) never crash the pack, and every mutation that breaks memory fit, the training
network or the secure defaults is a mandatory violation of the rule that guards it."""

from __future__ import annotations

import copy
import ipaddress
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.workload.presets import preset_sizing_model_id
from policies.resources import Resource
from policies.rules import evaluate
from tests.test_policies import named, stack
from tests.test_policy_properties import TYPES, requirement_from_facts

BASE = stack()
SG_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
ROLE_POLICIES = ["chat-70b-role-policy", "chat-8b-role-policy", "pretrain-70b-discovery"]
ROLES = ["chat-70b-role", "chat-8b-role", "pretrain-70b-role"]
BROAD = [("iam:PassRole", "arn:aws:iam::*:role/*"), ("iam:PutRolePolicy", "*"), ("sts:AssumeRole", "arn:aws:iam::*:role/x"),
         ("s3:Get*", "arn:aws:s3:::*/*"), ("*", "arn:aws:s3:::b/p/*"), ("ec2:*", "*"),
         ("iam:CreateAccessKey", "arn:aws:iam::123456789012:user/*")]
NARROW = [("s3:GetObject", "arn:aws:s3:::models/llama/*"), ("ec2:DescribeInstances", "*")]
CIDRS = ["10.1.0.0/16", "192.168.0.0/24", "8.8.0.0/16", "9.9.0.0/16", "1.2.3.0/24", "100.0.0.0/8", "0.0.0.0/0",
         "2001:db8::/32", "2600:1f00::/24", "fd00::/8"]
MODEL_IDS = ["meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-405B-Instruct-FP8",
             "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-405B-Instruct ",
             "someone/unnamed-model", "TheBloke/Llama-2-70B-Chat-GPTQ", ""]
NO_EFA_TYPES = ["g6e.xlarge", "g5.xlarge", "g6.xlarge"]
MUTATIONS = st.one_of(
    st.tuples(st.just("grant"), st.sampled_from(ROLE_POLICIES), st.sampled_from(BROAD + NARROW)),
    st.tuples(st.just("trust"), st.sampled_from(ROLES), st.sampled_from(["*", {"AWS": "*"}, {"AWS": ["*"]}])),
    st.tuples(st.just("ingress"), st.booleans(), st.lists(st.sampled_from(CIDRS), min_size=1, max_size=4)),
    st.tuples(st.just("imds"), st.sampled_from(["optional", "required"]), st.sampled_from([1.0, 2.0, 5.0])),
    st.tuples(st.just("unencrypted"), st.sampled_from(["false", False, None]), st.none()),
    st.tuples(st.just("no-efa"), st.integers(min_value=0, max_value=31), st.none()),
    st.tuples(st.just("no-placement"), st.none(), st.none()),
    st.tuples(st.just("training-type"), st.sampled_from(NO_EFA_TYPES), st.none()),
    st.tuples(st.just("nodes"), st.sampled_from(["desiredCapacity", "minSize", "maxSize"]),
              st.sampled_from([0.0, 1.0, 2.0, 64.0, -1.0, float("nan"), "x"])),
    st.tuples(st.just("endpoint"), st.sampled_from(["chat-70b", "chat-8b"]),
              st.tuples(st.sampled_from(TYPES), st.sampled_from([1.0, 2.0, 0.0, -1.0]))),
    st.tuples(st.just("model-id"), st.sampled_from(["chat-70b", "chat-8b"]), st.sampled_from(MODEL_IDS)),
    st.tuples(st.just("tag"), st.sampled_from(["chat-70b-config", "pretrain-70b-lt", "pretrain-70b-nodes"]),
              st.tuples(st.sampled_from(["gpuplan:environment", "gpuplan:layout", "gpuplan:model", "gpuplan:workload"]),
                        st.one_of(st.none(), st.text(max_size=20), st.sampled_from(["production", "tp=64"])))),
)


def _public_addresses(cidrs: list[str]) -> dict[int, int]:
    nets = [ipaddress.ip_network(c) for c in cidrs]
    return {v: sum(n.num_addresses for n in ipaddress.collapse_addresses(x for x in nets if x.version == v
                                                                           and not x.is_private)) for v in (4, 6)}


def _apply(resources: list[Resource], mutation) -> set[str]:
    """Apply one mutation; the policies of which one must block it (empty: it need not block)."""
    kind, a, b = mutation
    by_name = {r.name: r for r in resources}
    if kind == "grant":
        doc = json.loads(by_name[a].props["policy"])
        doc["Statement"].append({"Effect": "Allow", "Action": b[0], "Resource": b[1]})
        by_name[a].props["policy"] = json.dumps(doc)
        return {"secure-defaults"} if b in BROAD else set()
    if kind == "trust":
        doc = json.loads(by_name[a].props["assumeRolePolicy"])
        doc["Statement"].append({"Effect": "Allow", "Principal": b, "Action": "sts:AssumeRole"})
        by_name[a].props["assumeRolePolicy"] = json.dumps(doc)
        return {"secure-defaults"}
    if kind == "ingress":
        group = by_name["pretrain-70b-sg"]
        before = [c for rule in group.props.get("ingress") or [] for c in rule.get("cidrBlocks") or []]
        if a:  # inline
            group.props.setdefault("ingress", []).append({"protocol": "tcp", "fromPort": 22.0, "toPort": 22.0,
                                                          "cidrBlocks": [c for c in b if ":" not in c],
                                                          "ipv6CidrBlocks": [c for c in b if ":" in c]})
        else:
            for i, cidr in enumerate(b):
                resources.append(Resource(SG_RULE, f"extra-{len(resources)}-{i}", {
                    "type": "ingress", "securityGroupId": "sg-x", "protocol": "tcp", "fromPort": 22.0, "toPort": 22.0,
                    **({"ipv6CidrBlocks": [cidr]} if ":" in cidr else {"cidrBlocks": [cidr]})},
                    urn=f"urn:extra:{len(resources)}:{i}", dependencies={"securityGroupId": [group.urn]}))
        reach = _public_addresses(before + b)
        return {"secure-defaults", "ingress-from-internet"} if reach[4] > 2 ** 16 or reach[6] > 2 ** 80 else set()
    template = by_name["pretrain-70b-lt"]
    if kind == "imds":
        template.props["metadataOptions"] = {"httpTokens": a, "httpPutResponseHopLimit": b}
        return {"secure-defaults"} if a != "required" or b > 1 else set()
    if kind == "unencrypted":
        template.props["blockDeviceMappings"][0]["ebs"]["encrypted"] = a
        return {"secure-defaults"}
    if kind == "no-efa":
        interfaces = template.props["networkInterfaces"]
        interfaces[a % len(interfaces)]["interfaceType"] = "interface"
        return {"multi-node-training-network"}
    if kind == "no-placement":
        by_name["pretrain-70b-nodes"].props.pop("placementGroup", None)
        by_name["pretrain-70b-nodes"].dependencies.pop("placementGroup", None)
        template.props.pop("placement", None)
        return {"multi-node-training-network"}
    if kind == "training-type":
        template.props["instanceType"] = a
        return {"multi-node-training-network"}
    if kind == "nodes":
        by_name["pretrain-70b-nodes"].props[a] = b
        return set()
    if kind == "endpoint":
        variant = by_name[f"{a}-config"].props["productionVariants"][0]
        variant["instanceType"], variant["initialInstanceCount"] = b
        return set()  # the memory oracle below judges the final state
    if kind == "model-id":
        by_name[f"{a}-model"].props["primaryContainer"]["environment"]["HF_MODEL_ID"] = b
        return set()
    name, (key, value) = a, b
    tags = by_name[name].props["tags"]
    if isinstance(tags, list):  # Auto Scaling: [{key, value, propagateAtLaunch}]
        tags[:] = [t for t in tags if t.get("key") != key] + ([] if value is None else [
            {"key": key, "value": value, "propagateAtLaunch": True}])
    elif value is None:
        tags.pop(key, None)
    else:
        tags[key] = value
    return set()


def _memory_oracle(resources: list[Resource]) -> dict[str, bool]:
    """Endpoint config → whether its container's facts alone say it cannot fit (or cannot be sized)."""
    verdicts = {}
    for name in ("chat-70b", "chat-8b"):
        env = named(resources, f"{name}-model").props["primaryContainer"]["environment"]
        instance_type = named(resources, f"{name}-config").props["productionVariants"][0]["instanceType"]
        model_id = env.get("HF_MODEL_ID")
        if model_id and preset_sizing_model_id(model_id) is None:
            verdicts[f"{name}-config"] = True  # "unknown model id" must block
            continue
        if not model_id:
            continue
        facts = requirement_from_facts(env, instance_type)
        verdicts[f"{name}-config"] = facts is None or facts[0] > facts[1]
    return verdicts


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations=st.lists(MUTATIONS, min_size=1, max_size=3, unique_by=lambda m: m[0]))  # one edit per property
def test_mutations_never_crash_and_every_breaking_one_blocks(mutations):
    resources = [Resource(r.type, r.name, copy.deepcopy(r.props), r.urn, r.parent, copy.deepcopy(r.dependencies))
                 for r in BASE]
    expected = set().union(*(_apply(resources, m) for m in mutations))

    violations = evaluate(resources)  # never raises

    mandatory = {(v.policy, v.resource) for v in violations if v.level == "mandatory"}
    policies = {p for p, _ in mandatory}
    for policy in expected - {"ingress-from-internet", "secure-defaults"}:
        assert policy in policies, (mutations, sorted(mandatory))
    if "ingress-from-internet" in expected:  # one group over the limit, inline or with its standalone rules
        assert {"ingress-from-internet", "secure-defaults"} & policies, (mutations, sorted(mandatory))
    elif "secure-defaults" in expected:
        assert "secure-defaults" in policies, (mutations, sorted(mandatory))
    for config, breaks in _memory_oracle(resources).items():
        if breaks:
            assert any(r == config and p in ("accelerator-memory-fits", "instance-family-allowed")
                       for p, r in mandatory), (mutations, config, sorted(mandatory))
