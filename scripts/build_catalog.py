"""Build planner/data/catalog.yaml from the curated specs and the priced CSV.

Usage: python scripts/build_catalog.py [PRICES_CSV]   (default: scripts/data/aws-accelerator-prices.csv,
whose provenance is scripts/data/aws-accelerator-prices.README.md)

Commitment terms and spot interruption bands come from scripts/data/aws-commitment-prices.csv (written
by scripts/extract_commitments.py), Capacity Block rates from scripts/data/aws-capacity-block-prices.csv;
each figure keeps its own source and date under the price's `provenance`.

Prices: the newest dated row per (service, instance type, region) wins, so the pre-2025-06 P4/P5
EC2 rows (dated "unknown") are superseded by the 2025-11-30 rows. SageMaker training rows are not
hosting prices and are left out. Each price keeps its source (by id) and date.
"""

from __future__ import annotations

import csv
import hashlib
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.workload.yamlsafe import load_text  # noqa: E402

SPECS = ROOT / "scripts" / "catalog_specs.yaml"
OUT = ROOT / "planner" / "data" / "catalog.yaml"
PRICES = ROOT / "scripts" / "data" / "aws-accelerator-prices.csv"
COMMITMENTS = ROOT / "scripts" / "data" / "aws-commitment-prices.csv"
CAPACITY_BLOCKS = ROOT / "scripts" / "data" / "aws-capacity-block-prices.csv"
# An EC2 Instance Savings Plan is priced like a Standard Reserved Instance of the same term and payment
# (AWS Savings Plans FAQ: both up to 72% off on-demand, EC2 Instance SP "provide the lowest prices");
# AWS's per-type Savings Plans rates are not in the committed snapshot, so the RI rate stands in and says so.
TERM_FIELDS = {"standard_1y_no_upfront": ("reserved_1y", "savings_plan_1y"),
               "standard_3y_no_upfront": ("reserved_3y", "savings_plan_3y")}
# The CSV flags spot values of exactly 10% of on-demand as "looks like a floor value": a search would
# choose them for being cheap, so they are not carried as prices.
FLOOR_MARK = "looks like a floor value"
ORDER = ("on_demand", "spot", "reserved_1y", "reserved_3y", "savings_plan_1y", "savings_plan_3y", "capacity_block",
         "spot_interruption", "source", "date", "note", "provenance")
SP_NOTE = "EC2 Instance Savings Plan rate taken as the Standard RI no-upfront rate of the same term"
SERVICES = {"ec2": "ec2", "sagemaker-hosting": "sagemaker"}


def _source_id(text: str) -> str:
    return "src-" + hashlib.sha1(text.encode()).hexdigest()[:8]


def build(prices_csv: Path) -> dict:
    specs = load_text(SPECS.read_text(), bundled=True)
    sources: dict[str, str] = {}
    prices: dict[str, dict[str, dict[str, dict]]] = {}
    for row in csv.DictReader(prices_csv.open()):
        service = SERVICES.get(row["service"])
        date = row["source_date"]
        if service is None or not date[:4].isdigit():
            continue
        ec2_name = row["instance_type"].removeprefix("ml.")
        sid = _source_id(row["source"])
        sources[sid] = row["source"]
        entry = {"on_demand": float(row["usd_per_hour_on_demand"]), "source": sid, "date": date,
                 "note": row["note"]}
        if row["usd_per_hour_spot_or_blank"] and FLOOR_MARK in row["note"]:
            entry["note"] += "; spot left out of the catalog (a floor value, not a market price)"
        elif row["usd_per_hour_spot_or_blank"]:
            entry["spot"] = float(row["usd_per_hour_spot_or_blank"])
        slot = prices.setdefault(ec2_name, {}).setdefault(row["region"], {})
        if service not in slot or slot[service]["date"] < date:
            slot[service] = entry
    _add_commitments(prices, sources)
    _add_capacity_blocks(prices, sources)
    for slots in prices.values():
        for services in slots.values():
            for service, entry in services.items():
                services[service] = {key: entry[key] for key in ORDER if key in entry}
    instance_types = []
    family_sources = specs.get("family_sources", {})
    for name, family, accel, count, vcpus, mem, gbps, efa, cards in specs["instance_types"]:
        source, source_date = family_sources.get(
            family, (specs["instance_types_source"], specs["instance_types_source_date"]))
        entry = {"name": name, "family": family, "accelerator": accel, "accelerators_per_node": count,
                 "vcpus": vcpus, "memory_gib": mem, "inter_node_gbps": gbps, "efa": efa,
                 "network_cards": cards, "source": source, "source_date": source_date,
                 "prices": prices.get(name, {})}
        if name in specs.get("no_sagemaker_hosting", []):
            entry["sagemaker_hosting"] = False
        if name in specs.get("no_price", {}) and not entry["prices"]:
            entry["no_price_reason"] = specs["no_price"][name]
        instance_types.append(entry)
    return {"schema": 1, "sources": sources, "accelerators": specs["accelerators"],
            "instance_types": instance_types}


def _ec2_rows(path: Path, prices: dict, sources: dict[str, str]):
    """(row, its EC2 price entry, its source id) for each row of a per-type CSV the catalog prices."""
    for row in csv.DictReader(path.open()):
        ec2 = prices.get(row["instance_type"], {}).get(row["region"], {}).get("ec2")
        if ec2 is not None:
            sid = _source_id(row["source"])
            sources[sid] = row["source"]
            yield row, ec2, sid


def _add_commitments(prices: dict, sources: dict[str, str]) -> None:
    """Reserved / Savings Plans rates and the spot interruption band onto each EC2 price."""
    for row, ec2, sid in _ec2_rows(COMMITMENTS, prices, sources):
        origin = {"source": sid, "date": row["source_date"]}
        for column, fields in TERM_FIELDS.items():
            if row[column]:
                for field in fields:
                    ec2[field] = float(row[column])
                    ec2.setdefault("provenance", {})[field] = {**origin, "note": SP_NOTE} \
                        if field.startswith("savings") else dict(origin)
        if row["spot_interruption_band"]:
            ec2["spot_interruption"] = row["spot_interruption_band"]
            ec2.setdefault("provenance", {})["spot_interruption"] = dict(origin)


def _add_capacity_blocks(prices: dict, sources: dict[str, str]) -> None:
    for row, ec2, sid in _ec2_rows(CAPACITY_BLOCKS, prices, sources):
        ec2["capacity_block"] = float(row["usd_per_instance_hour"])
        ec2.setdefault("provenance", {})["capacity_block"] = {"source": sid, "date": row["source_date"],
                                                               "note": row["note"]}


if __name__ == "__main__":
    catalog = build(Path(sys.argv[1]) if len(sys.argv) > 1 else PRICES)
    header = "# Generated by scripts/build_catalog.py from scripts/catalog_specs.yaml and the priced CSV.\n"
    OUT.write_text(header + yaml.safe_dump(catalog, sort_keys=False, width=120))
    print(f"wrote {OUT} ({len(catalog['instance_types'])} instance types)")
    import compile_data  # the JSON start-up reads (planner/workload/bundled.py), rebuilt from the YAML just written

    compile_data.main([])
