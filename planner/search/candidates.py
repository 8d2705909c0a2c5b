"""What the searches produce for one instance type: a feasible candidate or the nearest miss."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from planner.hardware.catalog import Accelerator, InstanceType
from planner.physics.memory import MemoryBreakdown
from planner.search.pricing import UnitPrice
from planner.hardware.units import GIB


@dataclass
class Miss:
    """Why a type (or one layout of it) cannot serve; `shortfall` ≥ 1 says how far off it is
    (required ÷ available), infinity for a rule that no amount of hardware fixes."""

    reason: str
    shortfall: float = math.inf
    by_request: bool = False  # excluded by the spec's own filters, so no near miss to report
    stage: int = 0  # how far the layout got: 0 rules, 1 memory, 2 targets or deadline

    def nearer(self, other: "Miss | None") -> "Miss":
        """Within one type, the layout that got furthest, then the smallest shortfall, explains it best."""
        if other is None:
            return self
        return self if (-self.stage, self.shortfall) < (-other.stage, other.shortfall) else other


class NearestMiss:
    """A search's nearest miss: Miss.nearer folded over every miss in the order they arise (the first of the
    least (−stage, shortfall) wins). A miss that is costly to word (pricing a run only to say it is late) may
    be deferred with a floor under its (−stage, shortfall): it is worded when the miss is read, in its place in
    that order, and only if its floor could still beat the nearest found by then; never when a feasible
    layout was found first (then nobody reads the miss)."""

    def __init__(self):
        self._miss: Miss | None = None
        self._at = -1  # the position of _miss in the order
        self._count = 0
        self._deferred: list[tuple[tuple[int, float], int, Callable[[], Miss | None]]] = []

    def nearer_than_worded(self, stage: int, shortfall: float) -> bool:
        """Whether a miss of this stage and shortfall would beat the worded ones (to spare wording one that cannot)."""
        return self._miss is None or (-stage, shortfall) < (-self._miss.stage, self._miss.shortfall)

    def note(self, miss: Miss) -> None:
        if self.nearer_than_worded(miss.stage, miss.shortfall):
            self._miss, self._at = miss, self._count
        self._count += 1

    def defer(self, word: Callable[[], Miss | None], floor: tuple[int, float] = (-math.inf, -math.inf)) -> None:
        """`word()` gives the miss (or None: none after all); its (−stage, shortfall) is at least `floor`."""
        self._deferred.append((floor, self._count, word))
        self._count += 1

    @property
    def nearest(self) -> Miss | None:
        # lowest floor first: once a floor is above the nearest so far, no later one can beat or tie it
        for floor, at, word in sorted(self._deferred, key=lambda d: (d[0], d[1])):
            if self._miss is not None and floor > (-self._miss.stage, self._miss.shortfall):
                break
            miss = word()
            if miss is None:  # nothing to word after all (no layout of it fits)
                continue
            if self._miss is None or ((-miss.stage, miss.shortfall), at) < ((-self._miss.stage, self._miss.shortfall),
                                                                            self._at):
                self._miss, self._at = miss, at
        self._deferred.clear()
        return self._miss


@dataclass
class Candidate:
    itype: InstanceType
    accel: Accelerator
    price: UnitPrice  # made by planner/economics, handed in by the orchestrator
    nodes: int
    tp: int
    pp: int
    dp: int
    replicas: int
    memory: MemoryBreakdown
    usable_bytes: float
    perf: object  # ServingEstimate | TrainingEstimate
    usd_per_hour: float
    objective: float  # what the search minimises: $/h for serving, $/run for training
    batch_per_replica: int | None = None
    zero: int | None = None
    micro_batch: int | None = None
    microbatches: int | None = None
    checkpointing: str | None = None
    pipeline_schedule: str | None = None  # training with PP > 1 (planner/physics/pipeline_schedule.py)
    virtual_stages: int | None = None
    output_tokens_per_s: float | None = None  # serving: aggregate over replicas at their own batches
    sequences_in_flight: int | None = None
    purchase: str = "on-demand"  # the option the objective was priced at
    wall_s: float | None = None  # training: time to finish under that option (spot: interruptions included)
    ep: int = 1  # serving: nodes one replica's experts are spread over (expert parallelism across nodes)
    attention_dp: int = 1  # serving: ranks a replica's attention runs data-parallel over, TP 1 each (physics/attention_dp.py)
    storage_usd_per_hour: float = 0.0  # training: root volumes and FSx (planner/economics/provisioned.py), in the objective
    train_ep: int = 1  # training: DP ranks the routed experts are split over (planner/physics/expert_training.py)
    cp: int = 1  # training: ranks each sequence is split over (planner/physics/context_parallel.py)
    deploy_target: str | None = None  # where this type deploys (search/sweep.py type_target); None: the workload's
    ranking_objective: float | None = None  # the objective under the plan's one price rule (planner/economics/price_rule.py)

    @property
    def ranked(self) -> float:
        """The figure candidates of different types are compared on: the one price rule's where it applies."""
        return self.objective if self.ranking_objective is None else self.ranking_objective

    @property
    def devices_per_copy(self) -> int:
        """Devices one model copy (serving replica, or the whole training job) spans."""
        return self.tp * self.pp * self.ep * (self.dp * self.cp if self.micro_batch is not None else 1)

    @property
    def network_hops(self) -> int:
        """0: one device; 1: devices of one node talk over NVLink/PCIe; 2: traffic crosses nodes."""
        if self.devices_per_copy <= 1:
            return 0
        return 2 if self.devices_per_copy > self.itype.accelerators_per_node else 1

    @property
    def headroom(self) -> float:
        return 1 - self.memory.total / self.usable_bytes

    @property
    def rank_key(self) -> tuple:
        """Cheapest first (to 3 significant figures, so equal prices tie whatever their rounding);
        ties go to fewer nodes, then fewer network hops, then more memory headroom, then the name:
        never to catalog order (design.md)."""
        return (float(f"{self.ranked:.3g}"), self.nodes, self.network_hops, -round(self.headroom, 4),
                self.itype.name)


