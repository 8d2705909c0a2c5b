"""Work the training search would otherwise repeat (issue 29), kept per process and bounded: the memory
of each layout, and each (type, TP, PP, DP)'s fastest layout. Both are pure functions of their keys, so
a table hit gives exactly the figures a new evaluation would."""

from __future__ import annotations

from planner.hardware.catalog import Accelerator, InstanceType
from planner.physics.memory import MemoryBreakdown, TrainingSetup

# Memory depends on the model and the layout, not on the instance type: every type with the same
# FlashAttention and Neuron flags sizes the same layouts (the 405B search at max_nodes 4,096 sized 30,135
# layouts, most of them more than once). One table per (model, setup, flags), the last few kept: a file of
# many workloads of one model reuses them, and memory stays bounded.
_MEMORY_TABLES: dict[tuple, dict[tuple, MemoryBreakdown]] = {}
MEMORY_TABLES_KEPT = 8


def memory_table(arch, setup: TrainingSetup, flash: bool, neuron: bool) -> dict[tuple, MemoryBreakdown]:
    """The memory already sized for this model and setup, by (TP, PP, DP, ZeRO, micro-batch, micro-batches,
    recompute); exact, since the same inputs give the same figures."""
    return _lru_table(_MEMORY_TABLES, (_json(arch), setup, flash, neuron), MEMORY_TABLES_KEPT)


# The fastest layout of a (TP, PP, DP) on a type is physics only: the model, setup, batch and the
# hardware, never the token budget, deadline, prices or region. `gpuplan frontier` searches the spec and
# its deadline-free twin (the same physics twice), and a fleet file repeats models at new budgets.
_FIT_TABLES: dict[tuple, dict[tuple, tuple | None]] = {}
FIT_TABLES_KEPT = 512  # (setup, type) pairs: ~20 training types × a few dozen setups


# A model's JSON, the part of a table key that says which model, type and accelerator: one search asks it of the
# same objects ~60 times (three tables × every type), so within one search (forget_keys at its start) it is kept
# by identity, with the object (so its id is not reused while kept). Across searches it is computed again: a
# caller may change a catalog between them (gpuplan catalog refresh edits types in place).
_JSON: dict[int, tuple[object, str]] = {}


def _json(model) -> str:
    held = _JSON.get(id(model))
    if held is None or held[0] is not model:
        held = _JSON[id(model)] = (model, model.model_dump_json())
    return held[1]


def forget_keys() -> None:
    """A new search begins: models are keyed afresh."""
    _JSON.clear()


def _lru_table(tables: dict, key: tuple, kept: int) -> dict:
    table = tables.pop(key, None)
    if table is None:
        table = {}
        while len(tables) >= kept:
            del tables[next(iter(tables))]  # the least recently used
    tables[key] = table
    return table


def fit_table(arch, setup: TrainingSetup, precision: str, seqs: int, itype: InstanceType, accel: Accelerator,
              usable_bytes: float) -> dict[tuple, tuple | None]:
    """_fastest_fit's answers already found for this physics, by (TP, PP, DP, recompute modes, ZeRO stages,
    micro-batches); exact, since it reads nothing else."""
    key = (_json(arch), setup, precision, seqs, _json(itype), _json(accel),
           usable_bytes)
    return _lru_table(_FIT_TABLES, key, FIT_TABLES_KEPT)


# step_parts' memo (planner/physics/training_time.py) and the search's tokens/s ceilings
# (planner/search/step_floor.py) are physics of the model, setup and type alone: kept across the searches of a
# process like the fits (a file of 5,000 workloads of a few models asks the same ones again).
_STEP_TABLES: dict[tuple, dict] = {}


def step_table(arch, setup: TrainingSetup, itype: InstanceType, accel: Accelerator) -> dict:
    """The step memo for this model, setup and type; exact, its entries being pure functions of their keys."""
    key = (_json(arch), setup, _json(itype), _json(accel))
    return _lru_table(_STEP_TABLES, key, FIT_TABLES_KEPT)


def clear_search_tables() -> None:
    """Forget every table (a cold search, as a new process runs it: benchmarks and tests)."""
    _MEMORY_TABLES.clear()
    _FIT_TABLES.clear()
    _JSON.clear()
    _STEP_TABLES.clear()
