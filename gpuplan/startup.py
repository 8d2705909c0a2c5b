"""What the entry point sets up before any command runs, so a plan starts quickly (issue 29).

gpuplan registers no pydantic plugin and its validation must not change with whichever one an
environment installs. PYDANTIC_DISABLE_PLUGINS is pydantic's documented switch (docs.pydantic.dev,
Plugins; pydantic#8767). With it set, the first model build still imports pydantic's plugin loader,
whose module imports importlib.metadata (~10 ms of a ~0.2 s plan: email, zipfile, csv, ...) only for
get_plugins() to return () on its first line. Until a model is built we stand a module in for that
loader which gives the same answer for the same switch and hands over to pydantic's own loader for
any other value, so behaviour is pydantic's in every case (tests/test_startup_lean.py checks both).
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from typing import Iterable

SWITCH = "PYDANTIC_DISABLE_PLUGINS"
LOADER = "pydantic.plugin._loader"
# The values pydantic.plugin._loader.get_plugins reads as "no plugins at all" (pydantic 2.12-2.14).
ALL_OFF = ("__all__", "1", "true")


def _get_plugins() -> Iterable[object]:
    if os.environ.get(SWITCH) in ALL_OFF:
        return ()
    if sys.modules.get(LOADER) is PluginsOff:  # a value that names plugins: pydantic's loader decides
        del sys.modules[LOADER]
    return importlib.import_module(LOADER).get_plugins()


PluginsOff = types.ModuleType(LOADER, "Stands in for pydantic's plugin loader while plugins are off (gpuplan/startup.py).")
PluginsOff.get_plugins = _get_plugins  # type: ignore[attr-defined]


def skip_plugin_scan() -> None:
    """Plugins off unless the user set the switch (their value, even empty, is kept), and no
    importlib.metadata import to learn that."""
    if SWITCH in os.environ:
        return
    os.environ[SWITCH] = "__all__"
    sys.modules.setdefault(LOADER, PluginsOff)


# Start-up allocates ~10^5 containers (click commands, pydantic schemas, typing objects) that nearly all
# live until exit; with CPython's default first-generation threshold of 700 the collector runs hundreds
# of times over them (~5 ms of a plan, measured with callgrind: 1,253 -> 1,224 M instructions).
FIRST_GENERATION_THRESHOLD = 5000


def quiet_collector() -> None:
    """Keep the cyclic collector on (a fleet's long search still frees its cycles) but stop it rescanning
    what start-up loaded: gc.freeze() moves every object alive now (the interpreter, typer) into the
    permanent generation, and the first generation is collected every 5,000 allocations instead of 700
    (docs.python.org/3/library/gc.html: freeze, set_threshold)."""
    import gc

    gc.freeze()
    gc.set_threshold(FIRST_GENERATION_THRESHOLD, *gc.get_threshold()[1:])
