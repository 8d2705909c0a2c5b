"""Kernel rates on a CUDA GPU, the measurements bench/kernel_check.py holds the planner's kernel assumptions to.

Runs where PyTorch and a GPU are (not in CI, not with the planner's dependencies):

    python bench/kernel_check.py --shapes > shapes.json          # here: the reference rows' layer GEMMs
    OUT=. python bench/device/h100_kernels.py shapes.json         # there: writes $OUT/h100.json

What it times (CUDA events, random data): square BF16/FP8 GEMMs; every forward, input-gradient and
weight-gradient GEMM of the training reference rows (gemm_shape.layer_gemms); causal attention forward and
forward+backward per SDPA backend (FlashAttention-2, cuDNN, memory-efficient); decode GEMMs at M = 1..1,024;
one Llama layer's forward+backward, eager and under torch.compile. bench/data/device/ keeps a run, with its
device, software and date. Eager launches cost ~20 us of CPU each: a kernel shorter than that reads as the
launch, so the checks leave such rows out.
"""
import json, os, sys, time, subprocess
import torch, torch.nn.functional as F
OUT = os.environ.get("OUT", "/tmp")
dev = "cuda"
torch.backends.cuda.matmul.allow_tf32 = False
res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
       "sms": torch.cuda.get_device_properties(0).multi_processor_count}
print(res, flush=True)

def bench(fn, reps=10, warm=3):
    for _ in range(warm): fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / reps / 1e3

def smi():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                               "--format=csv,noheader"],
                              capture_output=True, text=True).stdout.strip()
    except Exception as ex:
        return str(ex)

# 1. reference GEMMs
big = {}
for prec in ("bf16", "fp8"):
    for n in (4096, 8192, 16384):
        a = torch.randn(n, n, device=dev, dtype=torch.bfloat16); b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        if prec == "fp8":
            a8 = a.to(torch.float8_e4m3fn); b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()
            one = torch.tensor(1.0, device=dev)
            fn = lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        else:
            fn = lambda: a @ b
        t = bench(fn, reps=20)
        big[f"{prec}-{n}"] = 2 * n**3 / t / 1e12
    print(prec, big, smi(), flush=True)
res["square_tflops"] = big
res["smi_after_square"] = smi()

shapes = json.load(open(sys.argv[1]))
seen = {}
for o in shapes:
    for m, n, k in o["gemms"]:
        for s in ((m, n, k), (m, k, n), (k, n, m)):
            seen[(tuple(s), o["prec"])] = None
t0 = time.time()
gemm = []
for (s, prec) in sorted(seen, key=lambda x: x[0][0]*x[0][1]*x[0][2]):
    m, n, k = s
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16); b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
    if prec == "fp8":
        a8 = a.to(torch.float8_e4m3fn); b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=dev)
        fn = lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    else:
        fn = lambda: a @ b
    try:
        t = bench(fn, reps=5, warm=2)
        gemm.append({"m": m, "n": n, "k": k, "prec": prec, "s": t, "tflops": 2*m*n*k/t/1e12})
    except Exception as ex:
        gemm.append({"m": m, "n": n, "k": k, "prec": prec, "error": str(ex)[:200]})
res["gemm"] = gemm
print("gemm sweep", len(gemm), time.time()-t0, smi(), flush=True)
json.dump(res, open(f"{OUT}/h100.json", "w"))

