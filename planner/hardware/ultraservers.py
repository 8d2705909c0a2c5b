"""UltraServers as EC2 launches them. The catalog plans an UltraServer as one node (one NVLink or
NeuronLink domain), but it is not a launchable instance type: it is a group of member instances
started into one Capacity Block for ML. Deployment (components/) and the policy pack (policies/) map
between the two here, so both read one table."""

from __future__ import annotations

from planner.hardware.catalog import InstanceType

# UltraServer → (member instance type, members per UltraServer). Sources: AWS EC2 P6e-GB200 UltraServers
# page (u-p6e-gb200x36 = 9 × p6e-gb200.36xlarge, u-p6e-gb200x72 = 18; 4 GB200 per member) and the EC2 Trn2
# page (u-trn2x64 = 4 × trn2u.48xlarge, 16 Trainium2 each); both read 2026-01-21, as the catalog rows cite.
MEMBERS: dict[str, tuple[str, int]] = {
    "u-p6e-gb200x36": ("p6e-gb200.36xlarge", 9),
    "u-p6e-gb200x72": ("p6e-gb200.36xlarge", 18),
    "u-trn2x64": ("trn2u.48xlarge", 4),
}


def launch_type(name: str) -> tuple[str, int]:
    """(the type EC2 launches, instances per planned node): an UltraServer's members, else the type itself."""
    return MEMBERS.get(name, (name, 1))


def planned_type(launched: str) -> str:
    """A launched member type read back as an UltraServer the catalog sizes (its devices are the same
    whichever UltraServer it belongs to); any other type as it is."""
    return next((name for name, (member, _) in MEMBERS.items() if member == launched), launched)


def member_instance(itype: InstanceType) -> InstanceType:
    """The instance EC2 launches for one member of `itype`: the member type with its share of the
    UltraServer's network cards (u-p6e-gb200x72: 72 EFA cards over 18 members, 4 each); any other type as it is."""
    member, members = launch_type(itype.name)
    if members == 1:
        return itype
    return itype.model_copy(update={"name": member, "network_cards": itype.network_cards // members})
