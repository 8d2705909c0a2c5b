"""multi-node-training-network: a training cluster of more than one node needs an EFA-capable type,
EFA on every network card, and its nodes inside a cluster placement group. The node count is what
the Auto Scaling group starts, not what a tag claims."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from planner.hardware.catalog import Catalog
from planner.report.tags import TagError, read_tags
from policies.facts import templates_of
from policies.fit import Finding
from policies.resources import ASG, LAUNCH_TEMPLATE, PLACEMENT_GROUP, UNKNOWN_SENTINELS, Resource, group_size, tags_of


def _training(resource: Resource) -> str | None:
    """The workload a training resource's tags name, or None (inference, untagged, malformed: the
    memory rule reports malformed tags)."""
    try:
        tagged = read_tags(tags_of(resource))
    except TagError:
        return tags_of(resource).get("gpuplan:workload")
    return tagged.workload if tagged is not None and tagged.kind != "inference" else None


def _in_cluster_group(resource: Resource, prop: str, value, groups: list[Resource]) -> bool:
    """Whether `value` (a placement group name, possibly unknown at preview) names a cluster placement
    group: by the engine's record of which resource the value came from, else by name (an auto-named
    group's physical name is its logical name plus a suffix), else, unknown, a group beside it."""
    cluster = [g for g in groups if g.props.get("strategy") == "cluster"]
    if not value:
        return False
    urns = set(resource.dependencies.get(prop, []))
    if urns:
        return any(g.urn in urns for g in cluster)
    if value in UNKNOWN_SENTINELS:
        return any(g.parent == resource.parent for g in cluster)
    return any(value == g.props.get("name") or (not g.props.get("name") and str(value).startswith(g.name + "-"))
               for g in cluster)


def multi_node_training_network(resources: list[Resource], config: dict, catalog: Catalog) -> Iterable[Finding]:
    groups = [r for r in resources if r.type == PLACEMENT_GROUP]
    templated: set[str] = set()
    for group in (r for r in resources if r.type == ASG):
        templates = templates_of(group, resources)
        workload = _training(group) or next((w for t in templates if (w := _training(t))), None)
        nodes = group_size(group) or 0
        if workload is None or nodes <= 1:
            continue
        templated.update(t.name for t in templates)
        placement = group.props.get("placementGroup") or next(
            ((t.props.get("placement") or {}).get("groupName") for t in templates
             if isinstance(t.props.get("placement"), Mapping)), None)
        prop = "placementGroup" if group.props.get("placementGroup") else "placement"
        holder = group if prop == "placementGroup" else (templates[0] if templates else group)
        if not _in_cluster_group(holder, prop, placement, groups):
            yield Finding(f"{group.name}: {nodes} training nodes outside a cluster placement group (placementGroup "
                          f"{placement or 'unset'}); EFA collectives need the nodes on one network spine",
                          workload, group.name)
        for template in templates:
            yield from _efa(template, nodes, workload, catalog)
    for template in (r for r in resources if r.type == LAUNCH_TEMPLATE and r.name not in templated):
        try:
            tagged = read_tags(tags_of(template))
        except TagError:
            continue  # accelerator-memory-fits names the malformed tag
        if tagged is None or tagged.kind == "inference" or tagged.int_of("nodes") <= 1:
            continue
        workload = tagged.workload
        yield from _efa(template, tagged.int_of("nodes"), workload, catalog)
        placement = (template.props.get("placement") or {}).get("groupName")
        if not _in_cluster_group(template, "placement", placement, groups):
            yield Finding(f"{template.name}: {tagged.int_of('nodes')} nodes without a cluster placement group",
                          workload, template.name)


def _efa(template: Resource, nodes: int, workload: str, catalog: Catalog) -> Iterable[Finding]:
    itype = catalog.instance(str(template.props.get("instanceType") or ""))
    if itype is not None and not itype.efa:
        yield Finding(f"{itype.name} has no EFA, and {nodes} nodes train over the network", workload, template.name)
    interfaces = [n for n in template.props.get("networkInterfaces") or [] if isinstance(n, Mapping)]
    efa = [n for n in interfaces if n.get("interfaceType") in ("efa", "efa-only")]
    if not efa:
        yield Finding(f"{template.name}: {nodes} nodes but the launch template has no EFA interface", workload,
                      template.name)
    elif itype is not None and len(efa) < itype.network_cards:
        yield Finding(f"{template.name}: {len(efa)} EFA interface(s) for {itype.network_cards} network cards uses "
                      f"{len(efa) / itype.network_cards:.0%} of {itype.name}'s EFA bandwidth", workload, template.name)
