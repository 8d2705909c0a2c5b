"""Extract commitment prices and spot interruption bands for the catalog's instance types from a
committed copy of instances.vantage.sh/instances.json (vantage builds it from the AWS Price List API
and the Spot Instance Advisor feed).

Usage: python scripts/extract_commitments.py RAW_JSON [OUT_CSV]
RAW_JSON: github.com/tsaol/aws-gpu data/gpu_instances_raw.json @2d0108c7 (`git show 2d0108c7:data/gpu_instances_raw.json`).
OUT_CSV defaults to scripts/data/aws-commitment-prices.csv; its README says what each column means.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.workload.yamlsafe import load_text  # noqa: E402

OUT = ROOT / "scripts" / "data" / "aws-commitment-prices.csv"
REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
SOURCE = ("github.com/tsaol/aws-gpu data/gpu_instances_raw.json @2d0108c7bd261c8e40493fbd35135437bd6c9099 "
          "(committed copy of instances.vantage.sh/instances.json: AWS Price List reserved terms, Spot Instance "
          "Advisor interruption band)")
SOURCE_DATE = "2025-11-30"  # the commit's date
TERMS = {"standard_1y_no_upfront": "yrTerm1Standard.noUpfront", "standard_3y_no_upfront": "yrTerm3Standard.noUpfront",
         "convertible_1y_no_upfront": "yrTerm1Convertible.noUpfront",
         "convertible_3y_no_upfront": "yrTerm3Convertible.noUpfront"}


def rows(raw: list[dict], names: list[str]) -> list[dict]:
    by_name = {entry["instance_type"]: entry for entry in raw}
    out = []
    for name in names:
        for region in REGIONS:
            linux = by_name.get(name, {}).get("pricing", {}).get(region, {}).get("linux")
            if not linux:
                continue
            reserved = linux.get("reserved") or {}
            row = {"instance_type": name, "region": region}
            row.update({column: reserved.get(term, "") for column, term in TERMS.items()})
            row.update(spot_interruption_band=linux.get("pct_interrupt", ""), source=SOURCE, source_date=SOURCE_DATE)
            out.append(row)
    return out


if __name__ == "__main__":
    raw = json.loads(Path(sys.argv[1]).read_text())
    names = [spec[0] for spec in load_text((ROOT / "scripts" / "catalog_specs.yaml").read_text(), bundled=True)["instance_types"]]
    out_path = Path(sys.argv[2]) if len(sys.argv) > 2 else OUT
    found = rows(raw, names)
    with out_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["instance_type", "region", *TERMS, "spot_interruption_band", "source",
                                               "source_date"])
        writer.writeheader()
        writer.writerows(found)
    print(f"wrote {out_path} ({len(found)} rows)")
