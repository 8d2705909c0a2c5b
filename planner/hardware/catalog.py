"""The accelerator and instance-type catalog: bundled data (data/catalog.yaml), user overlays
(design.md's overlay format), and price lookup with provenance."""

from __future__ import annotations

import statistics
from functools import cache, cached_property
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from planner.workload.bounds import (ACCELERATORS_PER_NODE, CAPEX_USD, DEVICE_MEMORY_MIB, INTER_NODE_GBPS, INTRA_NODE_GB_S,
                                     MEMORY_BANDWIDTH_GB_S, NETWORK_CARDS, NEURON_CORES, NODE_MEMORY_GIB, OPEX_USD_PER_YEAR,
                                     TFLOPS, USD_PER_HOUR, VCPUS, BOARD_POWER_W, CLOCK_RATIO,
                                     GEMM_SHARE)
from planner.workload.errors import SpecError, field_path, shown
from planner.workload.strict import StrictModel
from planner.hardware.clocks import sustained_clock_fraction  # module level: the search asks ~50,000 times
from planner.hardware.units import MIB


# The tensor precisions a datasheet quotes dense peak TFLOP/s for; a key outside these is a typo.
TensorPrecision = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]
NAME = Field(min_length=1, max_length=64)


class Supports(StrictModel):
    fp8: bool = False
    fp4: bool = False  # Blackwell's FP4 tensor cores (mxfp4/nvfp4 activations and weights)
    bf16: bool = True
    flash_attention: bool = True
    int4_kernels: bool = False
    training: bool = True


class Accelerator(StrictModel):
    name: str = NAME
    vendor: Literal["nvidia", "aws-neuron", "other"] = "nvidia"
    memory_mib: DEVICE_MEMORY_MIB
    memory_bandwidth_gb_s: MEMORY_BANDWIDTH_GB_S
    tflops: dict[TensorPrecision, TFLOPS | None]
    intra_node_gb_s: INTRA_NODE_GB_S
    # How a node's devices reach each other (planner/physics/collectives.py): NVLink/NeuronLink, PCIe
    # peer-to-peer, or PCIe staged through host memory where the platform exposes no GPU peer access
    # (AWS's g-family virtual machines).
    intra_node_link: Literal["nvlink", "neuronlink", "pcie-p2p", "pcie-host"] = "nvlink"
    # What the device memory is built from: stacked HBM, or GDDR6/GDDR7 chips on the board, which stream a lower
    # share of their peak (planner/physics/efficiency.py GDDR_BANDWIDTH_EFFICIENCY).
    memory_technology: Literal["hbm", "gddr"] = "hbm"
    compute_capability: str | None = None
    neuron_generation: str | None = None
    neuron_cores: NEURON_CORES = 1
    supports: Supports = Field(default_factory=Supports)
    # A variant of a datasheet part (planner/hardware/clocks.py): the sustained tensor clock over the boost
    # clock, and/or a power limit below the board power the datasheet peak was quoted at.
    sustained_clock_ratio: CLOCK_RATIO | None = None
    power_limit_w: BOARD_POWER_W | None = None
    board_power_w: BOARD_POWER_W | None = None
    # The share of its dense BF16 peak a large square BF16 GEMM sustains on this part, where measured at its
    # sustained clock. The fitted GEMM shares are shares on the parts they were fitted on; a part whose GEMMs reach
    # a different share of its peak scales them (planner/physics/efficiency.py gemm_share_factor).
    gemm_share_measured: GEMM_SHARE | None = None
    # The best share of its peak memory bandwidth a paged decode-attention kernel reached on this part where
    # measured: decode reads the KV cache at no more than it (planner/physics/efficiency.py kv_bandwidth), whatever
    # share the fitted parts' rows gave.
    kv_share_measured: GEMM_SHARE | None = None
    source: str = ""
    source_date: str = ""

    @model_validator(mode="after")
    def _power_limit_below_board_power(self) -> "Accelerator":
        if self.power_limit_w is not None:
            if self.board_power_w is None:
                raise ValueError("power_limit_w needs board_power_w: the board power (W) the datasheet's "
                                 "tflops are quoted at")
            if self.power_limit_w > self.board_power_w:
                raise ValueError(f"power_limit_w ({self.power_limit_w:g} W) must be at most board_power_w "
                                 f"({self.board_power_w:g} W)")
        return self

    @model_validator(mode="after")
    def _rates_for_what_it_supports(self) -> "Accelerator":
        """Every precision the accelerator claims needs its peak rate: the estimators divide by it."""
        if not any(self.tflops.values()):
            raise ValueError("tflops: give the dense peak TFLOP/s of at least one precision (bf16, fp16, ...)")
        for precision in ("bf16", "fp8", "fp4"):
            if getattr(self.supports, precision) and self.tflops.get(precision) is None:
                raise ValueError(f"supports.{precision} is true but tflops.{precision} is missing: give its dense "
                                 f"peak TFLOP/s, or set supports.{precision}: false")
        return self

    @property
    def memory_bytes(self) -> float:
        return self.memory_mib * MIB

    @property
    def is_neuron(self) -> bool:
        return self.vendor == "aws-neuron"

    @property
    def device_unit(self) -> str:
        """What a tensor-parallel degree counts: GPUs, or NeuronCores (the Neuron SDK's tp_degree)."""
        return "NeuronCore" if self.is_neuron else "GPU"

    @property
    def devices_per_chip(self) -> int:
        return self.neuron_cores if self.is_neuron else 1

    def sharding_device(self) -> "Accelerator":
        """The unit a model is sharded over. A NeuronCore-v2 owns its share of the chip: 16 of the
        32 GiB HBM, half the bandwidth and FLOP/s (AWS Neuron docs, inferentia2.rst and trainium.rst:
        two NeuronCore-v2 per chip). NeuronLink stays whole: a ring over the node's cores crosses each
        chip-to-chip link with one ring's traffic, as a ring over the chips would. A GPU is its own unit."""
        n = self.devices_per_chip
        if n <= 1:
            return self
        return self.model_copy(update={
            "memory_mib": self.memory_mib / n, "memory_bandwidth_gb_s": self.memory_bandwidth_gb_s / n,
            "tflops": {k: None if v is None else v / n for k, v in self.tflops.items()},
            "neuron_cores": 1})

    def peak_flops(self, precision: str) -> float | None:
        """Dense peak FLOP/s at a tensor precision; None where the hardware lacks it."""
        tflops = self.tflops.get(precision)
        if tflops is None:
            return None
        return tflops * 1e12 * sustained_clock_fraction(self.sustained_clock_ratio, self.power_limit_w, self.board_power_w)


