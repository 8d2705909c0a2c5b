"""The calibration constants the estimators assume, in one place.

Every share of a roof (bandwidth, GEMM, prefill efficiency, and the FP8 factor times the GEMM share)
stays ≤ 1, so nothing is predicted above a roof; the rest are a request overhead, a queueing
variability and a byte count. The fitted ones (bench/calibrate.py PARAMETERS) were fitted by
`python bench/calibrate.py --write` on every source of bench/data/reference.yaml from stated priors;
`python bench/accuracy.py` reports each source predicted with constants fitted without it (leave-one-source-out).
The measured ones (GEMM_KERNEL_ROOF, FITTED_PART_GEMM_SHARE, HOPPER_ATTENTION_EFFICIENCY, FP4_GEMM_EFFICIENCY_FACTOR,
ROOFLINE_SHARPNESS, REQUEST_OVERHEAD_S, Hopper's PREFILL_FP8_GEMM_EFFICIENCY_FACTOR) and those held apart from a past
fit (Ampere's PREFILL_EFFICIENCY_BY_GENERATION, DECODE_GEMM_EFFICIENCY_BY_GENERATION, Ada's FP8 prefill factor) say
where they come from.
Estimators read them through this module (`efficiency.NAME`), so the calibration can vary them.
"""

from __future__ import annotations

from planner.hardware.catalog import Accelerator

