"""The bundled data files (planner/data/*.yaml) as start-up reads them. YAML stays the source; parsing
catalog.yaml takes ~0.15 s in pure Python and ~20-45 ms with libyaml, against a 0.2 s budget for a whole
plan (issue 29), so
scripts/compile_data.py writes each file's content as JSON (planner/data/compiled/, ~0.5 ms to read)
with the SHA-256 of the YAML it came from. A compiled file read here is used only while that digest
still matches the YAML beside it; otherwise (an edit not yet recompiled) the YAML itself is parsed,
with the project's one YAML reader (planner/workload/yamlsafe.py), so a stale build can be slow but never wrong."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib import resources
from typing import Any

# storage.yaml (1 KB, keyed by integer throughput tiers JSON cannot carry) is parsed directly.
DATA_FILES = ("catalog", "models", "engine-options", "managed", "accuracy_bands", "collectives")
COMPILED_DIR = "compiled"
FORMAT_VERSION = 1


def parse_yaml(text: str, name: str) -> Any:
    """The YAML's content, which must survive a JSON round trip unchanged (no dates, no integer keys)."""
    from planner.workload.yamlsafe import load_text  # the project's one YAML reader (repeated keys, alias bounds)

    data = load_text(text, bundled=True)
    try:
        same = json.loads(json.dumps(data)) == data
    except TypeError:  # a date or another type JSON has no form for
        same = False
    if not same:
        raise ValueError(f"planner/data/{name}.yaml holds values JSON cannot carry (a date, a non-text key); quote them")
    return data


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def compile_text(text: str, name: str) -> str:
    """The compiled JSON for one YAML file: its digest, then its content."""
    document = {"format": FORMAT_VERSION, "source": f"planner/data/{name}.yaml", "sha256": sha256(text),
                "data": parse_yaml(text, name)}
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), sort_keys=False) + "\n"


@cache
def load(name: str) -> Any:
    """planner/data/<name>.yaml's content: from its compiled JSON while that is current, else parsed."""
    data_dir = resources.files("planner.data")
    text = data_dir.joinpath(f"{name}.yaml").read_text()
    compiled = data_dir.joinpath(COMPILED_DIR, f"{name}.json")
    if compiled.is_file():
        document = json.loads(compiled.read_text())
        if document.get("format") == FORMAT_VERSION and document.get("sha256") == sha256(text):
            return document["data"]
    return parse_yaml(text, name)
