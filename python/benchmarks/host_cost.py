#!/usr/bin/env python3
"""Host (CPU) cost per call of gemmkit's linear through torch, against F.linear.

Eager calls, no CUDA graph: a loop of `--calls` back-to-back calls on the current stream, timed on
the host (perf_counter around the loop, the GPU synchronized before and after it but not inside),
so the figure is the CPU time a call costs the caller while the GPU keeps up (the kernels of this
shape run in about 1.5 us). The median of `--repeats` loops is printed, in microseconds per call.

`--device cpu --n 0` times the same calls on CPU tensors with an empty batch: every argument is
converted and validated in full and nothing is computed, so the figure is the op's overhead
(dispatch, argument conversion, validation, output allocation) without a GPU; the CUDA-only parts
(stream lookup, device guard, the kernel choice and launch) are not in it.

    python python/benchmarks/host_cost.py            # 8 x 128 x 2880, bf16, bias, f32 out
    python python/benchmarks/host_cost.py --n 1 --m 4096 --k 4096 --out-dtype bf16
    python python/benchmarks/host_cost.py --device cpu --n 0
"""

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import gemmkit

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def per_call_us(call, calls: int, repeats: int, synchronize) -> float:
    for _ in range(max(100, calls // 10)):  # warm-up: selection caches, allocator, lazy init
        call()
    synchronize()
    samples = []
    for _ in range(repeats):
        synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        elapsed = time.perf_counter() - start
        synchronize()
        samples.append(elapsed / calls * 1e6)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--m", type=int, default=128)
    parser.add_argument("--k", type=int, default=2880)
    parser.add_argument("--dtype", choices=DTYPES, default="bf16")
    parser.add_argument("--out-dtype", choices=DTYPES, default="f32")
    parser.add_argument("--no-bias", action="store_true")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    device = args.device
    if device == "cuda":
        if not torch.cuda.is_available() or not gemmkit.built_with_cuda():
            print("host_cost: needs a CUDA device and gemmkit's CUDA backend", file=sys.stderr)
            return 1
        synchronize, device_name = torch.cuda.synchronize, torch.cuda.get_device_name()
    else:
        synchronize, device_name = (lambda: None), "cpu"
    dtype, out_dtype = DTYPES[args.dtype], DTYPES[args.out_dtype]
    x = torch.randn(args.n, args.k, device=device).to(dtype)
    w = torch.randn(args.m, args.k, device=device).to(dtype)
    bias = None if args.no_bias else torch.randn(args.m, device=device).to(dtype)
    out = torch.empty(args.n, args.m, device=device, dtype=out_dtype)
    op = torch.ops.gemmkit.linear.default
    op_out = torch.ops.gemmkit.linear_out.default
    rows = [
        ("torch.ops.gemmkit.linear", lambda: op(x, w, bias, out_dtype, "", -1, None)),
        ("torch.ops.gemmkit.linear_out", lambda: op_out(x, w, bias, out, "", -1, None)),
        ("gemmkit.linear", lambda: gemmkit.linear(x, w, bias, out_dtype=out_dtype)),
        ("gemmkit.linear(out=)", lambda: gemmkit.linear(x, w, bias, out=out)),
        (f"F.linear ({args.dtype} out)", lambda: F.linear(x, w, bias)),
        # The floor of a torch op that launches one kernel and allocates nothing.
        ("out.zero_() (torch, one kernel)", lambda: out.zero_()),
    ]
    print(f"host cost per call, {args.n} x {args.m} x {args.k} {args.dtype}"
          f"{'' if bias is None else ' + bias'} -> {args.out_dtype}, torch {torch.__version__}, "
          f"{device_name}")
    for name, call in rows:
        print(f"  {name:32s} {per_call_us(call, args.calls, args.repeats, synchronize):7.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
