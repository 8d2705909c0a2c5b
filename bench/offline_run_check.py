"""The finite run's rounds (planner/physics/offline_throughput.py) against trtllm-bench's scheduler simulated step by step.

    python bench/offline_run_check.py            # every trtllm-bench row of the reference data
    python bench/offline_run_check.py B200       # one part's rows

The closed form assumes the run's identical requests turn over in rounds of B. The simulation follows the
scheduler the perf-overview ran (TensorRT-LLM's guaranteed_no_evict with chunked context, requests in order):
every step admits queued requests into free slots (at most B resident: the KV pool and max_batch_size), gives
each decoding sequence one token of the step's max_num_tokens and the rest, first come first served, to the
prompts still being encoded; a prompt's last chunk emits its first token. A step takes the planner's decode step
for its decoding sequences plus the prefill of its prompt tokens at the B prompts' rate, so the simulation and
the closed form share every constant and differ only in how the run is scheduled. Prints each row's published
tokens/s, both predictions, and their gap.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.offline_residuals import compared_rows  # noqa: E402
from bench.offline_rows import predict_offline, row_precisions, tuned_settings  # noqa: E402
from planner.hardware.catalog import Catalog, bundled  # noqa: E402
from planner.physics.performance import decode_step, prefill_s  # noqa: E402


@dataclass(frozen=True)
class RunCheck:
    id: str
    setup: str
    published: float
    rounds: float  # closed form (offline_throughput with the row's num_requests)
    simulated: float

    @property
    def gap(self) -> float:
        return self.rounds / self.simulated - 1


def simulated_tokens_per_s(step_s: Callable[[int], float], prefill_per_token_s: float, prompt_tokens: int, output_tokens: int,
                           slots: int, max_num_tokens: int, requests: int) -> float:
    """Output tokens/s of `requests` identical requests run step by step (module docstring); `step_s(n)` is a decode
    step of n sequences."""
    queued, prompts, decoding, clock = requests, [], [], 0.0
    while queued or prompts or decoding:
        admit = min(queued, slots - len(prompts) - len(decoding))
        prompts, queued = prompts + [prompt_tokens] * admit, queued - admit
        budget, encoded, still, started = max_num_tokens - len(decoding), 0, [], []
        for left in prompts:
            chunk = min(left, max(budget, 0))
            budget, encoded = budget - chunk, encoded + chunk
            if left > chunk:
                still.append(left - chunk)
            elif output_tokens > 1:
                started.append(output_tokens - 1)  # its last chunk emitted the first token
        clock += step_s(len(decoding)) + encoded * prefill_per_token_s
        prompts, decoding = still, [d - 1 for d in decoding if d > 1] + started
    return requests * output_tokens / clock


def check(catalog: Catalog, part: str | None = None) -> list[RunCheck]:
    """Every comparable trtllm-bench row (of `part`, if given): the rounds' figure and the simulated one."""
    out = []
    for r, arch, accel, itype in compared_rows(catalog):
        if part is not None and r["accelerator"] != part:
            continue
        precision, kv = row_precisions(r)
        tp, isl, osl = r["tp"], r["prompt_tokens"], r["output_tokens"]
        offline = predict_offline(arch, accel, itype, r)
        tokens = tuned_settings(arch, accel, precision, kv, tp, isl, osl)[1]
        context = isl + osl / 2  # the closed form's mean context, so only the schedule differs

        @cache
        def step_s(n: int) -> float:
            return decode_step(arch, accel, precision, kv, tp, 1, n, context, itype=itype).seconds if n else 0.0

        per_token = prefill_s(arch, accel, precision, tp, 1, isl, itype, prompts=offline.batch) / (offline.batch * isl)
        simulated = simulated_tokens_per_s(step_s, per_token, isl, osl, offline.batch, tokens, r["num_requests"])
        setup = f"{r.get('model')} {r['accelerator']} TP{tp} {precision} {isl}/{osl} N={r['num_requests']} B={offline.batch}"
        out.append(RunCheck(r["id"], setup, float(r["tokens_per_s"]), offline.output_tokens_per_s, simulated))
    return out


def main(argv: list[str]) -> int:
    rows = check(bundled(), argv[0] if argv else None)
    print(f"{'setup':<64} {'published':>9} {'rounds':>8} {'simulated':>9} {'gap':>6}")
    for c in rows:
        print(f"{c.setup:<64} {c.published:>9.0f} {c.rounds:>8.0f} {c.simulated:>9.0f} {c.gap:>+6.1%}")
    gaps = [abs(c.gap) for c in rows]
    print(f"\n{len(rows)} rows: rounds vs simulation, median |gap| {statistics.median(gaps):.2%}, largest {max(gaps):.2%}")
    for name, figure in (("rounds", lambda c: c.rounds), ("simulated", lambda c: c.simulated)):
        errors = [figure(c) / c.published - 1 for c in rows]
        print(f"{name:>9} vs published: signed median {statistics.median(errors):+.1%}, "
              f"median |error| {statistics.median(map(abs, errors)):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