# 2. attention fwd+bwd (causal), per backend
from torch.nn.attention import sdpa_kernel, SDPBackend
att = []
for (b, hq, hkv, s, d) in [(1, 32, 8, 8192, 128), (2, 32, 8, 8192, 128), (1, 32, 8, 4096, 128), (4, 32, 8, 2048, 128),
                           (1, 16, 16, 4096, 128), (2, 8, 8, 8192, 128), (1, 64, 8, 8192, 128), (4, 16, 16, 2048, 128)]:
    q = torch.randn(b, hq, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(b, hkv, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(b, hkv, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
    go = torch.randn(b, hq, s, d, device=dev, dtype=torch.bfloat16)
    for be in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
        def fwd():
            with sdpa_kernel(be):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hq != hkv)
        def fb():
            o = fwd(); o.backward(go)
        try:
            tf = bench(fwd); tfb = bench(fb)
            flops_f = 4 * b * hq * s * s * d / 2  # causal: half
            att.append({"b": b, "hq": hq, "hkv": hkv, "s": s, "d": d, "backend": str(be), "fwd_s": tf, "fwdbwd_s": tfb,
                        "fwd_tflops": flops_f/tf/1e12, "fwdbwd_tflops": 3.5*flops_f/tfb/1e12})
        except Exception as ex:
            att.append({"b": b, "hq": hq, "s": s, "backend": str(be), "error": str(ex)[:200]})
res["attention"] = att
print("attention", [(a.get("backend"), round(a.get("fwdbwd_tflops", 0))) for a in att], flush=True)
json.dump(res, open(f"{OUT}/h100.json", "w"))

# 3. decode GEMMs: weight stream share
dec = []
for (n, k) in [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (2560, 8192), (8192, 1024), (7168, 8192),
               (8192, 3584)]:
    w = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
    for m in (1, 8, 32, 64, 128, 256, 512, 1024):
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        t = bench(lambda: x @ w, reps=50, warm=5)
        dec.append({"m": m, "n": n, "k": k, "s": t, "gb_s": 2*(k*n + m*k + m*n)/t/1e9, "tflops": 2*m*n*k/t/1e12})
res["decode_gemm"] = dec
print("decode", [(d["m"], d["n"], round(d["gb_s"])) for d in dec if d["n"] == 28672], flush=True)
json.dump(res, open(f"{OUT}/h100.json", "w"))

# 4. a Llama layer fwd+bwd, eager vs compiled (no activation checkpointing)
class Layer(torch.nn.Module):
    def __init__(self, h, f, hq, hkv, d):
        super().__init__()
        self.hq, self.hkv, self.d = hq, hkv, d
        self.n1 = torch.nn.RMSNorm(h); self.n2 = torch.nn.RMSNorm(h)
        self.qkv = torch.nn.Linear(h, (hq + 2*hkv)*d, bias=False); self.o = torch.nn.Linear(hq*d, h, bias=False)
        self.up = torch.nn.Linear(h, 2*f, bias=False); self.down = torch.nn.Linear(f, h, bias=False)
    def forward(self, x, cos, sin):
        b, s, h = x.shape
        y = self.qkv(self.n1(x)).view(b, s, self.hq + 2*self.hkv, self.d)
        q, k, v = y.split([self.hq, self.hkv, self.hkv], dim=2)
        def rope(t):
            t1, t2 = t.chunk(2, -1)
            return torch.cat([t1*cos - t2*sin, t2*cos + t1*sin], -1)
        q, k = rope(q), rope(k)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                                           enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, -1))
        g, u = self.up(self.n2(x)).chunk(2, -1)
        return x + self.down(F.silu(g) * u)

layers = []
for name, (h, f, hq, hkv, d, b, s) in {"llama3-8b-mb1-s8192": (4096, 14336, 32, 8, 128, 1, 8192),
                                       "llama3-8b-mb2-s8192": (4096, 14336, 32, 8, 128, 2, 8192),
                                       "llama3-8b-mb4-s2048": (4096, 14336, 32, 8, 128, 4, 2048),
                                       "llama3-70b-tp4-mb1-s8192": (8192, 28672//4, 64//4, 8//4, 128, 1, 8192),
                                       "nanotron-1p34b-mb4-s4096": (2048, 8192, 32, 32, 64, 4, 4096),
                                       "nanotron-3p57b-mb2-s4096": (3072, 8192, 32, 32, 96, 2, 4096)}.items():
    for mode in ("eager", "compile"):
        try:
            m = Layer(h, f, hq, hkv, d).to(dev, torch.bfloat16)
            x = torch.randn(b, s, h, device=dev, dtype=torch.bfloat16, requires_grad=True)
            ang = torch.randn(s, 1, d//2, device=dev, dtype=torch.bfloat16)
            cos, sin = ang.cos(), ang.sin()
            g = torch.randn_like(x)
            run = torch.compile(m) if mode == "compile" else m
            def step():
                out = run(x, cos, sin); out.backward(g)
            t = bench(step, reps=10, warm=5)
            linear = 2 * b * s * (h*(hq+2*hkv)*d + hq*d*h + h*2*f + f*h) * 3
            attn = 4 * b * hq * s * s * d / 2 * 3.5
            layers.append({"name": name, "mode": mode, "s": t, "model_tflops": (linear + attn)/t/1e12,
                           "linear_flops": linear, "attn_flops": attn, "tokens": b*s, "h": h})
            print(layers[-1], flush=True)
        except Exception as ex:
            layers.append({"name": name, "mode": mode, "error": str(ex)[:300]}); print(ex, flush=True)
res["layers"] = layers
res["smi_end"] = smi()
json.dump(res, open(f"{OUT}/h100.json", "w"))
print("done", flush=True)