class Provenance(StrictModel):
    """Where one figure of a Price came from, when it is not the Price's own source."""
    source: str
    date: str = ""
    note: str = ""


class Price(StrictModel):
    """One service's prices of one type in one region, USD per instance-hour. Commitment rates are
    the effective hourly rate of the no-upfront term: reserved_* a Standard Reserved Instance,
    savings_plan_* an EC2 Instance (or SageMaker) Savings Plan; capacity_block the Capacity Block
    for ML reservation fee per instance-hour."""
    on_demand: USD_PER_HOUR | None = None
    spot: USD_PER_HOUR | None = None
    reserved_1y: USD_PER_HOUR | None = None
    reserved_3y: USD_PER_HOUR | None = None
    savings_plan_1y: USD_PER_HOUR | None = None
    savings_plan_3y: USD_PER_HOUR | None = None
    capacity_block: USD_PER_HOUR | None = None
    # Spot Instance Advisor's frequency of interruption: the share of instances reclaimed in a month.
    spot_interruption: Literal["<5%", "5-10%", "10-15%", "15-20%", ">20%"] | None = None
    source: str = ""
    date: str = ""
    note: str = ""
    provenance: dict[str, Provenance] = Field(default_factory=dict)  # field -> its own source

    def origin(self, field: str) -> tuple[str, str]:
        """(source, date) of one figure: its own provenance, else the Price's."""
        own = self.provenance.get(field)
        return (own.source, own.date) if own else (self.source, self.date)


class Owned(StrictModel):
    """Buying the node instead of renting it (an overlay's figures): what it costs to own for a year is
    the capital spread over its lifetime, power drawn every hour of the year, and operations."""
    capex_usd: CAPEX_USD
    lifetime_years: float = Field(gt=0, le=15)
    power_kw: float = Field(gt=0, le=1000)  # the node's average draw under load
    usd_per_kwh: float = Field(gt=0, le=10)
    pue: float = Field(default=1.0, ge=1, le=5)  # facility power over IT power; 1: billed at the rack
    opex_usd_per_year: OPEX_USD_PER_YEAR = 0  # space, support, staff share
    source: str = ""
    date: str = ""

    @property
    def usd_per_year(self) -> float:
        return (self.capex_usd / self.lifetime_years + self.opex_usd_per_year
                + self.power_kw * self.pue * 8760 * self.usd_per_kwh)