# Achieved share of peak HBM bandwidth when a decode GEMM streams its weights, and the fixed cost of each such GEMM
# (filling the memory pipeline, draining the last wave): a GEMV takes bytes ÷ (share × bandwidth) + GEMM_KERNEL_TAIL_S.
# Measured, not fitted: the least-squares line through one H100's cuBLAS GEMVs at M <= 8 that outlast a launch
# (bench/data/device/h100-2026-11-24.json; `python bench/kernel_check.py`, decode_stream_fit): 0.920 and 6.8 us.
# End to end those GEMVs reach 0.76-0.86 of peak; a share alone (fitted: 0.85-0.87) charged the fixed part in proportion
# to the bytes and sat in a valley with DECODE_STEP_OVERHEAD_S that held-out folds crossed (without Argonne's rows the
# fit went to 0.78 and a 1.3 ms step, and Argonne came out 10.5% fast). A decode step pays the tail for each weight GEMM
# it launches (decode_overhead_s). gpt-fast's Llama-2-7B bf16 on one A100-80GB reads 1,397 of 2,039 GB/s end to end
# (reference P-34); domain.md gives 65-85% as the measured range.
MEMORY_BANDWIDTH_EFFICIENCY = 0.92
GEMM_KERNEL_TAIL_S = 6.8e-06
# The same share on GDDR6/GDDR7 parts (Accelerator.memory_technology: A10G, L4, L40S, RTX PRO 6000): board memory
# chips lose more of their peak to DRAM row switches and read/write turnarounds than stacked HBM's many
# independent channels. Fitted on the GDDR rows in the fit (philschmid's A10G: one A10G decodes Llama 3 8B at 0.74 of
# 600 GB/s), prior the HBM share's; TensorRT-LLM's L40S and AccelMark's L4 rows are held out and check it (AccelMark's
# L4 streams ~0.85 at batch 1). It scales the KV cache's share alike (kv_bandwidth). 0.75 before V0's host loop.
GDDR_BANDWIDTH_EFFICIENCY = 0.77
# Achieved share of peak HBM bandwidth when decode attention reads the KV cache. Paged-attention kernels gather
# scattered blocks with one thread block per (sequence, head) and reach a lower share than weight GEMV streams: vLLM's
# PagedAttention V1/V2 decode kernels sit well below the roof at long contexts, FlashInfer's reach 70-90% only with
# split-KV (Ye et al., FlashInfer, arXiv 2501.01005, Fig. 7). Prior: the weight-stream share. 0.84 before Hopper's
# prefill share was fitted (eighth session), 0.77 at 20 rows a source, 0.71 before every source weighed the same.
KV_BANDWIDTH_EFFICIENCY = 0.78
# Fixed cost of one decode step on a GPU that no roof covers: the engine's scheduler and input
# preparation on the CPU, kernel launches the CUDA graph does not hide, sampling and detokenisation. vLLM's v0.6
# profiling found the GPU idle for much of each step at small batch from this CPU work (vLLM blog 2024-09-05, "vLLM
# v0.6.0"). V0's host loop: bench/engine_loop.py, its rows only. 1.6 ms before Hopper's prefill share was fitted, 1.5 at
# 20 rows a source.
DECODE_STEP_OVERHEAD_S = 0.0018
# Weight-only quantised kernels dequantise on the fly and reach less of the roof (gpt-fast int8 and int4-g32 rows,
# reference P-35..P-41): a weakly held pair, gpt-fast its one fitted source and AccelMark's held-out w8a16/w4a16 rows its
# only check (fitted in, they pull it to 0.83/0.74: bench/calibrate.py, EVALUATED_ONLY_SOURCES). int8 has sat at
# 0.81-1.0 and int4 at 0.74-0.97 over the refits (docs/calibration-log.md): 1.0/0.86 before Hopper's prefill share was
# fitted on Hopper first tokens (eighth session), whose refit moved the serving basin (KV share 0.84 -> 0.78).
QUANTISED_BANDWIDTH_FACTOR = {"int8": 1.0, "int4": 0.97}
# MXFP4/NVFP4 weight kernels dequantise 4-bit blocks the same way; no decode row isolates them: int4's stands in.
FOUR_BIT_FORMATS = {"mxfp4": "int4", "nvfp4": "int4"}
# Share of dense peak tensor FLOP/s that a transformer's GEMMs sustain end to end (clocks under load,
# tile quantisation, kernel gaps), per CUDA compute-capability generation, on the eager kernel stack
# (training.kernels; a fused stack's is FUSED_KERNELS_FACTOR times it): Hopper reaches a lower share of its
# higher peak than Ampere (MosaicML's H100 and A100 rows, one code base). Hopper's 0.53 since the non-GEMM traffic is
# measured (NONMATMUL_BYTES_PER_TOKEN_HIDDEN); 0.49 with compiled stacks charged none (COMPILED_NONMATMUL_SHARE), 0.58
# before them and the measured collectives across nodes (planner/physics/collectives.py).
GEMM_EFFICIENCY_BY_GENERATION = {"8": 0.67, "9": 0.53}
# The share FP8 GEMMs reach of their doubled peak, relative to BF16 GEMMs' share of theirs: amax reductions lower it,
# FP8's larger tiles at the same shapes raise it (the casts of every GEMM's operands are charged on their own,
# planner/physics/fp8_casts.py); fitted on the FP8 training rows (NeMo's and DGX Cloud's Llama 3 and GPT-3 on H100,
# torchtitan's FP8 FSDP rows), and never past the measured FP8 roof (GEMM_KERNEL_ROOF). The fit, 0.84 (0.86-0.94 in
# earlier refits), sits near the ratio one H100's 8192³ GEMMs measured (FP8 0.71 of its peak ÷ BF16 0.79 = 0.90,
# bench/kernel_check.py); prefill has its own factor (PREFILL_FP8_GEMM_EFFICIENCY_FACTOR).
FP8_GEMM_EFFICIENCY_FACTOR = 0.84
# The share NVFP4 GEMMs (Blackwell block-scaled FP4: E2M1 blocks of 16 with an FP8 scale, activations quantised to
# FP4 per token before each GEMM) reach of their FP4 roof, relative to BF16 GEMMs' share of theirs: the block-scale
# loads and the activation-quantisation kernel keep it well below the doubled peak. Measured, not fitted: vLLM PR
# #20646 (2025-07-08, CUTLASS NVFP4 dense GEMM on B200, Llama-3.1-8B N=6144 K=4096, M=16,384, its table before the
# tuned configs) sustained 3,039 TFLOP/s with activation quantisation against torch BF16's 1,360 TFLOP/s in the same
# run: (3,039 / 9,000) ÷ (1,360 / 2,250) = 0.56 of B200's dense peaks. Every FP4 row in the reference data comes
# from one source (TensorRT-LLM's perf-overview), so a fit could not be checked leave-one-source-out; the measured
# value stands (issue 25). Applied to decode GEMMs (decode_gemm_efficiency: performance.decode_step, attention_dp:
# B200's 70B/405B decode-heavy offline rows from +50-63% to +10-24% fast). Not applied to B200's prefill, at its
# training GEMM share (no Blackwell first token): with it on top the prefill-heavy rows turn 13-24% slow.
FP4_GEMM_EFFICIENCY_FACTOR = 0.56
# Training kernel stacks (training.kernels). The shares above are those of "eager" stacks: PyTorch modules with
# FlashAttention-2 and unfused norms, RoPE and SwiGLU (FSDP and DeepSpeed scripts, HF Trainer, torchtitan, torchtune,
# nanotron). "fused" stacks are Transformer Engine's (Megatron-Core, NeMo): fused attention (cuDNN), LayerNorm
# fused into the next GEMM, fused SwiGLU and FP8 casts. Measured on one H100 SXM (bench/data/device/
# h100-2026-11-24.json, `python bench/kernel_check.py`): a Llama layer under torch.compile runs 1.06-1.17x its
# eager time, cuDNN attention fwd+bwd 1.8x FlashAttention-2's rate. The whole-run factor is fitted on the fused
# sources' rows (NVIDIA DGX Cloud benchmarks, Megatron-LM's H100 weak scaling, NeMo), leave-one-source-out; prior 1
# (no difference until data says so). Hopper and later only: on Ampere FlashAttention-2 is the attention kernel of
# both stacks (Transformer Engine's backend on sm80) and reaches most of the A100's peak (Dao 2023, FlashAttention-2
# §4.1: 50-73% fwd+bwd), so no stack difference is applied there. 1.26 with Hopper's eager share at 0.53 (a fused
# stack's share 0.67 either way); 1.36 when it was 0.49 (0.58 x 1.15 before).
FUSED_KERNELS_FACTOR = 1.26
# The measured roof of a training GEMM share (before the shape factor), by linear precision, from the H100 run above.
# BF16: the largest share at which every H100 BF16 reference row's layer GEMMs (forward, input and weight gradient at
# the row's shapes), after planner/physics/gemm_shape.py's factor, still run no faster than measured: 0.705 (Megatron-
# LM's 7.1B row; an 8192³ GEMM reaches 0.79 of dense peak, the rows' layer GEMMs 0.83-0.95 of that). FP8: the 8192³
# GEMM, 0.71 of dense FP8 peak (torch._scaled_mm without fast accumulation, so a lower bound for Transformer Engine's
# forward GEMMs). No share, fused or FP8-scaled, may pass them.
GEMM_KERNEL_ROOF = {"bf16": 0.70, "fp16": 0.70, "fp8": 0.71}
# The share of dense BF16 peak a large square BF16 GEMM sustains on the parts each generation's GEMM, prefill and
# decode shares were fitted on, measured by one script (zzc0721/torch-performance-test-data database.md, torch 2.8
# cu128, the best of 4,096-10,240 square): A100 SXM4 80GB 264.5 of 312 TFLOP/s, 0.85 (every Ampere training row is
# an A100); H100 80GB HBM3 789.2 of 989, 0.80 (Hopper's, and Blackwell's until it has its own). A part that states its
# own share in that script (Accelerator.gemm_share_measured: the A10G, the B200) reaches proportionally more or less
# of its peak in every GEMM the shares describe (gemm_share_factor), and never more than its own measured share.
FITTED_PART_GEMM_SHARE = {"8": 0.85, "9": 0.80}
# Causal attention fwd+bwd on Hopper, share of dense BF16 peak, by stack: the median over the eight Llama-shaped
# cases (head dim 128, 2k-8k tokens, GQA and MHA) of the same H100 measurement: FlashAttention-2 0.24 (0.18-0.30),
# cuDNN fused attention 0.46 (0.32-0.53). Measured, not fitted. Datacenter Blackwell (compute capability 10) takes the
# same shares, unmeasured: FlashAttention-2 issues Ampere's mma.sync tensor-core instructions on every part (Dao
# 2023, FlashAttention-2 §3), not Hopper's wgmma or Blackwell's tcgen05 that reach these parts' peaks, so its share
# of a B200's peak is no higher than of an H100's. Ampere, Ada and consumer Blackwell (12.x, mma.sync parts) run
# attention at their GEMM share.
HOPPER_ATTENTION_EFFICIENCY = {"eager": 0.24, "compiled": 0.24, "fused": 0.46}
# Share of dense peak that a decode step's GEMMs and attention sustain when the step is compute-bound (large batch), per
# generation: the training GEMM shares of the fit at 9957dbc, kept apart from GEMM_EFFICIENCY_BY_GENERATION since that
# became the eager training stack's share (issue 25, kernel stacks). Tied to it, the training refit moved serving rows
# that run no training kernel (tried: Hopper 0.63 -> 0.60 and Ampere/Ada 0.59 -> 0.62 took NIM's FP8 TTFT at 5 users
# from within 12% to 19% off, TRT-LLM's L40S 2,048-token rows to 23%). Not fitted. Decode
# GEMMs measured on H100 at M = 1,024: 0.63-0.80 (bench/kernel_check.py): Hopper's 0.63 is no faster. Fitted on serving
# rows with TensorRT-LLM's offline table they generalise worse (bench/calibrate.py, EVALUATED_ONLY_SOURCES).
DECODE_GEMM_EFFICIENCY_BY_GENERATION = {"8": 0.59, "9": 0.63}
# How sharply a GPU kernel turns from its memory roof to its compute roof (Williams et al., "Roofline", CACM 2009,
# draw the corner sharp: time = max(bytes ÷ bandwidth, FLOPs ÷ peak)). Near the corner a real kernel reaches neither
# roof, since it cannot stream a tile while it multiplies the last one perfectly, so its time is the p-norm
# (memory_s^p + compute_s^p)^(1/p) of the two (roofline_s). Measured, not fitted: on one H100's cuBLAS BF16 GEMMs
# of decode's shapes (bench/data/device/h100-2026-11-24.json, "decode_gemm": the three weights large enough not to
# be launch-bound, M = 64-512 rows) the sharp corner is fast at 10 of 12 points, by up to 20% at M = 128-256 (median
# |error| 6.5%); p = 3 puts the median within 4.0%, signed -1% (2.5: 4.7%, 4: 5.3%; bench/kernel_check.py
# ridge_errors). Neuron compiles its own schedule: sharp there.
ROOFLINE_SHARPNESS = 3.0
# Share of the linear precision's peak FLOP/s that a decode step's routed-expert GEMMs sustain, on top of (not under)
# their weight stream (planner/physics/performance.py decode_step). A MoE decode step runs each expert as a grouped
# GEMM of b·k/E rows (vLLM's Triton fused_moe, TensorRT-LLM's MoE plugin), and its time grows with the batch after
# every expert's weights are already read. Measured, not fitted on any reference row: vLLM PR #4002's
# benchmark_latency runs of Mixtral-8x22B on A100-80GB at TP 4 and TP 8, the latency's growth from batch 8 to 16 and
# 32 (bench/moe_kernel_check.py: within 10% at 0.23, 27-59% short without it; 0.22 before the decode refit that read
# LMDeploy's first tokens as TurboMind emits them). Checked on PR #3240 (Mixtral-8x7B, TP 2, A100) and PR #2542
# (TP 8, H100), which took no part: since their 1,000-token prompts' experts run as grouped GEMMs (gemm_shape), #3240's
# growth to batch 64 within 5%, #2542's 56-61% short (median 30.2% against 35.5% without the share).
MOE_GROUPED_GEMM_EFFICIENCY = 0.21
# The kernel that sorts a MoE layer's tokens by expert for the grouped GEMMs (vLLM's and SGLang's moe_align_block_size),
# once per MoE layer per step. Measured, not fitted: 7.168 us at one token, 16 experts, top-2 (vLLM PR #29642's kernel
# bench, RTX 4090, main before the PR; 6.08 after); SGLang's PR #14133 7.8-9.5 us at 32 tokens, 8 experts. A fixed cost.
MOE_ALIGN_KERNEL_S = 7.2e-06
# FP8 prefill's share relative to BF16 prefill's, per generation. Hopper's is measured, not fitted: one H100's 8192³
# GEMMs reach 0.71 of FP8's peak and 0.79 of BF16's (bench/kernel_check.py), 0.90 (1.14, the training fit's FP8 factor
# at 9957dbc, until the eighth session: with Hopper's 16-bit prefill share fitted on Hopper first tokens it put the
# TensorRT-LLM sweep's and NIM's FP8 ones 10-17% fast). Ampere has no FP8; Ada's keeps that fit, its one check the
# sweep's L40S FP8 first tokens (+11% slow at 1.14, +23% at 0.90).
PREFILL_FP8_GEMM_EFFICIENCY_FACTOR = {"8": 1.14, "9": 0.9}
# Share of dense peak that prefill's GEMMs sustain at large M, per CUDA generation, before their shape factor
# (planner/physics/prefill_compute.py): the GEMMs of a training forward. Ampere's is the training GEMM share of b3eef24
# (refitted on serving rows it drifted to 0.95 and held-out TTFT went 20.9% -> 30.0%). Hopper's is fitted on Hopper
# first tokens alone (bench/calibrate.py group "prefill"), those of the sources kept out of the serving fit included,
# each held out in its own fold; 0.47 (b3eef24's) until the eighth session, when the three never-fitted sources with
# long Hopper prompts read its 16-bit first tokens 20-27% slow (bench/hopper_prefill_check.py); 0.66 until the eleventh.
# A generation with no share here (Blackwell, Turing) takes its training GEMM share (gemm_efficiency).
PREFILL_EFFICIENCY_BY_GENERATION = {"8": 0.72, "9": 0.65}
# Fixed cost of a request served over HTTP (a plan's endpoint) before its prefill: the API server's parsing, tokenising
# and hand-off to the engine; a harness that calls its engine in-process pays none (bench/reference_serving.py, client).
# Measured, not fitted: one vLLM behind its OpenAI server against the same engine offline, mean TTFT 231 -> 235 ms at
# batch 32 (tenstorrent/tt-inference-server #190, 2025-05-08, "HTTP server + ZMQ"). Fitted on every harness alike: 0 ms.
REQUEST_OVERHEAD_S = 0.004
# Non-matmul traffic per layer in training, bytes per token per hidden unit: Korthikanti's 34 B of
# stored activations (reference B2) written in the forward, read in the backward, and re-read and
# re-written by norms, residual adds, activation functions and dropout. Measured, not fitted: what torch.compile saved
# on one H100's six Llama layers (bench/data/device/h100-2026-11-24.json), 151-234 B in this unit, median 203.2
# (`python bench/kernel_check.py`, nonmatmul_bytes_saved): Inductor fuses exactly these kernels and keeps the GEMMs and
# attention. Fitted, it sat in a valley with Hopper's eager GEMM share (204 B beside 0.49, 238 B beside 0.54) that a
# serving refit tipped across, training's held-out error 9.1% -> 13.9% (bench/calibrate.py, README accuracy).
NONMATMUL_BYTES_PER_TOKEN_HIDDEN = 203
# The share of that eager traffic a torch.compile'd model still moves (training.kernels: compiled). Inductor fuses the
# norms, rotary embeddings, SwiGLU and residual adds between the GEMMs into a few Triton kernels and keeps cuBLAS GEMMs
# and FlashAttention-2, so compiling saves non-GEMM traffic only. Measured, not fitted: one H100 SXM timed six Llama
# layers' forward+backward eager and compiled (bench/data/device/h100-2026-11-24.json): the saving, 1.1-4.2 ms a layer,
# is the whole of the eager non-GEMM time charged above (it leaves -0.15 to 0.26 of it, median 0.00; `python
# bench/kernel_check.py`, compiled_nonmatmul_shares), so a compiled stack is charged none. Since that charge is itself
# the median saving (NONMATMUL_BYTES_PER_TOKEN_HIDDEN), this holds by construction within the spread of the six layers.
COMPILED_NONMATMUL_SHARE = 0.0
# Share of a collective that hides behind the compute it overlaps on a GPU (FSDP/ZeRO prefetch, DDP bucketed
# all-reduce in the backward): NCCL kernels take SMs from the GEMMs they overlap. Prior 0: the fit finds most of it
# hidden (0.7 since collectives across nodes take their slower leg's time and measured NIC hops; 0.9 since every
# source weighs the same in the fit; 0.75 after the measured all-reduce curves slowed ZeRO-3's tens-of-MB
# collectives' NVLink leg, 0.95 with the kernel stacks of issue 25, 0.8 before).
COMM_OVERLAP = 0.7

