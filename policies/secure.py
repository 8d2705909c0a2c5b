"""secure-defaults: IMDSv2 with hop limit 1, encrypted volumes, no public addresses on accelerator
nodes, no ingress from the internet, no broad IAM grants. The rules reason about what a value
covers (the union of CIDR blocks, an IAM action pattern against the resources it applies to), not
about the strings one usually writes for it, so 0.0.0.0/1 + 128.0.0.0/1 and s3:Get* on * count."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping

from policies.fit import Finding
from policies.ingress import ingress_cidrs, public_reach, too_wide
from policies.resources import (ATTACHMENTS, EBS_VOLUME, IAM_POLICY, INSTANCE, LAUNCH_CONFIGURATION,
                                LAUNCH_TEMPLATE, NATIVE_LAUNCH_TEMPLATE, ROLE, ROLE_POLICY,
                                SPOT_REQUEST, GROUP_POLICY, USER_POLICY, Resource,
                                instance_slots, is_accelerated, tags_of)

# AWS managed policies that grant whole services or everything (IAM User Guide, "AWS managed
# policies for job functions" and each service's FullAccess policy).
BROAD_MANAGED_POLICIES = {"AdministratorAccess", "PowerUserAccess", "IAMFullAccess", "AmazonEC2FullAccess",
                          "AmazonS3FullAccess", "AmazonSageMakerFullAccess", "AWSLambda_FullAccess",
                          "SecretsManagerReadWrite"}
# Actions that escalate privilege when granted on every resource (hand any role to a service, mint
# keys, rewrite policies, assume any role).
ESCALATING_ACTIONS = {"iam:passrole", "iam:createaccesskey", "iam:createpolicyversion", "iam:setdefaultpolicyversion",
                      "iam:attachrolepolicy", "iam:attachuserpolicy", "iam:attachgrouppolicy", "iam:putrolepolicy",
                      "iam:putuserpolicy", "iam:putgrouppolicy", "iam:updateassumerolepolicy", "iam:createrole",
                      "iam:createuser", "iam:createloginprofile", "iam:updateloginprofile", "sts:assumerole"}
INSTANCE_KINDS = (LAUNCH_TEMPLATE, NATIVE_LAUNCH_TEMPLATE, INSTANCE, SPOT_REQUEST, LAUNCH_CONFIGURATION)


def _true(value) -> bool:
    return str(value).lower() == "true"


def _ingress(resource: Resource) -> Iterable[str]:
    cidrs = ingress_cidrs(resource)
    if not cidrs:
        return
    networks, bad = public_reach(cidrs)
    problem = too_wide(networks)
    if problem:
        yield f"{problem}; accelerator clusters accept traffic only from themselves or named private ranges"
    if bad:
        yield f"ingress CIDR {bad[0]!r} is not a CIDR block, so what it opens cannot be checked"


def _statements(document) -> list[Mapping] | str:
    try:
        doc = json.loads(document) if isinstance(document, str) else document
    except ValueError:
        return "the policy document is not valid JSON, so what it grants cannot be checked"
    if not isinstance(doc, Mapping):
        return "the policy document is not a JSON object"
    statements = doc.get("Statement", [])
    statements = statements if isinstance(statements, list) else [statements]
    return [s for s in statements if isinstance(s, Mapping)]


def _as_list(value) -> list[str]:
    return [str(v) for v in (value if isinstance(value, list) else [value])] if value is not None else []


def _wild(text: str) -> bool:
    return text.strip("/") in ("", "*") or text.startswith(("*", "?"))


def _all_resources(pattern: str) -> bool:
    """Whether a Resource pattern covers every resource of its kind: `*`, a wildcard account
    (arn:aws:iam::*:role/x is that role name in every account), or a name that starts with a wildcard
    (role/*, an S3 bucket of `*`)."""
    if pattern.strip() in ("*", ""):
        return True
    parts = pattern.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        return False
    account, resource = parts[4], parts[5]
    if "*" in account or "?" in account:
        return True
    if parts[2] == "s3":
        return _wild(resource.split("/", 1)[0])
    # resource-type/name or resource-type:name (role/NAME, log-group:NAME); a bare name otherwise
    for separator in ("/", ":"):
        kind, found, name = resource.partition(separator)
        if found and kind and not any(c in kind for c in "*?"):
            return _wild(name)
    return _wild(resource)


def policy_grants(document) -> list[str]:
    """What in a policy document grants more than the resources it names."""
    statements = _statements(document)
    if isinstance(statements, str):
        return [statements]
    problems = []
    for s in statements:
        if s.get("Effect") != "Allow":
            continue
        if "NotAction" in s:
            problems.append(f"NotAction {_as_list(s['NotAction'])[:3]} allows every other action")
        if "NotResource" in s:
            problems.append(f"NotResource {_as_list(s['NotResource'])[:3]} applies to every other resource")
        resources = _as_list(s.get("Resource"))
        everywhere = any(_all_resources(r) for r in resources)
        for action in _as_list(s.get("Action")):
            lowered = action.lower()
            service_wide = lowered == "*" or lowered.endswith(":*")
            wildcard = "*" in lowered or "?" in lowered
            if service_wide or (wildcard and everywhere):
                problems.append(f"{action} on {', '.join(resources) or 'its resources'}")
            elif everywhere and (lowered in ESCALATING_ACTIONS or any(fnmatch.fnmatchcase(e, lowered)
                                                                       for e in ESCALATING_ACTIONS)):
                problems.append(f"{action} on {', '.join(resources)} (privilege escalation: name the resources)")
    return problems


def _trust(document) -> Iterable[str]:
    """A trust policy that lets any principal (Principal "*" or AWS "*") assume the role hands its
    permissions to every AWS account."""
    statements = _statements(document)
    if isinstance(statements, str):
        yield f"trust policy: {statements}"
        return
    for s in statements:
        principal = s.get("Principal")
        values = [principal] if isinstance(principal, str) else \
            _as_list(principal.get("AWS")) if isinstance(principal, Mapping) else []
        if s.get("Effect") == "Allow" and "*" in values:
            yield ("trust policy lets any principal assume the role (Principal \"*\"); name the service or "
                   "accounts that may")


def _iam(resource: Resource) -> Iterable[str]:
    p = resource.props
    documents = []
    if resource.type in (ROLE_POLICY, IAM_POLICY, USER_POLICY, GROUP_POLICY):
        documents.append(p.get("policy") or "{}")
    if resource.type == ROLE:
        documents += [i.get("policy") for i in p.get("inlinePolicies") or [] if isinstance(i, Mapping) and i.get("policy")]
        arns = list(p.get("managedPolicyArns") or [])
    else:
        arns = [p.get("policyArn")] if resource.type in ATTACHMENTS and p.get("policyArn") else []
    if resource.type == ROLE and p.get("assumeRolePolicy"):
        yield from _trust(p.get("assumeRolePolicy"))
    for document in documents:
        for problem in policy_grants(document):
            yield f"IAM grant {problem}; grant the actions the role uses on the resources it uses"
    for arn in arns:
        name = str(arn).rsplit("/", 1)[-1]
        if str(arn).startswith("arn:aws") and ":aws:policy/" in str(arn) and name in BROAD_MANAGED_POLICIES:
            yield f"attaches the AWS managed policy {name}, which grants whole services; write a least-privilege policy"


def _volumes(resource: Resource) -> Iterable[str]:
    p = resource.props
    if resource.type == EBS_VOLUME:
        if not _true(p.get("encrypted")):
            yield "EBS volume is not encrypted"
        return
    if resource.type in (LAUNCH_TEMPLATE, NATIVE_LAUNCH_TEMPLATE):
        data = p.get("launchTemplateData") if resource.type == NATIVE_LAUNCH_TEMPLATE else p
        mappings = [m for m in (data or {}).get("blockDeviceMappings") or [] if isinstance(m, Mapping)]
        if not mappings:
            yield ("launch template declares no block devices, so the root volume takes the AMI snapshot's "
                   "settings (unencrypted unless the account encrypts by default); declare it with encrypted = true")
        for m in mappings:
            if not m.get("virtualName") and not _true((m.get("ebs") or {}).get("encrypted")):
                yield f"volume {m.get('deviceName')} is not encrypted"
        return
    if resource.type in (INSTANCE, SPOT_REQUEST, LAUNCH_CONFIGURATION):
        if not _true((p.get("rootBlockDevice") or {}).get("encrypted")):
            yield "root volume is not encrypted"
        for device in p.get("ebsBlockDevices") or []:
            if isinstance(device, Mapping) and not _true(device.get("encrypted")):
                yield f"EBS volume {device.get('deviceName')} is not encrypted"


def _instance(resource: Resource) -> Iterable[str]:
    p = resource.props
    data = (p.get("launchTemplateData") or {}) if resource.type == NATIVE_LAUNCH_TEMPLATE else p
    metadata = data.get("metadataOptions") or {}
    if metadata.get("httpTokens") != "required":
        yield "IMDSv2 is not required (set metadataOptions.httpTokens = required)"
    hops = metadata.get("httpPutResponseHopLimit")
    if isinstance(hops, (int, float)) and hops > 1:
        yield (f"IMDS hop limit {hops:g}: containers on the node can reach the instance role's credentials; "
               "keep it at 1")
    accelerated = any(is_accelerated(s.instance_type) for s in instance_slots(resource)) or \
        "gpuplan:workload" in tags_of(resource)
    public = _true(data.get("associatePublicIpAddress")) or any(
        _true(n.get("associatePublicIpAddress")) for n in data.get("networkInterfaces") or [] if isinstance(n, Mapping))
    if accelerated and public:
        yield "accelerator nodes get public IP addresses; keep them private (reach them through SSM or a bastion)"


def secure_defaults(resource: Resource, config: dict, catalog) -> Iterable[Finding]:
    workload = tags_of(resource).get("gpuplan:workload")
    checks = [_ingress, _iam, _volumes] + ([_instance] if resource.type in INSTANCE_KINDS else [])
    for check in checks:
        for message in check(resource):
            yield Finding(f"{resource.name}: {message}", workload)
