"""vLLM's V0 engine ran every step that held a prompt without a CUDA graph (bench/engine_loop.py): a short prompt's
step lasts as long as the host takes to launch its layers' kernels. AccelMark's vLLM 0.7.3 first tokens, a source no
constant is fitted on, were 40% early at one client and its Mixtral ones 74% early; the launch floor, measured on
another vLLM run, takes them much closer. The rows are read so (READ_EAGER_PREFILL) since the serving fit weighs every
source the same: with the median over rows the floor tipped which of LMDeploy's held-out fold's starts won, and it no
longer does (bench/eager_prefill_check.py; docs/calibration-log.md, sixth session)."""

from __future__ import annotations

import pytest

from bench import calibrate, eager_prefill_check, engine_loop
from bench.reference_cases import all_rows
from planner.hardware.catalog import bundled
from planner.physics.performance import prefill_s, serving_estimate, step_fixed_s
from planner.physics.replica_serving import replica_estimate
from planner.workload.presets import presets

V0 = {"engine_loop": "synchronous"}


@pytest.fixture(scope="module")
def h100():
    catalog = bundled()
    itype = catalog.instance("p5.48xlarge")
    return itype, catalog.accelerator(itype.accelerator)


def test_the_floor_is_the_layers_launch_time_only_on_v0_and_only_when_read(monkeypatch):
    assert engine_loop.READ_EAGER_PREFILL is True  # read since the sixth session (held back in the fourth)
    monkeypatch.setattr(engine_loop, "READ_EAGER_PREFILL", False)
    assert engine_loop.eager_prefill_floor_s(V0, 80) == 0.0
    monkeypatch.setattr(engine_loop, "READ_EAGER_PREFILL", True)
    assert engine_loop.eager_prefill_floor_s(V0, 32) == pytest.approx(32 * 0.8e-3, rel=1e-12)
    assert engine_loop.eager_prefill_floor_s(V0, 80) == pytest.approx(64e-3, rel=1e-12)
    assert engine_loop.eager_prefill_floor_s({"engine": "vllm"}, 80) == 0.0  # V1: piecewise CUDA graphs


def test_the_constant_is_vllms_measured_eager_step_not_a_fit():
    """vllm-omni #7960: 22.5 ms a token run eagerly over Qwen2.5-7B's 28 layers; SGLang's eager Llama 3 8B step,
    8.23 ms over 32 layers (sglang PR #1401), is a lighter path, below it. The serving fit does not touch it."""
    assert engine_loop.EAGER_LAYER_LAUNCH_S == pytest.approx(22.5e-3 / 28, rel=0.01)
    assert 8.23e-3 / 32 < engine_loop.EAGER_LAYER_LAUNCH_S
    fitted = {name for names in calibrate.GPU_GROUPS.values() for name in names}
    assert "EAGER_LAYER_LAUNCH_S" not in fitted and "EAGER_LAYER_LAUNCH_S" not in calibrate.MODULE_OF


def test_a_short_prompt_waits_for_the_launches_and_a_long_one_for_the_gpu(h100):
    """Llama 3 8B on one H100 at one client: a 194-token prompt's GPU step (its prefill and a step's fixed cost,
    performance.step_fixed_s) is shorter than 32 layers' launches (25.6 ms), so the first token moves by exactly the
    difference; a 28,650-token prompt's is not, and stays."""
    itype, accel = h100
    arch = presets()["llama-3-8b"]
    floor = 32 * engine_loop.EAGER_LAYER_LAUNCH_S
    short = prefill_s(arch, accel, "bf16", 1, 1, 194, itype) + step_fixed_s(arch, accel)
    assert short < floor
    plain = serving_estimate(arch, accel, "bf16", "bf16", 1, 1, 1, 194, 350, itype)
    eager = serving_estimate(arch, accel, "bf16", "bf16", 1, 1, 1, 194, 350, itype, prefill_floor_s=floor)
    assert eager.time_to_first_token_s - plain.time_to_first_token_s == pytest.approx(floor - short, rel=1e-9)
    assert eager.inter_token_latency_s == plain.inter_token_latency_s  # one client: no other prompt in its steps
    assert prefill_s(arch, accel, "bf16", 1, 1, 28650, itype) > floor
    assert (serving_estimate(arch, accel, "bf16", "bf16", 1, 1, 1, 28650, 256, itype, prefill_floor_s=floor)
            == serving_estimate(arch, accel, "bf16", "bf16", 1, 1, 1, 28650, 256, itype))


def test_other_clients_prompts_lengthen_each_step_by_their_floor(h100):
    itype, accel = h100
    arch = presets()["llama-3-8b"]
    floor = 32 * engine_loop.EAGER_LAYER_LAUNCH_S
    plain = serving_estimate(arch, accel, "bf16", "bf16", 1, 1, 8, 245, 350, itype)
    eager = serving_estimate(arch, accel, "bf16", "bf16", 1, 1, 8, 245, 350, itype, prefill_floor_s=floor)
    gpu = prefill_s(arch, accel, "bf16", 1, 1, 245, itype)
    assert eager.inter_token_latency_s - plain.inter_token_latency_s == pytest.approx(7 / 350 * (floor - gpu), rel=1e-9)


