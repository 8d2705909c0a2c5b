"""Append the on-demand and spot prices of the issue-28 families (p6-b200, p6-b300, g6f, g7e) to the priced CSV,
read by script from committed copies of instances.vantage.sh data (nothing copied by hand).

Usage: python scripts/extract_fleet_prices.py RAW_JSON G7E_JS [CSV]
RAW_JSON: github.com/tsaol/aws-gpu data/gpu_instances_raw.json @2d0108c7 (`git show 2d0108c7:data/gpu_instances_raw.json`)
G7E_JS:   github.com/tsaol/aws-gpu data/g7e_instances.js @7412fd25 (g7e launched after the raw snapshot; on-demand only)
Rows already in the CSV (same service, type, region and date) are left as they are.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CSV = ROOT / "scripts" / "data" / "aws-accelerator-prices.csv"
REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
RAW_FAMILIES = ("p6-b200.", "p6-b300.", "g6f.")
RAW_SOURCE = ("github.com/tsaol/aws-gpu data/gpu_instances_raw.json @2d0108c7bd261c8e40493fbd35135437bd6c9099 "
              "(committed copy of instances.vantage.sh/instances.json)")
G7E_SOURCE = ("github.com/tsaol/aws-gpu data/g7e_instances.js @7412fd256c5eda04a70a17742a68e8e44824b2cb "
              "(generated from instances.vantage.sh data, last updated 2026-01-21)")


def raw_rows(raw: list[dict]) -> list[dict]:
    out = []
    for entry in raw:
        name = entry["instance_type"]
        if not name.startswith(RAW_FAMILIES):
            continue
        for region in REGIONS:
            linux = entry.get("pricing", {}).get(region, {}).get("linux") or {}
            if not linux.get("ondemand"):
                continue
            spot = linux.get("spot_min") or ""
            note = ("launched after the 2025-06 P4/P5 cut; Linux shared-tenancy on-demand; spot = lowest AZ spot in "
                    f"region at vantage scrape (spot avg {linux.get('spot_avg', '?')}, max {linux.get('spot_max', '?')}, "
                    f"interruption band {linux.get('pct_interrupt') or 'not given'})") if spot else \
                "Linux shared-tenancy on-demand; no spot data in source"
            out.append({"service": "ec2", "instance_type": name, "region": region,
                        "usd_per_hour_on_demand": linux["ondemand"], "usd_per_hour_spot_or_blank": spot,
                        "source": RAW_SOURCE, "source_date": "2025-11-30", "note": note})
    return out


def g7e_rows(js_text: str) -> list[dict]:
    data = json.loads(js_text[js_text.index("["):js_text.rindex("]") + 1])
    return [{"service": "ec2", "instance_type": entry["name"], "region": region,
             "usd_per_hour_on_demand": repr(prices["onDemand"]), "usd_per_hour_spot_or_blank": "",
             "source": G7E_SOURCE, "source_date": "2026-01-21",
             "note": "Linux shared-tenancy on-demand; the file carries no spot price"}
            for entry in data for region, prices in entry["pricing"].items() if region in REGIONS]


if __name__ == "__main__":
    found = raw_rows(json.loads(Path(sys.argv[1]).read_text())) + g7e_rows(Path(sys.argv[2]).read_text())
    path = Path(sys.argv[3]) if len(sys.argv) > 3 else CSV
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        fields, existing = reader.fieldnames, list(reader)
    have = {(r["service"], r["instance_type"], r["region"], r["source_date"]) for r in existing}
    new = [r for r in found if (r["service"], r["instance_type"], r["region"], r["source_date"]) not in have]
    with path.open("a", newline="") as f:
        csv.DictWriter(f, fieldnames=fields).writerows(new)
    print(f"appended {len(new)} rows to {path}")