# Non-matmul training traffic on Neuron, bytes per token per hidden unit: the GPU fit's value at 9957dbc, held apart
# since the kernel stacks (issue 25). Shared, the GPU refit moved it (408 -> 340 bytes; the GPU fit was back at 408
# after the embedding lookup, 204 since its sources weigh the same) and with it every Neuron constant fitted around it
# (held-out Trainium2 ITL 18.5% -> 27.1%, Neuron serving 19.9% -> 22.4%).
NEURON_NONMATMUL_BYTES_PER_TOKEN_HIDDEN = 408
# Neuron (Inferentia2, Trainium): no GPU constant above is reused. Fitted on AWS's published Neuron performance tables
# (transformers-neuronx serving on inf2.48xlarge and trn1.32xlarge; NeuronX Distributed pre-training on trn1.32xlarge),
# bench/data/reference.yaml, and TGI-on-Neuron runs (optimum-neuron and philschmid LLMPerf/guidellm, compiled static
# batches: planner/physics/neuron_serving.py), bench/data/reference/. Trainium2 rows are compared, not fitted. Achieved
# share of a NeuronCore's HBM bandwidth when decode streams weights and KV cache. The PyTorch blog's Llama 2 at TP 2 (one
# chip) reads it apart from the collectives that decide TP 24: 0.76 before those runs were fitted, every Neuron source
# weighed the same and optimum-neuron's 2025 runs were read at their one compiled shape (one basin since, not two:
# docs/calibration-log.md, sixth session); 0.53 before decode attention had its own share; 0.92 before optimum-neuron's
# 2024 TGI rows were read at their compiled shapes and in the model's tokens.
NEURON_MEMORY_BANDWIDTH_EFFICIENCY = 0.67
# Fixed cost of one collective among NeuronCores (the decode all-reduces are latency-bound: an 8B model at TP 24 reads
# 0.3 GB per core per step yet takes 6.4 ms, 0.2 ms per layer). nccom-test's published examples put it at 58-150 us in
# 2023 (SDK 2.10) and 6-10 us an all-gather in 2025-26 (SDK 2.24-2.28); the fitted rows ran SDK 2.13-2.26 (85 us once).
NEURON_COLLECTIVE_LATENCY_S = 8e-05
# Achieved share of NeuronLink bandwidth in ring collectives: fitted with NEURON_GEMM_EFFICIENCY on the training
# rows, whose TP and gradient collectives are bandwidth-bound (bench/calibrate.py NEURON_GROUPS): 0.65 with GEMM 0.40,
# the floor of the pair's joint grid over AWS's table and HyperPod's Llama 3 70B runs (0.6 with 0.41 was where one
# constant at a time stalled in their diagonal valley; bench/calibrate.py _grid_search).
NEURON_LINK_EFFICIENCY = 0.65
# Fixed cost of a request before its first token on Neuron: the host-side launch of the compiled context-encoding graph
# and its I/O (128-token prompts take 25-29 ms on inf2 for 0.1 GFLOP of work; 19 ms before the sixth session's refit,
# 15 ms before TGI's 2024 rows were read at their compiled shapes and in the model's tokens).
NEURON_REQUEST_OVERHEAD_S = 0.022
# Share of a collective that hides behind compute on Neuron: not fitted. A NeuronDevice runs collectives on dedicated
# collective-communication cores (6 CC-Cores per Trainium/Inferentia2 device, 20 per Trainium2), not on the compute
# engines: "Dedicated engine for collective communication, allows for overlapping computation and communication"
# (AWS Neuron docs, Neuron Glossary; NKI Trainium/Inferentia2 and Trainium2 architecture guides). So the GPU's
# COMM_OVERLAP, whose loss is NCCL taking SMs, does not apply.
NEURON_COMM_OVERLAP = 1.0
# Share of a NeuronCore's peak BF16 FLOP/s that context encoding (prefill) sustains (0.38 while a prompt's LM head ran
# on every position, 0.34 before the sixth session's refit, 0.32 before TGI's 2024 rows' shapes).
NEURON_PREFILL_EFFICIENCY = 0.35
# Share of peak BF16 FLOP/s that NeuronX Distributed training GEMMs sustain (fitted on the training rows alone, with
# NEURON_LINK_EFFICIENCY on their joint grid).
NEURON_GEMM_EFFICIENCY = 0.4
# Share of a NeuronCore's peak BF16 FLOP/s that decode attention sustains. transformers-neuronx's token-generation
# attention (src/transformers_neuronx/layers/attention.py `score` and `context`) repeats each KV head for its query
# heads (repeat_kv), multiplies one query row per head against every position on the 128-row systolic TensorE (NKI
# architecture guides: one row in 128 busy), and upcasts the scores to FP32 for the softmax (a quarter of the BF16
# rate): the prior 1/128 ÷ 4 ≈ 0.002, far below the GEMM share, so its cost grows with query heads × positions × the
# compiled batch, not with KV bytes. It is why a compiled batch of 8 costs more per step than batch 1 at the same weight
# stream: optimum-neuron's trn1 Llama-3-70B at one client decodes ~19 ms a step compiled for 1 and ~30 ms for 8; AWS's
# inf2 tables add ~4.5 ms a step at batch 8 when n_positions doubles, for a GQA 8B model whose KV bytes explain a fifth
# of it. Fitted on the Neuron serving rows (bench/calibrate.py NEURON_GROUPS): 0.0035 (0.002, the prior, before the sixth
# session's refit). Before it, decode attention ran at the GEMM share and the weight stream's share absorbed its cost.
NEURON_DECODE_ATTENTION_EFFICIENCY = 0.0035
# The share where optimum-neuron's NxD backend (the image plans deploy) runs that code (attention_base.py
# compute_for_token_gen) over the compiled batch × sequence_length. Set from its two one-client inf2 runs, whose every
# step is that shape (6 rows of one source, too few to fit): exact at 0.006 (8B, 32 × 4,096) and 0.003 (70B, 8 × 4,096)
# at the time, so 0.005; now +13% and -4%, Trainium2's (never fitted) +53%.
NXD_DECODE_ATTENTION_EFFICIENCY = 0.005


