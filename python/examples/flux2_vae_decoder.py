#!/usr/bin/env python3
"""A FLUX.2-style VAE decoder stack with every convolution through gemmkit, against torch/cuDNN.

The layers of the conv-flux2-vae suites (36 convolutions: a 32-channel latent, conv_in to 512
channels, a mid block and four up blocks of three residual blocks, nearest-neighbour 2x
upsampling convs, widths 512, 512, 256, 128, conv_out to RGB), with random weights; GroupNorm,
SiLU and the upsampling stay in torch. The same model is run twice: as torch built it (F.conv2d,
cuDNN on CUDA) and after gemmkit.patch (every conv through gemmkit), both on channels-last bf16
activations. The mid block's attention is left out (it holds no convolution).

    python python/examples/flux2_vae_decoder.py --size 1024          # the 1024x1024 suite's shapes
    python python/examples/flux2_vae_decoder.py --size 256 --graph   # timed by CUDA graph replays
    python python/examples/flux2_vae_decoder.py --device cpu --size 64 --width-divisor 16

Prints the time of a decode for each (median of --iters, CUDA events) and the largest difference
between the two outputs, absolute and relative to the largest output magnitude.
"""

import argparse
import copy
import statistics

import torch
import torch.nn.functional as F
from torch import nn

import gemmkit


class ResBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(32, c_in, eps=1e-6)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.norm2 = nn.GroupNorm(32, c_out, eps=1e-6)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1)
        self.shortcut = nn.Conv2d(c_in, c_out, 1) if c_in != c_out else nn.Identity()

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return self.shortcut(x) + h


class Upsample(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class Decoder(nn.Module):
    def __init__(self, latent: int = 32, widths=(512, 512, 256, 128), blocks: int = 3):
        super().__init__()
        self.post_quant_conv = nn.Conv2d(latent, latent, 1)
        self.conv_in = nn.Conv2d(latent, widths[0], 3, padding=1)
        self.mid = nn.Sequential(ResBlock(widths[0], widths[0]), ResBlock(widths[0], widths[0]))
        ups = []
        c = widths[0]
        for i, width in enumerate(widths):
            layers = []
            for _ in range(blocks):
                layers.append(ResBlock(c, width))
                c = width
            if i + 1 < len(widths):
                layers.append(Upsample(c))
            ups.append(nn.Sequential(*layers))
        self.up = nn.Sequential(*ups)
        self.norm_out = nn.GroupNorm(32, c, eps=1e-6)
        self.conv_out = nn.Conv2d(c, 3, 3, padding=1)

    def forward(self, z):
        h = self.conv_in(self.post_quant_conv(z))
        h = self.up(self.mid(h))
        return self.conv_out(F.silu(self.norm_out(h)))


def time_ms(call, device: str, iters: int, graph: bool) -> float:
    if device == "cpu":
        import time
        samples = []
        for _ in range(iters):
            start = time.perf_counter()
            call()
            samples.append((time.perf_counter() - start) * 1e3)
        return statistics.median(samples)
    call()  # first calls: algorithm choices, workspaces
    torch.cuda.synchronize()
    run = call
    if graph:
        cuda_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(cuda_graph):
            call()
        run = cuda_graph.replay
    samples = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--size", type=int, default=1024, help="image size (latent = size / 8)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16")
    parser.add_argument("--width-divisor", type=int, default=1,
                        help="divide every width by this (a small smoke run)")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--graph", action="store_true", help="time CUDA graph replays")
    args = parser.parse_args()
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[args.dtype]
    torch.manual_seed(0)
    widths = tuple(max(32, w // args.width_divisor) for w in (512, 512, 256, 128))
    reference = Decoder(widths=widths).to(args.device, dtype).eval()
    reference = reference.to(memory_format=torch.channels_last)
    ours = gemmkit.patch(copy.deepcopy(reference))
    convs = sum(isinstance(m, gemmkit.nn.Conv2d) for m in ours.modules())
    latent = torch.randn(args.batch, 32, args.size // 8, args.size // 8, device=args.device)
    latent = latent.to(dtype).to(memory_format=torch.channels_last)
    with torch.inference_mode():
        expected = reference(latent)
        got = ours(latent)
        diff = (got.float() - expected.float()).abs().max().item()
        scale = expected.float().abs().max().item()
        torch_ms = time_ms(lambda: reference(latent), args.device, args.iters, args.graph)
        gemmkit_ms = time_ms(lambda: ours(latent), args.device, args.iters, args.graph)
    peer = "torch (cuDNN)" if args.device != "cpu" else "torch (CPU)"
    print(f"FLUX.2-style VAE decoder, {args.size}x{args.size}, batch {args.batch}, {args.dtype}, "
          f"widths {widths}, {convs} convs, {args.device}"
          f"{', CUDA graph replays' if args.graph else ', eager'}")
    print(f"  {peer:14s} {torch_ms:9.3f} ms")
    print(f"  gemmkit        {gemmkit_ms:9.3f} ms  ({torch_ms / gemmkit_ms:.2f}x)")
    print(f"  max |diff| {diff:.3e}  (relative to max |out| {scale:.3e}: {diff / max(scale, 1e-30):.2e})")
    print(f"  output {tuple(got.shape)}")


if __name__ == "__main__":
    main()
