"""A training run's money, for the search to rank layouts on (issue 30): its storage, each purchase
option's quote and the verdicts that spare pricing a layout that cannot win. The search owns the shape it
asks for (planner/search/pricing.py: TypePrices); `type_prices` builds one per instance type and the
orchestrator (planner/pipeline.py) hands it in, so planner/search never imports this stage."""

from __future__ import annotations

from typing import Callable

from planner.economics.cost import HourlyPrice, price_book, purchase_options
from planner.economics.provisioned import fsx_usd_per_hour, root_volumes_usd_per_hour
from planner.economics.purchase import COMMITMENT_YEARS, RunQuote, interruptions_per_month, training_quote
from planner.economics.storage import (FSX_MAX_GIB, S3_MB_S_PER_NODE, StoragePlan, checkpoint_bytes,
                                       checkpoint_write_mb_s, dataset_bytes_per_token, per_node_mb_s, plan_storage,
                                       storage_refusal)
from planner.hardware.catalog import Catalog, InstanceType
from planner.search.pricing import RunOffer
from planner.workload.spec import Workload


def run_storage(w: Workload, tokens_per_s: float, nodes: int) -> StoragePlan:
    t = w.training
    return plan_storage(w.architecture, method=t.method, precision=w.precision, optimizer=t.optimizer,
                        lora_rank=t.lora_rank, tokens=t.tokens, tokens_per_s=tokens_per_s, nodes=nodes,
                        dataset_format=t.dataset_format, checkpoint_interval_s=t.checkpoint_interval_minutes * 60,
                        max_checkpoint_share=t.max_checkpoint_share, region=w.constraints.region,
                        lora_targets=t.lora_targets)


def unpriced_verdict(w: Workload, book: dict[str, HourlyPrice], nodes: int, train_s: float,
                     tokens_per_s: float, best_usd: float, slow: float,
                     terms: tuple[float, float] | None = None) -> str | None:
    """What pricing a layout would conclude, when that is sure without pricing it: "worse" (it meets the
    deadline but cannot beat `best_usd`, the best rank key's cost) or "late" (it misses the deadline);
    None when it must be priced. Every option's run costs at least the cheapest $/h × nodes × train_s (spot
    and capacity blocks only add time or whole days; storage adds cost), and on-demand or a commitment
    always quotes (never refused) at exactly train_s, so the fastest quote takes train_s. Storage is
    refused only on FSx, so a run that streams from S3 needs no sizing."""
    if not any(p == "on-demand" or p in COMMITMENT_YEARS for p in book):
        return None
    floor_usd = min(price.usd_per_hour for price in book.values()) * nodes * train_s / 3600 * (1 - 1e-9)
    if float(f"{floor_usd:.3g}") <= best_usd:
        return None
    if not streams_from_s3(terms or stream_terms(w), nodes, tokens_per_s):
        return None
    t = w.training
    return "worse" if not t.deadline_hours or train_s * slow <= t.deadline_hours * 3600 else "late"


def stream_terms(w: Workload) -> tuple[float, float]:
    """(dataset bytes per token, checkpoint write MB/s): the run's figures every layout's S3 check reads."""
    t = w.training
    arch = w.architecture
    ckpt = checkpoint_bytes(arch, t.method, w.precision, t.optimizer, t.lora_rank, t.lora_targets)
    return (dataset_bytes_per_token(t.dataset_format, arch.vocab_size),
            checkpoint_write_mb_s(ckpt, t.checkpoint_interval_minutes * 60, t.max_checkpoint_share))


def streams_from_s3(terms: tuple[float, float], nodes: int, tokens_per_s: float) -> bool:
    """Whether S3 streaming carries the run's reads and checkpoints (stream_terms), so it needs no FSx and its
    storage is never refused (planner/economics/storage.py plan_storage)."""
    return per_node_mb_s(*terms, tokens_per_s, nodes) <= S3_MB_S_PER_NODE