def nonmatmul_bytes_per_token_hidden(accel: Accelerator, kernels: str = "eager") -> float:
    """Training's non-matmul HBM traffic per token per hidden unit per layer (GPU fitted, Neuron held apart; a
    compiled stack moves COMPILED_NONMATMUL_SHARE of the eager traffic)."""
    if accel.is_neuron:
        return NEURON_NONMATMUL_BYTES_PER_TOKEN_HIDDEN
    return NONMATMUL_BYTES_PER_TOKEN_HIDDEN * (COMPILED_NONMATMUL_SHARE if kernels == "compiled" else 1.0)


def comm_overlap(accel: Accelerator) -> float:
    """Share of data-parallel traffic that hides behind compute (COMM_OVERLAP, NEURON_COMM_OVERLAP)."""
    return NEURON_COMM_OVERLAP if accel.is_neuron else COMM_OVERLAP


def _generation(accel: Accelerator) -> int:
    """The CUDA compute-capability major version (8 Ampere and Ada, 9 Hopper, 10 Blackwell); 0 for Neuron."""
    return 0 if accel.is_neuron else int((accel.compute_capability or "0").split(".")[0])


def _by_generation(accel: Accelerator, table: dict[str, float]) -> float:
    """A per-generation share; generations the table has no measurement for take its lowest value."""
    return table.get(str(_generation(accel)), min(table.values()))


