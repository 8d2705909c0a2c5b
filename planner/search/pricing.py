"""What the search asks of prices, as ports it owns (dependency inversion, issue 30): the search ranks
layouts on money but never imports planner/economics; the orchestrator (planner/pipeline.py) hands it a
type's prices built by economics (planner/economics/run_pricing.py) that fit these shapes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Protocol


class UnitPrice(Protocol):
    """One instance's price under one purchase option (economics' HourlyPrice is one)."""

    @property
    def usd_per_hour(self) -> float: ...

    @property
    def purchase(self) -> str: ...


class RunQuote(Protocol):
    """A training run bought one way: what it costs and how long it takes (economics' RunQuote is one)."""

    @property
    def purchase(self) -> str: ...

    @property
    def usd_per_run(self) -> float: ...

    @property
    def usd_per_instance_hour(self) -> float: ...

    @property
    def wall_s(self) -> float: ...


@dataclass(frozen=True)
class RunOffer:
    """A training layout priced: its quotes cheapest first, the reasons of options that cannot quote,
    and what it provisions beside the instances per hour; or the storage refusal that rules it out
    (`refusal`, with how far over the quota it is)."""

    quotes: list[RunQuote] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    storage_usd_per_hour: float = 0.0
    refusal: str | None = None
    refusal_shortfall: float = math.inf


class TypePrices(Protocol):
    """Everything one instance type's search needs of money: its price book (the options weighed, in
    the spec's order), and for training the verdict a layout's pricing would reach and its offer."""

    @property
    def book(self) -> Mapping[str, UnitPrice]: ...

    def verdict(self, nodes: int, train_s: float, tokens_per_s: float, best_usd: float, slow: float) -> str | None:
        """"worse" or "late" when pricing the run could only conclude that; None when it must be priced."""
        ...

    def never_refused(self, nodes: int, tokens_per_s: float) -> bool:
        """True when the run's storage cannot be refused (it streams from S3): then every quote of its offer takes
        at least train_s, and a miss it words is late by at least that much, or has no quote at all."""
        ...

    def offer(self, nodes: int, train_s: float, tokens_per_s: float, states_per_device_bytes: float,
              devices_per_node: int) -> RunOffer:
        """The run at this layout under every option in the book."""
        ...