def run_storage_usd_per_hour(w: Workload, storage: StoragePlan, states_per_device_bytes: float, devices_per_node: int,
                             nodes: int) -> float:
    """What the run provisions beside its instances, per hour (planner/economics/provisioned.py): a gp3 root volume
    per node, and FSx for Lustre with its backups when S3 streaming cannot carry the run."""
    region = w.constraints.region
    hourly = root_volumes_usd_per_hour(states_per_device_bytes, devices_per_node, nodes, region)
    if storage.recommendation == "fsx":
        hourly += fsx_usd_per_hour(storage.fsx.usd_per_month, storage.dataset_bytes, storage.checkpoint_bytes, region)
    return hourly


def run_quotes(w: Workload, book: dict[str, HourlyPrice], nodes: int, train_s: float,
               tokens_per_s: float, storage: StoragePlan | None = None) -> dict[str, RunQuote | str]:
    """Each option's way to buy this run, or why it cannot; `storage` when the caller already planned it
    (the search plans each surviving candidate's storage once, for the refusal and the quotes alike)."""
    storage = storage or run_storage(w, tokens_per_s, nodes)
    refused = storage_refusal(storage)
    if refused:
        return {purchase: refused for purchase in book}
    restart_s = w.training.restart_minutes * 60 + storage.checkpoint_write_s  # relaunch, then read it back
    # Every run starts with one launch (instances boot, the image is pulled, NCCL initialises, the weights are
    # read: the same restart_minutes a spot restart pays, and a read the size of a checkpoint), billed like
    # the training that follows; without it a 4-minute run on 8 B200s ties a 4-hour run on one L40S.
    launched_s = train_s + restart_s
    return {purchase: training_quote(purchase, price.usd_per_hour, nodes, launched_s,
                                     interruptions=interruptions_per_month(price.spot_interruption,
                                                                           w.constraints.spot_interruptions_per_month),
                                     checkpoint_write_s=storage.checkpoint_write_s, restart_s=restart_s)
            for purchase, price in book.items()}


class BookPrices:
    """One type's price book, priced for the search: serving reads the first option's price, training asks
    for verdicts and offers (planner/search/pricing.py TypePrices)."""

    def __init__(self, w: Workload, book: dict[str, HourlyPrice]):
        self.w, self.book = w, book
        self.terms = stream_terms(w) if w.kind != "inference" else None

    def verdict(self, nodes: int, train_s: float, tokens_per_s: float, best_usd: float, slow: float) -> str | None:
        return unpriced_verdict(self.w, self.book, nodes, train_s, tokens_per_s, best_usd, slow, self.terms)

    def never_refused(self, nodes: int, tokens_per_s: float) -> bool:
        return streams_from_s3(self.terms, nodes, tokens_per_s)

    def offer(self, nodes: int, train_s: float, tokens_per_s: float, states_per_device_bytes: float,
              devices_per_node: int) -> RunOffer:
        """Storage planned once for the refusal and the quotes alike; quotes cheapest first, then sooner."""
        storage = run_storage(self.w, tokens_per_s, nodes)
        if refused := storage_refusal(storage):
            return RunOffer(refusal=refused, refusal_shortfall=storage.fsx.storage_capacity_gib / FSX_MAX_GIB)
        priced = run_quotes(self.w, self.book, nodes, train_s, tokens_per_s, storage).values()
        quotes = sorted((q for q in priced if not isinstance(q, str)), key=lambda q: (q.usd_per_run, q.wall_s))
        reasons = [q for q in priced if isinstance(q, str)]
        storage_h = run_storage_usd_per_hour(self.w, storage, states_per_device_bytes, devices_per_node, nodes) \
            if quotes else 0.0
        return RunOffer(quotes=quotes, reasons=reasons, storage_usd_per_hour=storage_h)


def type_prices(w: Workload, catalog: Catalog) -> Callable[[InstanceType, str], BookPrices | str]:
    """For each type, its prices where it deploys under the options the spec weighs, or why it has none
    (which rejects it)."""
    options = purchase_options(w.kind, w.constraints.purchase)

    def prices(itype: InstanceType, target: str) -> BookPrices | str:
        book = price_book(catalog, itype, w.constraints.region, target, options)
        return book if isinstance(book, str) else BookPrices(w, book)

    return prices