def gemm_share_factor(accel: Accelerator) -> float:
    """How much more (or less) of its peak this part's GEMMs sustain than the parts its generation's shares were
    fitted on: its measured large-GEMM share over theirs (FITTED_PART_GEMM_SHARE); 1 where it states none. The
    A10G's tensor cores run at half GA102's full rate, so its GEMMs are bound by their issue rate alone and reach
    0.99 of its peak where an A100's reach 0.85: 1.17."""
    if accel.gemm_share_measured is None or accel.is_neuron:
        return 1.0
    return accel.gemm_share_measured / _by_generation(accel, FITTED_PART_GEMM_SHARE)


def _gemm_share(accel: Accelerator, table: dict[str, float]) -> float:
    """A generation's fitted GEMM share on this part: × gemm_share_factor, at most the part's measured share."""
    share = _by_generation(accel, table) * gemm_share_factor(accel)
    return share if accel.gemm_share_measured is None else min(share, accel.gemm_share_measured)


def gemm_efficiency(accel: Accelerator) -> float:
    """No training measurement for accelerators outside the fitted generations: the lowest fitted value."""
    return NEURON_GEMM_EFFICIENCY if accel.is_neuron else _gemm_share(accel, GEMM_EFFICIENCY_BY_GENERATION)


def training_linear_efficiency(accel: Accelerator, kernels: str, linear_precision: str) -> float:
    """Share of the `linear_precision` peak a training step's large GEMMs sustain (before their shape factor):
    the generation's share, × FUSED_KERNELS_FACTOR for a fused stack on Hopper or later, × the FP8 factor in FP8,
    at most the measured kernel roof (GEMM_KERNEL_ROOF, measured on H100: on a part stating its own large-GEMM share,
    that roof × its share over H100's)."""
    share = gemm_efficiency(accel)
    if accel.is_neuron:
        return share
    if kernels == "fused" and _generation(accel) >= 9:
        share *= FUSED_KERNELS_FACTOR
    if linear_precision == "fp8":
        share *= FP8_GEMM_EFFICIENCY_FACTOR
    roof = GEMM_KERNEL_ROOF.get(linear_precision, GEMM_KERNEL_ROOF["bf16"])
    if accel.gemm_share_measured is not None:
        roof *= accel.gemm_share_measured / FITTED_PART_GEMM_SHARE["9"]
    return min(share, roof)


