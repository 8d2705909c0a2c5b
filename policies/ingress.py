"""Ingress from the internet, judged by the addresses it opens. A group's reach is the union of its
inline rules and every standalone rule (aws:ec2 SecurityGroupRule, aws:vpc SecurityGroupIngressRule)
that targets it, counted in addresses with the ipaddress module: two non-adjacent public /16s
collapse into no wider block than a /16, but together they open twice as much.

Threshold: at most 65,536 public IPv4 addresses (one /16, a typical single organisation's allocation)
or 2^80 IPv6 addresses (one /48, one site: RFC 6177) per group; private space is not counted."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

from policies.fit import Finding
from policies.resources import SECURITY_GROUP, SG_INGRESS_RULE, SG_RULE, UNKNOWN_SENTINELS, Resource

DEFAULT_SECURITY_GROUP = "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup"
GROUPS = (SECURITY_GROUP, DEFAULT_SECURITY_GROUP)
MAX_PUBLIC_ADDRESSES = {4: 2 ** 16, 6: 2 ** 80}
LIMIT_TEXT = "more than a /16 of public IPv4 (65,536 addresses) or a /48 of IPv6"


def ingress_cidrs(resource: Resource) -> list[str]:
    """The CIDR blocks one resource admits traffic from (inline rules of a group, or one standalone rule)."""
    p = resource.props
    if resource.type in GROUPS:
        return [str(c) for rule in p.get("ingress") or [] if isinstance(rule, Mapping)
                for c in [*(rule.get("cidrBlocks") or []), *(rule.get("ipv6CidrBlocks") or [])]]
    if resource.type == SG_INGRESS_RULE or (resource.type == SG_RULE and p.get("type") == "ingress"):
        return [str(c) for c in [*(p.get("cidrBlocks") or []), *(p.get("ipv6CidrBlocks") or []),
                                 *(c for c in (p.get("cidrIpv4"), p.get("cidrIpv6")) if c)]]
    return []


def public_reach(cidrs: Iterable[str]) -> tuple[dict[int, list], list[str]]:
    """(public networks per IP version, collapsed; entries that are not CIDR blocks)."""
    networks: dict[int, list] = {4: [], 6: []}
    bad = []
    for cidr in cidrs:
        if cidr in UNKNOWN_SENTINELS:
            continue  # gating-values-known reports values unknown at preview
        try:
            net = ipaddress.ip_network(cidr.strip(), strict=False)
        except ValueError:
            bad.append(cidr[:60])
            continue
        if not net.is_private:
            networks[net.version].append(net)
    return {v: list(ipaddress.collapse_addresses(nets)) for v, nets in networks.items()}, bad


def too_wide(networks: dict[int, list]) -> str | None:
    """What the public networks open, when it is over the threshold."""
    for version, nets in networks.items():
        total = sum(n.num_addresses for n in nets)
        if total > MAX_PUBLIC_ADDRESSES[version]:
            shown = ", ".join(str(n) for n in nets[:3]) + (f" and {len(nets) - 3} more" if len(nets) > 3 else "")
            return f"ingress from {shown} opens {total:,} public IPv{version} addresses ({LIMIT_TEXT})"
    return None


def _target(rule: Resource, groups: dict[str, Resource]) -> str:
    """The group a standalone rule targets: by the engine's record of where securityGroupId came from,
    else by the id as written (rules naming the same id are one group)."""
    for urn in rule.dependencies.get("securityGroupId", []):
        if urn in groups:
            return urn
    return f"id:{rule.props.get('securityGroupId')}"


def ingress_union(resources: list[Resource], config: dict, catalog) -> Iterable[Finding]:
    """Each group's inline and standalone rules together; a single resource over the threshold on its
    own is secure-defaults' to report."""
    groups = {r.urn or r.name: r for r in resources if r.type in GROUPS}
    members: dict[str, list[Resource]] = {key: [group] for key, group in groups.items()}
    for rule in resources:
        if rule.type in (SG_RULE, SG_INGRESS_RULE) and ingress_cidrs(rule):
            members.setdefault(_target(rule, groups), []).append(rule)
    for key, parts in members.items():
        if len(parts) < 2 or any(too_wide(public_reach(ingress_cidrs(p))[0]) for p in parts):
            continue
        problem = too_wide(public_reach([c for p in parts for c in ingress_cidrs(p)])[0])
        if problem:
            name = groups[key].name if key in groups else f"security group {key.removeprefix('id:')}"
            yield Finding(f"{name}: ingress from its inline and standalone rules together opens "
                          f"{problem.split(' opens ', 1)[1]}; accelerator clusters accept traffic only from "
                          "themselves or named private ranges", None, parts[0].name)