def test_no_plan_pays_it(h100, monkeypatch):
    """The engines plans deploy run prompts in CUDA graphs or compiled engines: the planner never passes the floor."""
    itype, accel = h100
    arch = presets()["llama-3-8b"]
    before = replica_estimate(arch, accel, "bf16", "bf16", 1, 1, 8, 245, 350, itype)
    monkeypatch.setattr(engine_loop, "READ_EAGER_PREFILL", True)
    monkeypatch.setattr(engine_loop, "EAGER_LAYER_LAUNCH_S", 1.0)
    assert replica_estimate(arch, accel, "bf16", "bf16", 1, 1, 8, 245, 350, itype) == before


def _first_tokens(on: bool) -> dict:
    with eager_prefill_check.eager(on):
        return eager_prefill_check.accelmark_v0_first_tokens(all_rows(bundled(), kind="serving"))


def test_accelmarks_v0_first_tokens_with_the_floor_and_without():
    """A source never fitted: its vLLM 0.7.3 short-prompt first tokens (24 dense, 7 of them at one client, 4 Mixtral).
    Since a fit reads every row of a source (request cost 1 -> 0 ms) each is 1-6 points earlier than it was, and since
    Hopper's prefill share is fitted on Hopper first tokens (0.47 -> 0.65; its H100 and H200 prompts prefill faster)
    0.3-4 points earlier again (-31.7% / -19.4% dense, 40.1% / 25.4% one client, -74.3% / -49.4% Mixtral before). Since
    a request served over HTTP pays the measured 4 ms (efficiency.REQUEST_OVERHEAD_S; AccelMark's client is), 3-8 points
    later (-32.5% / -20.2%, 44.5% / 25.7%, -75.6% / -50.1% before). Since a prompt's experts run as grouped GEMMs
    (gemm_shape.GROUPED_GEMM_FACTOR) the Mixtral ones 2.5 points later without the floor, and the refit that followed
    took V0's host step 1.0 -> 0.6 ms (the dense ones ~1 point earlier: -24.7% / -11.5%, 33.1% / 22.7%, -68.2% /
    -42.8% before). Since a prompt's step pays a step's fixed cost (performance.step_fixed_s) and its LM head multiplies
    its last position only, with the refit that followed (V0's host step 0.6 -> 1.0 ms), later again where the GPU's
    step passes the launches (-25.4% / -12.4%, 35.1% / 23.2%, -65.7% / -43.6% before)."""
    off, on = _first_tokens(False), _first_tokens(True)
    assert [off[k][0] for k in ("dense", "one client", "mixtral")] == [24, 7, 4]
    assert off["dense"][2] == pytest.approx(-0.240, abs=0.005) and on["dense"][2] == pytest.approx(-0.115, abs=0.005)
    assert off["one client"][1] == pytest.approx(0.255, abs=0.005) and on["one client"][1] == pytest.approx(0.200, abs=0.005)
    assert off["mixtral"][2] == pytest.approx(-0.619, abs=0.005) and on["mixtral"][2] == pytest.approx(-0.428, abs=0.005)


def test_the_floor_no_longer_tips_which_start_of_lmdeploys_fold_wins():
    """Why it was held back: without LMDeploy the serving fit's starts stop at KV shares of 0.37-0.87, and with the
    median over rows the floor moved the best start from a 0.71 share (objective 0.229202) to a 0.43 one (0.230505).
    With every source weighed the same the starts still stop apart (0.44 and 0.85-0.86; 0.90 while a fit read 20 rows
    a source), but the best is the upper one either way, and the two starts that reach it agree: the floor reads. Since
    Hopper's prefill share is fitted on Hopper first tokens (and the serving fit moved to a KV share of 0.78) every start
    stopped at 0.72-0.73, with the floor or without. Since a request served over HTTP pays its measured 4 ms, the starts
    stop apart again (0.71-0.73 and 0.90), 0.0001-0.0003 of objective apart: with the floor, as the rows are read, the
    lower one wins (the fold's LOSO figures are the eighth session's); without it the upper one. The basin is fragile
    (docs/calibration-log.md, ninth session). Since a prompt's experts run as grouped GEMMs the starts stop at 0.76 and
    0.90 without the floor (the upper one wins, as before) and at 0.73, 0.77 and 0.90 with it, where the 0.77 one wins
    (0.000038 of objective below the 0.73 one). Since a prompt's step pays a step's fixed cost and its LM head multiplies
    its last position only, every start stops at 0.73-0.74 with the floor or without: one basin again."""
    def best(on: bool) -> tuple[float, float, set[float]]:
        with eager_prefill_check.eager(on):
            starts = eager_prefill_check.fold_starts(eager_prefill_check.LMDEPLOY)
        _, objective, kv = min(starts, key=lambda start: start[1])
        return objective, kv, {kv for *_, kv in starts}

    # 0.207904 and 0.72 (every start) before the HTTP cost was measured; 0.244992 and 0.85 before that
    # {0.71, 0.90} before a prompt's experts ran as grouped GEMMs; 0.216561 and 0.90 of {0.76, 0.90} before a prompt's
    # step paid a step's fixed cost
    assert best(False) == (pytest.approx(0.192892, abs=1e-6), pytest.approx(0.74), {0.73, 0.74})
    # 0.21709 and 0.73 of {0.73, 0.90} before; 0.208614 and 0.72 (every start); 0.245537 and 0.86; 0.217003 and 0.77
    # of {0.73, 0.77, 0.90}
    assert best(True) == (pytest.approx(0.192982, abs=1e-6), pytest.approx(0.74), {0.73, 0.74})