def training_attention_efficiency(accel: Accelerator, kernels: str) -> float:
    """Share of the 16-bit peak the attention core (QKᵀ, softmax·V, fwd+bwd) sustains in training: the measured
    kernel on Hopper and datacenter Blackwell (HOPPER_ATTENTION_EFFICIENCY), elsewhere the stack's 16-bit GEMM share."""
    if _generation(accel) in (9, 10):
        return HOPPER_ATTENTION_EFFICIENCY[kernels]
    return training_linear_efficiency(accel, kernels, "bf16")


def decode_gemm_efficiency(accel: Accelerator, linear_precision: str) -> float:
    """Share of the `linear_precision` peak a decode step's weight GEMMs sustain: the generation's decode share, and
    for NVFP4 on FP4 tensor cores the block-scaled GEMMs' lower share of that roof (FP4_GEMM_EFFICIENCY_FACTOR)."""
    return decode_compute_efficiency(accel) * (FP4_GEMM_EFFICIENCY_FACTOR if linear_precision == "fp4" else 1.0)


def decode_compute_efficiency(accel: Accelerator) -> float:
    """Share of peak a compute-bound decode step's GEMMs and attention sustain: the generation's decode share
    (DECODE_GEMM_EFFICIENCY_BY_GENERATION), Neuron's GEMM share on Neuron."""
    return NEURON_GEMM_EFFICIENCY if accel.is_neuron else _gemm_share(accel, DECODE_GEMM_EFFICIENCY_BY_GENERATION)


