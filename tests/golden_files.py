"""Golden-file comparison: GPUPLAN_UPDATE_GOLDEN=1 rewrites the files instead of comparing."""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"


def assert_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("GPUPLAN_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with GPUPLAN_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from its golden file (GPUPLAN_UPDATE_GOLDEN=1 to accept)"