class InstanceType(StrictModel):
    name: str = NAME
    family: str = NAME
    accelerator: str = NAME
    accelerators_per_node: ACCELERATORS_PER_NODE
    vcpus: VCPUS | None = None
    memory_gib: NODE_MEMORY_GIB | None = None
    inter_node_gbps: INTER_NODE_GBPS = 0
    efa: bool | None = None  # None (an overlay that does not say): multi-node capable when it has a network
    network_cards: NETWORK_CARDS = 1
    usd_per_hour: USD_PER_HOUR | None = None  # overlay shorthand: on-demand, any region
    source: str = ""
    source_date: str = ""
    prices: dict[str, dict[str, Price]] = Field(default_factory=dict)  # region -> service -> price
    offered_regions: list[str] | None = None  # set by `catalog refresh`; None: unknown
    # Whether SageMaker hosting offers ml.<name> (botocore's sagemaker ProductionVariantInstanceType enum);
    # a type it lacks is served on EC2 only, whatever an estimated ml.* price would say.
    sagemaker_hosting: bool = True
    owned: Owned | None = None  # overlay: the same node bought outright (rent vs buy)
    no_price_reason: str = Field(default="", max_length=1000)  # why the bundled catalog carries no price (e.g. sold only as Capacity Blocks)

    @model_validator(mode="after")
    def _efa_has_bandwidth(self) -> "InstanceType":
        if self.efa and self.inter_node_gbps == 0:
            raise ValueError("efa is true but inter_node_gbps is 0: give the EFA bandwidth in Gbit/s "
                             "(e.g. 3200 for p5.48xlarge), or set efa: false")
        return self

    @property
    def multi_node(self) -> bool:
        """Can run one job across nodes. AWS types need EFA; off AWS (an overlay that does not name
        EFA either way), a fast interconnect is the requirement, not the brand (design.md overlay)."""
        return self.efa if self.efa is not None else self.inter_node_gbps > 0

    def multi_node_gap(self) -> str:
        if self.efa is False:
            return f"{self.name} lacks EFA"
        return f"{self.name} has no network between nodes (inter_node_gbps 0)"

    def price(self, region: str, service: str) -> Price | None:
        found = self.prices.get(region, {}).get(service)
        if found is None and service == "ec2" and self.usd_per_hour is not None:
            found = Price(on_demand=self.usd_per_hour, source=self.source or "catalog overlay",
                          date=self.source_date)
        return found


