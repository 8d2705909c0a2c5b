"""The gpuplan CrossGuard policy pack: `pulumi preview --policy-pack policies` from a checkout, or the
self-contained pack that `make policy-pack` writes to dist/policy-pack for `pulumi policy publish`."""

import sys
from pathlib import Path

# The rules reuse the planner. In the built pack `planner/` sits beside this file (the script's own
# directory is already on sys.path); in a checkout it is the parent directory's.
_here = Path(__file__).resolve().parent
if not (_here / "planner").is_dir():
    sys.path.insert(0, str(_here.parent))

from pulumi_policy import PolicyPack  # noqa: E402

from policies.pack import build_policies  # noqa: E402

PolicyPack(name="gpuplan", policies=build_policies())