def gib(value: float) -> str:
    return f"{value / GIB:.1f} GiB"


def memory_miss(itype: InstanceType, accel: Accelerator, usable: float, required: float, detail: str) -> Miss:
    unit = " NeuronCores" if accel.is_neuron else ""
    return Miss(f"{itype.accelerators_per_node}{unit} × {gib(accel.memory_bytes)} ({gib(usable)} usable), "
                f"needs {gib(required)} per device {detail}", required / usable, stage=1)


def tensor_parallel_options(apn: int, heads: int, pinned: int | None, neuron: bool = False) -> list[int]:
    """TP degrees that divide the node's devices and the attention heads (vLLM and Megatron split
    heads evenly); a pin is honoured where it is one of them. Neuron counts NeuronCores and pads heads to a multiple
    of the degree (memory.attention_padding_params), so any even divisor of the node's cores is a
    degree (published configurations: 2, 8, 12, 24 on inf2, 8 and 32 on trn1)."""
    if neuron:
        options = [t for t in range(1, apn + 1) if apn % t == 0 and (t == 1 or t % 2 == 0)]
    else:
        options = [t for t in range(1, apn + 1) if apn % t == 0 and heads % t == 0]
    return options if pinned is None else [t for t in options if t == pinned]


def pinned_tp_miss(pinned: int, apn: int, heads: int) -> str:
    if pinned > apn:
        return f"tensor_parallel {pinned} exceeds the {apn} accelerators per node (TP stays inside one NVLink domain)"
    return (f"tensor_parallel {pinned} does not split the node's {apn} devices and {heads} attention heads "
            f"evenly (GPU engines shard whole heads; Neuron takes 1 or an even divisor of its cores)")
