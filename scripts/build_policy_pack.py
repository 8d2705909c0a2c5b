"""Assemble the self-contained CrossGuard pack: `python scripts/build_policy_pack.py [OUT]`
(default dist/policy-pack), ready for `pulumi preview --policy-pack OUT` or `pulumi policy publish OUT`.

The pack carries the planner (pure Python plus its catalog and presets) beside the rules, so its
requirements.txt names only packages from PyPI: what a published pack can install."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("planner", "policies")
TOP_LEVEL = ("PulumiPolicy.yaml", "requirements.txt", "__main__.py")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "venv", *TOP_LEVEL)


def build(out: Path) -> Path:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, out / package, ignore=IGNORE)
    for name in TOP_LEVEL:
        shutil.copy2(ROOT / "policies" / name, out / name)
    return out


if __name__ == "__main__":
    target = build(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "dist" / "policy-pack")
    print(f"wrote {target} (pulumi policy publish {target})")