class Catalog(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_: int = Field(default=1, alias="schema")
    sources: dict[str, str] = Field(default_factory=dict)
    accelerators: list[Accelerator] = Field(default_factory=list)
    instance_types: list[InstanceType] = Field(default_factory=list)

    @model_validator(mode="after")
    def _accelerators_known(self) -> "Catalog":
        names = {a.name for a in self.accelerators}
        for itype in self.instance_types:
            if itype.accelerator not in names:
                raise ValueError(f"instance type {itype.name}: unknown accelerator {itype.accelerator!r}; "
                                 f"known: {', '.join(sorted(names))}")
        return self

    def accelerator(self, name: str) -> Accelerator:
        return self._accel_index[name]

    def instance(self, name: str) -> InstanceType | None:
        return self._type_index.get(name.removeprefix("ml."))

    def families(self) -> set[str]:
        return {t.family for t in self.instance_types}

    def source_text(self, source_id: str) -> str:
        return self.sources.get(source_id, source_id)

    @cached_property
    def sagemaker_markup(self) -> tuple[float, int]:
        """Median ml.*/EC2 on-demand ratio over types priced both ways in one region, and how many
        pairs it rests on; used, and flagged as an estimate, where a SageMaker price is missing."""
        ratios = [services["sagemaker"].on_demand / services["ec2"].on_demand
                  for itype in self.instance_types for services in itype.prices.values()
                  if "sagemaker" in services and "ec2" in services
                  and services["sagemaker"].on_demand and services["ec2"].on_demand]
        return (statistics.median(ratios), len(ratios)) if ratios else (1.0, 0)

    @cached_property
    def newest_price_date(self) -> str | None:
        """The date of the catalog's most recent price: the vintage older prices are measured against."""
        dates = [price.date for itype in self.instance_types for services in itype.prices.values()
                 for price in services.values() if price.date[:4].isdigit()]
        return max(dates) if dates else None

    def sharded(self, itype: InstanceType) -> tuple[InstanceType, Accelerator]:
        """The type and accelerator as the planner shards over them: per NeuronCore on Neuron types
        (inf2.48xlarge is 24 devices of 16 GiB), per GPU elsewhere."""
        return self._sharded_index[itype.name] if itype.name in self._sharded_index else \
            _sharded(itype, self.accelerator(itype.accelerator))

    @cached_property
    def _sharded_index(self) -> dict[str, tuple[InstanceType, Accelerator]]:
        return {t.name: _sharded(t, self.accelerator(t.accelerator)) for t in self.instance_types}

    @cached_property
    def _accel_index(self) -> dict[str, Accelerator]:
        return {a.name: a for a in self.accelerators}

    @cached_property
    def _type_index(self) -> dict[str, InstanceType]:
        return {t.name: t for t in self.instance_types}


def _sharded(itype: InstanceType, accel: Accelerator) -> tuple[InstanceType, Accelerator]:
    n = accel.devices_per_chip
    if n <= 1:
        return itype, accel
    return itype.model_copy(update={"accelerators_per_node": itype.accelerators_per_node * n}), accel.sharding_device()


def _explain(error: dict) -> str:
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return f"unknown field {shown(str(error['loc'][-1]))}"
    if error["type"] in ("model_type", "dict_type"):
        return f"expected a mapping (got {shown(error.get('input'))})"
    return message if error["type"] in ("value_error", "missing") or isinstance(error.get("input"), (dict, list)) \
        else f"{message} (got {shown(error.get('input'))})"


def _validated(model: type[BaseModel], data: object, file: str):
    if not isinstance(data, dict):
        raise SpecError("expected a mapping with instance_types: and/or accelerators:", file=file)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        if err["type"] == "extra_forbidden" and len(err["loc"]) == 1:  # a stray top-level key: not echoed
            allowed = ", ".join(f.alias or name for name, f in model.model_fields.items())
            raise SpecError(f"unknown top-level key; allowed: {allowed}", file=file) from None
        raise SpecError(_explain(err), path=field_path(err["loc"]), file=file) from None


class Overlay(BaseModel):
    """A user's catalog file (design.md overlay): validated on its own, so every error points into the
    file as written, then laid over the bundled catalog by name."""

    # defer_build: validators built on the first overlay read, not at import (only --catalog reads one)
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    schema_: Literal[1] = Field(default=1, alias="schema")
    sources: dict[str, str] = Field(default_factory=dict)
    accelerators: list[Accelerator] = Field(default_factory=list)
    instance_types: list[InstanceType] = Field(default_factory=list)


@cache
def bundled() -> Catalog:
    from planner.workload.bundled import load as load_bundled  # compiled JSON while current (planner/workload/bundled.py)

    return _validated(Catalog, load_bundled("catalog"), "planner/data/catalog.yaml")


def with_overlay(base: Catalog, overlay_data: object, file: str) -> Catalog:
    """Add or replace instance types and accelerators by name."""
    overlay = _validated(Overlay, overlay_data, file)
    accelerators = {a.name: a for a in base.accelerators} | {a.name: a for a in overlay.accelerators}
    for index, itype in enumerate(overlay.instance_types):
        if itype.accelerator not in accelerators:
            raise SpecError(f"unknown accelerator {itype.accelerator!r}; define it under accelerators: or use one of "
                            f"{', '.join(sorted(accelerators))}", path=f"instance_types[{index}].accelerator", file=file)
    types = {t.name: t for t in base.instance_types} | {t.name: t for t in overlay.instance_types}
    return Catalog(sources={**base.sources, **overlay.sources}, accelerators=list(accelerators.values()),
                   instance_types=list(types.values()))


def load(path: str | Path | None = None) -> Catalog:
    """The bundled catalog, with the file at `path` laid over it when given."""
    if path is None:
        return bundled()
    from planner.workload.spec import read_yaml  # one YAML reader with one set of error messages

    return with_overlay(bundled(), read_yaml(path), str(path))
