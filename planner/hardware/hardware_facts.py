"""What an overlay may not change. Overlays come from the pull request that is being gated, so they
may add instance types, accelerators and prices, but a bundled part's physical facts (memory,
bandwidth, FLOP/s, devices per node, network) are the datasheet's, not the requester's: an A10G
re-declared with 10 TB of memory would make the memory rule pass a 70B model on one g5.xlarge."""

from __future__ import annotations

from planner.hardware.catalog import Catalog

ACCELERATOR_FACTS = ("vendor", "memory_mib", "memory_bandwidth_gb_s", "tflops", "intra_node_gb_s", "intra_node_link",
                     "memory_technology", "compute_capability", "neuron_generation", "neuron_cores", "supports")
INSTANCE_FACTS = ("family", "accelerator", "accelerators_per_node", "vcpus", "memory_gib", "inter_node_gbps", "efa",
                  "network_cards")


def _flat(prefix: str, value) -> dict[str, object]:
    """Nested facts (tflops, supports) as dotted leaves, a missing precision read as None."""
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    if isinstance(value, dict):
        return {f"{prefix}.{k}": v for k, v in value.items()}
    return {prefix: value}


def _shown(value) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else repr(value)


def _changes(name: str, ours, theirs, fields: tuple[str, ...]) -> list[str]:
    changes = []
    for field in fields:
        bundled, overlay = _flat(field, getattr(theirs, field)), _flat(field, getattr(ours, field))
        for key in sorted(set(bundled) | set(overlay)):
            if bundled.get(key) != overlay.get(key):
                changes.append(f"{name}.{key}: bundled {_shown(bundled.get(key))}, overlay {_shown(overlay.get(key))}")
    return changes


def hardware_redefinitions(catalog: Catalog, base: Catalog) -> list[str]:
    """Every physical fact of a part of `base` that `catalog` states differently, as
    "A10G.memory_mib: bundled 22888, overlay 10000000"."""
    found = []
    for accel in catalog.accelerators:
        original = next((a for a in base.accelerators if a.name == accel.name), None)
        if original is not None and accel is not original:
            found += _changes(accel.name, accel, original, ACCELERATOR_FACTS)
    for itype in catalog.instance_types:
        original = base.instance(itype.name)
        if original is not None and itype is not original:
            found += _changes(itype.name, itype, original, INSTANCE_FACTS)
    return found