def decode_attention_efficiency(accel: Accelerator, optimum_nxd: bool = False) -> float:
    """Decode attention's share of peak: the decode share on GPUs, on Neuron its engine's (`optimum_nxd`: NxD's)."""
    if accel.is_neuron:
        return NXD_DECODE_ATTENTION_EFFICIENCY if optimum_nxd else NEURON_DECODE_ATTENTION_EFFICIENCY
    return decode_compute_efficiency(accel)


def roofline_s(accel: Accelerator, memory_s: float, compute_s: float) -> float:
    """Seconds of a kernel with `memory_s` of streaming and `compute_s` of math: the roofline's corner rounded by
    ROOFLINE_SHARPNESS on GPUs (never below either roof), the sharp max on Neuron."""
    return max(memory_s, compute_s) if accel.is_neuron else rounded_max(memory_s, compute_s, ROOFLINE_SHARPNESS)


def rounded_max(memory_s: float, compute_s: float, sharpness: float) -> float:
    """(memory_s^p + compute_s^p)^(1/p) at p = `sharpness`, scaled by the larger of the two so that no power under- or
    overflows."""
    top = max(memory_s, compute_s)
    if top <= 0:
        return top
    return top * ((memory_s / top) ** sharpness + (compute_s / top) ** sharpness) ** (1 / sharpness)


