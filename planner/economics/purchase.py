"""Purchase options for a plan: on-demand, spot, Savings Plans / Reserved Instances and Capacity
Blocks for ML. A training run on spot pays for its interruptions (lost work, restarts, checkpoints);
a Capacity Block is bought in whole days; commitments are priced for the hours they cover."""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.hardware.units import HOURS_PER_MONTH

# Spot Instance Advisor publishes the share of a type's spot instances reclaimed in the trailing month
# as a band; the planner takes the band's upper edge so it never flatters spot. AWS publishes no edge
# above 20%: 25% is assumed there (set constraints.spot_interruptions_per_month for your own figure).
BAND_INTERRUPTIONS_PER_MONTH = {"<5%": 0.05, "5-10%": 0.10, "10-15%": 0.15, "15-20%": 0.20, ">20%": 0.25}
# Without a band in the catalog: AWS's own figure, 95% of spot instances are not interrupted in a month
# (EC2 Spot best practices; Spot Instance Advisor's "<5%" band being the most common).
DEFAULT_INTERRUPTIONS_PER_MONTH = 0.05

# Capacity Blocks for ML (EC2 User Guide, "How Capacity Blocks work"): 1 to 14 days in 1-day steps,
# then 7-day steps up to 182 days; up to 64 instances per block; paid up front for the whole block.
CAPACITY_BLOCK_MAX_DAYS = 182
CAPACITY_BLOCK_MAX_INSTANCES = 64

COMMITMENT_YEARS = {"reserved-1y": 1, "reserved-3y": 3, "savings-plan-1y": 1, "savings-plan-3y": 3}


def interruptions_per_month(band: str | None, override: float | None) -> tuple[float, str]:
    """(share of instances interrupted per month, where that figure comes from)."""
    if override is not None:
        return override, "constraints.spot_interruptions_per_month"
    if band in BAND_INTERRUPTIONS_PER_MONTH:
        return BAND_INTERRUPTIONS_PER_MONTH[band], f"Spot Instance Advisor band {band} (upper edge)"
    return DEFAULT_INTERRUPTIONS_PER_MONTH, "no band in the catalog: AWS's 5% a month"


@dataclass(frozen=True)
class SpotRun:
    wall_s: float  # expected time to finish, interruptions included
    checkpoint_interval_s: float  # Young/Daly optimum
    expected_interruptions: float
    lost_fraction: float  # share of wall time not spent training


def spot_run(train_s: float, nodes: int, per_month: float, checkpoint_write_s: float,
             restart_s: float) -> SpotRun | None:
    """Expected wall time of a run on spot. The job stops when any of its nodes is reclaimed, so the
    cluster's interruption rate is nodes × the per-instance rate. Checkpoints every τ = √(2·C·M)
    (Young 1974, Daly 2006: C the checkpoint write time, M the mean time between interruptions); each
    interval loses C to the write, each interruption loses half an interval of work and the restart
    (relaunch plus reading the checkpoint back). None when interruptions outpace progress."""
    rate_per_s = nodes * per_month / (HOURS_PER_MONTH * 3600)
    if rate_per_s <= 0:
        return SpotRun(train_s, math.inf, 0.0, 0.0)
    mtbi_s = 1 / rate_per_s
    write_s = max(checkpoint_write_s, 1.0)
    tau = math.sqrt(2 * write_s * mtbi_s)
    lost = write_s / (tau + write_s) + (tau / 2 + restart_s) / mtbi_s
    if lost >= 0.9:  # below a tenth of the time training, the run does not converge on a finish time
        return None
    wall = train_s / (1 - lost)
    return SpotRun(wall, tau, wall * rate_per_s, lost)


def capacity_block_days(train_s: float) -> int | None:
    """The shortest block that covers the run: whole days to 14, then whole weeks; None past 182 days."""
    days = max(1, math.ceil(train_s / 86400))
    if days > 14:
        days = math.ceil(days / 7) * 7
    return days if days <= CAPACITY_BLOCK_MAX_DAYS else None


@dataclass(frozen=True)
class RunQuote:
    """One way to buy a training run on a given layout."""
    purchase: str
    usd_per_instance_hour: float
    nodes: int
    wall_s: float  # time to finish under this option
    usd_per_run: float
    note: str


def training_quote(purchase: str, usd_per_instance_hour: float, nodes: int, train_s: float, *,
                   interruptions: tuple[float, str], checkpoint_write_s: float, restart_s: float) -> RunQuote | str:
    """A run's cost and duration under one purchase option, or why the option cannot buy it."""
    if purchase == "spot":
        per_month, origin = interruptions
        run = spot_run(train_s, nodes, per_month, checkpoint_write_s, restart_s)
        if run is None:
            return (f"spot: at {per_month:.0%} interruptions a month per instance ({origin}), {nodes} nodes are "
                    f"interrupted faster than they can checkpoint and progress")
        note = (f"{run.expected_interruptions:.1f} expected interruptions ({per_month:.0%}/month per instance, "
                f"{origin}); checkpoint every {run.checkpoint_interval_s / 3600:.1f} h; {run.lost_fraction:.1%} "
                f"of the time lost to checkpoints, lost work and restarts")
        return RunQuote(purchase, usd_per_instance_hour, nodes, run.wall_s,
                        usd_per_instance_hour * nodes * run.wall_s / 3600, note)
    if purchase == "capacity-block":
        if nodes > CAPACITY_BLOCK_MAX_INSTANCES:
            return f"capacity-block: {nodes} nodes exceed a block's {CAPACITY_BLOCK_MAX_INSTANCES} instances"
        days = capacity_block_days(train_s)
        if days is None:
            return f"capacity-block: {train_s / 86400:,.0f} days exceed the longest block ({CAPACITY_BLOCK_MAX_DAYS} days)"
        return RunQuote(purchase, usd_per_instance_hour, nodes, train_s,
                        usd_per_instance_hour * nodes * days * 24,
                        f"a {days}-day block paid up front ({train_s / 86400:.1f} days used)")
    if purchase in COMMITMENT_YEARS:
        years = COMMITMENT_YEARS[purchase]
        note = (f"a {years}-year commitment of ${usd_per_instance_hour * nodes:,.2f}/h; the run uses "
                f"{train_s / (years * 8760 * 3600):.1%} of it: only cheaper if other work fills the rest")
        return RunQuote(purchase, usd_per_instance_hour, nodes, train_s,
                        usd_per_instance_hour * nodes * train_s / 3600, note)
    return RunQuote(purchase, usd_per_instance_hour, nodes, train_s, usd_per_instance_hour * nodes * train_s / 3600, "")
