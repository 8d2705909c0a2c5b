"""Write schemas/*.schema.json and docs/spec.md from the models (planner/report/schemas.py); run after a
spec or plan field changes. tests/test_frontdoor.py fails while the committed copies lag."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.report.schemas import generated_files  # noqa: E402


def main() -> None:
    for path, text in generated_files().items():
        target = ROOT / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