def request_overhead_s(accel: Accelerator) -> float:
    return NEURON_REQUEST_OVERHEAD_S if accel.is_neuron else REQUEST_OVERHEAD_S


def prefill_efficiency(accel: Accelerator) -> float:
    """A generation without a prefill share of its own (Blackwell, Turing) takes its training GEMM share."""
    if accel.is_neuron:
        return NEURON_PREFILL_EFFICIENCY
    if str(_generation(accel)) not in PREFILL_EFFICIENCY_BY_GENERATION:
        return gemm_efficiency(accel)
    return _gemm_share(accel, PREFILL_EFFICIENCY_BY_GENERATION)


def prefill_fp8_factor(accel: Accelerator) -> float:
    """FP8 prefill's share over 16-bit's (PREFILL_FP8_GEMM_EFFICIENCY_FACTOR; Blackwell: the lowest, Hopper's)."""
    return _by_generation(accel, PREFILL_FP8_GEMM_EFFICIENCY_FACTOR)


def stream_share(accel: Accelerator) -> float:
    """Share of peak memory bandwidth a weight stream reaches on this part's memory (HBM or GDDR; Neuron's own)."""
    if accel.is_neuron:
        return NEURON_MEMORY_BANDWIDTH_EFFICIENCY
    return GDDR_BANDWIDTH_EFFICIENCY if accel.memory_technology == "gddr" else MEMORY_BANDWIDTH_EFFICIENCY


def kv_bandwidth(accel: Accelerator) -> float:
    """Bytes/s decode attention reads the KV cache at: the KV kernels' share (on GDDR scaled as the weight stream's;
    Neuron: the weights'), at most the best a decode-attention kernel was measured to reach on the part
    (Accelerator.kv_share_measured): a fitted share cannot run a kernel above its own roof."""
    share = stream_share(accel) * (1.0 if accel.is_neuron else KV_BANDWIDTH_EFFICIENCY / MEMORY_BANDWIDTH_EFFICIENCY)
    share = share if accel.kv_share_measured is None else min(share, accel.kv_share_measured)
    return accel.memory_bandwidth_gb_s * 1e9 * share


def decode_overhead_s(accel: Accelerator, gemms_per_stage: float, moe_layers_per_stage: float = 0.0) -> float:
    """Per decode step of a pipeline stage: the fixed framework cost, each weight GEMM's measured tail (the stage's
    share of performance.weight_gemms_per_step) and each MoE layer's token-sorting kernel (MOE_ALIGN_KERNEL_S); TP
    all-reduces cost their collective's time (collectives.py; a fitted barrier skew went to 0: calibration log).
    Neuron runs a compiled graph whose collective latency NEURON_COLLECTIVE_LATENCY_S covers."""
    if accel.is_neuron:
        return 0.0
    return DECODE_STEP_OVERHEAD_S + GEMM_KERNEL_TAIL_S * gemms_per_stage + MOE_ALIGN_KERNEL_S * moe_layers_per_stage


def effective_bandwidth(accel: Accelerator, precision: str) -> float:
    """Bytes/s that decode streams at: peak × the memory's stream_share × the quantised kernels' factor. Neuron
    int8 weight storage is dequantised inside the compiled graph; no Neuron measurement isolates a
    factor for it (the int8 rows are latency-bound), so none is applied."""
    kernel = FOUR_BIT_FORMATS.get(precision, precision)
    quantised = 1.0 if accel.is_neuron else QUANTISED_BANDWIDTH_FACTOR.get(kernel, 1.0)
    return accel.memory_bandwidth_gb_s * 1e9 * stream_share(accel) * quantised
