#!/usr/bin/env python3
"""MoE router logits through gemmkit.linear (bf16 in, f32 out) against F.linear.

    python python/examples/router_logits.py                      # cuda, gpt-oss-like 2880 -> 128
    python python/examples/router_logits.py --device cpu --tokens 4

Prints the largest difference from an fp64 reference for gemmkit (f32 out) and F.linear (bf16
out, and f32 of f32 inputs), whether the top-k experts agree, and, on CUDA, the time per call.
"""

import argparse

import torch
import torch.nn.functional as F

import gemmkit


def time_us(call, device: str, iters: int = 2000) -> float:
    if device == "cpu":
        return float("nan")
    for _ in range(100):
        call()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        call()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=2880)
    parser.add_argument("--experts", type=int, default=128)
    parser.add_argument("--top-k", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    device = args.device
    x = torch.randn(args.tokens, args.hidden, device=device).bfloat16()
    w = (torch.randn(args.experts, args.hidden, device=device) / args.hidden**0.5).bfloat16()
    b = torch.randn(args.experts, device=device).bfloat16()
    reference = F.linear(x.double(), w.double(), b.double())
    ours = gemmkit.linear(x, w, b, out_dtype=torch.float32)
    theirs_bf16 = F.linear(x, w, b)
    theirs_f32 = F.linear(x.float(), w.float(), b.float())
    top = reference.topk(args.top_k, dim=-1).indices
    print(f"router logits {args.tokens} x {args.experts} x {args.hidden} on {device}")
    for name, out in [("gemmkit.linear (f32 out)", ours), ("F.linear (bf16)", theirs_bf16),
                      ("F.linear (f32 of f32 inputs)", theirs_f32)]:
        diff = (out.double() - reference).abs().max().item()
        agree = torch.equal(out.double().topk(args.top_k, dim=-1).indices, top)
        print(f"  {name:30s} max |diff| {diff:.3e}  top-{args.top_k} agrees: {agree}")
    if device == "cpu":
        return
    print(f"  gemmkit.linear            {time_us(lambda: gemmkit.linear(x, w, b, out_dtype=torch.float32), device):8.2f} us/call (eager loop, CUDA events)")
    print(f"  F.linear (bf16)           {time_us(lambda: F.linear(x, w, b), device):8.2f} us/call (eager loop, CUDA events)")


if __name__ == "__main__":
    main()
