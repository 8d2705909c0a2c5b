"""The bundled data files (planner/data/*.yaml) as start-up reads them. YAML stays the source; the
pure-Python YAML parser takes ~0.15 s for catalog.yaml alone, a third of a plan's whole process, so
scripts/compile_data.py writes each file's content as JSON (planner/data/compiled/, ~0.5 ms to read)
with the SHA-256 of the YAML it came from. A compiled file read here is used only while that digest
still matches the YAML beside it; otherwise (an edit not yet recompiled) the YAML itself is parsed,
with the same strict loader, so a stale build can be slow but never wrong."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib import resources
from typing import Any

import yaml

# storage.yaml (1 KB, keyed by integer throughput tiers JSON cannot carry) is parsed directly.
DATA_FILES = ("catalog", "models", "engine-options", "managed")
COMPILED_DIR = "compiled"
FORMAT_VERSION = 1


def _yaml_loader() -> type:
    """The strict loader user files get (a repeated or non-text key is an error), so bundled data obeys
    the same rules; imported late because planner.spec is heavier than this module."""
    from planner.spec import _StrictLoader

    return _StrictLoader


def parse_yaml(text: str, name: str) -> Any:
    """The YAML's content, which must survive a JSON round trip unchanged (no dates, no integer keys)."""
    data = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 (a SafeLoader subclass)
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
