"""Write planner/data/compiled/<name>.json from each bundled planner/data/<name>.yaml (the YAML stays the
source; start-up reads the JSON while its digest matches, see planner/workload/bundled.py).

    python scripts/compile_data.py           # rewrite the compiled files
    python scripts/compile_data.py --check   # exit 1 when any is missing or stale (CI)

Run it after editing a bundled YAML file; tests/test_bundled_data.py fails until you do.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.workload.bundled import COMPILED_DIR, DATA_FILES, compile_text  # noqa: E402

DATA = ROOT / "planner" / "data"


def stale() -> list[str]:
    """The compiled files that differ from a fresh compile of their YAML."""
    out = []
    for name in DATA_FILES:
        target = DATA / COMPILED_DIR / f"{name}.json"
        fresh = compile_text((DATA / f"{name}.yaml").read_text(), name)
        if not target.is_file() or target.read_text() != fresh:
            out.append(str(target.relative_to(ROOT)))
    return out


def main(argv: list[str]) -> int:
    if "--check" in argv:
        behind = stale()
        for path in behind:
            print(f"stale: {path} (run python scripts/compile_data.py)", file=sys.stderr)
        return 1 if behind else 0
    (DATA / COMPILED_DIR).mkdir(exist_ok=True)
    for name in DATA_FILES:
        text = (DATA / f"{name}.yaml").read_text()
        (DATA / COMPILED_DIR / f"{name}.json").write_text(compile_text(text, name))
        print(f"wrote planner/data/{COMPILED_DIR}/{name}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
