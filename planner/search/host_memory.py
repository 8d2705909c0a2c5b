"""Host memory (issue 27, item 6): a Neuron node loads and compiles its model in host memory before it
reaches the NeuronCores, so a type whose RAM cannot hold it fails at startup, whatever its device memory."""

from __future__ import annotations

from planner.search.candidates import Candidate, Miss
from planner.workload.spec import Workload
from planner.hardware.units import GIB


def host_need_bytes(cand: Candidate) -> tuple[float, str] | None:
    """(bytes, rule) the engine must hold in host memory at once while it loads, where that bounds the type.
    Neuron (transformers-neuronx, NxD Inference, NxD training): the checkpoint is loaded into host memory
    whole, then sharded and compiled for the NeuronCores (AWS Neuron SDK, NxD Inference developer guide,
    "Loading a model": weights are loaded on the CPU, sharded, then moved to device; neuronx-cc compiles on
    the host), so one full model copy. GPU engines (vLLM, TGI) memory-map safetensors and copy one tensor at
    a time to the device (vLLM model loader, safetensors safe_open), so host memory does not bound them: None."""
    if not cand.accel.is_neuron:
        return None
    return cand.memory.weights * cand.tp * cand.pp, "the whole model, loaded on the host to be sharded and compiled"


def host_memory_miss(w: Workload, cand: Candidate) -> Miss | None:
    """A miss when the node's host memory, less the spec's memory_headroom, cannot hold what loading needs;
    None when it can or the catalog has no host memory figure for the type."""
    host_gib = cand.itype.memory_gib
    if not host_gib:
        return None
    usable = host_gib * GIB * (1 - w.constraints.memory_headroom)
    found = host_need_bytes(cand)
    if found is None or found[0] <= usable:
        return None
    need, rule = found
    return Miss(f"host memory: {host_gib:g} GiB per node ({usable / GIB:,.1f} GiB usable at memory_headroom "
                f"{w.constraints.memory_headroom:g}; catalog memory_gib) cannot hold {need / GIB:,.1f} GiB, {rule}",
                need / usable, stage=1)
