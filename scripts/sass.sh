#!/usr/bin/env bash
# SASS of gemmkit's CUDA kernels on a machine without a GPU: the kernels of a built object or
# binary whose (demangled) names match a regular expression, each with a digest of what the
# compiled code does that ptxas's summary hides: registers and stack, local-memory instructions
# (STL / LDL: spills, and the return addresses saved around calls of the 64-bit division routine),
# calls, warpgroup MMAs (HGMMA) and their arrives and waits (WARPGROUP.ARRIVE / DEPBAR), and
# mma.sync (HMMA) and ldmatrix (LDSM) counts. --full also prints the SASS itself.
# The disassembler is NVIDIA's cuobjdump with nvdisasm from PyPI (nvidia-cuda-cuobjdump and
# nvidia-cuda-nvdisasm, pinned below; they read the sm_90a code this build emits), installed into
# .deps/sass-tools on first use.
# Usage: bash scripts/sass.sh PATTERN [FILE] [--full]
#   FILE: an object or binary built here (default: the linear launcher's object in build/);
#   e.g. bash scripts/sass.sh 'linear_wgmma_kernel<__nv_bfloat16, __nv_bfloat16, 96'
set -euo pipefail
cd "$(dirname "$0")/.."
pattern=${1:?usage: bash scripts/sass.sh PATTERN [FILE] [--full]}
file=build/CMakeFiles/gemmkit.dir/src/cuda/linear/linear_launch.cu.o
full=0
for arg in "${@:2}"; do
  if [ "$arg" = --full ]; then full=1; else file=$arg; fi
done
[ -f "$file" ] || { echo "sass.sh: $file: no such file (build first: bash scripts/build.sh)" >&2; exit 2; }
tools=.deps/sass-tools
bin=$tools/nvidia/cu13/bin
if [ ! -x "$bin/cuobjdump" ] || [ ! -x "$bin/nvdisasm" ]; then
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$tools" "nvidia-cuda-cuobjdump==13.5.37" "nvidia-cuda-nvdisasm==13.5.37" >&2
  chmod +x "$bin/cuobjdump" "$bin/nvdisasm"
fi
export PATH=$PWD/$bin:$PATH
sass=$(mktemp)
usage=$(mktemp)
trap 'rm -f "$sass" "$usage"' EXIT
cuobjdump -sass "$file" >"$sass"
cuobjdump -res-usage "$file" >"$usage"
python3 - "$pattern" "$sass" "$usage" "$full" <<'EOF'
import re, subprocess, sys

pattern, sass_path, usage_path, full = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
functions, name = {}, None
with open(sass_path) as f:
    for line in f:
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            name = m.group(1)
            functions[name] = []
        elif name is not None and "/*" in line:
            functions[name].append(line.rstrip())
usage = {}
with open(usage_path) as f:
    lines = f.read().splitlines()
for i, line in enumerate(lines):
    m = re.match(r"\s*Function (\S+):", line)
    if m and i + 1 < len(lines):
        usage[m.group(1)] = lines[i + 1].strip()
names = list(functions)
demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                           text=True).stdout.splitlines() if names else []
selected = [(n, d) for n, d in zip(names, demangled) if re.search(pattern, d) or re.search(pattern, n)]
if not selected:
    sys.exit(f"sass.sh: no kernel matches {pattern!r} ({len(names)} kernels in the file)")
counted = [("STL", r"\bSTL\b"), ("LDL", r"\bLDL\b"), ("CALL", r"\bCALL\b"), ("HGMMA", r"\bHGMMA\b"),
           ("WG.ARRIVE", r"WARPGROUP\.ARRIVE"), ("WG.DEPBAR", r"WARPGROUP\.DEPBAR"),
           ("HMMA", r"\bHMMA\b"), ("LDSM", r"\bLDSM\b")]
for n, d in selected:
    code = [l for l in functions[n] if re.search(r"/\*[0-9a-f]{4,}\*/", l)]
    res = usage.get(n, "")
    regs = re.search(r"REG:(\d+)", res)
    stack = re.search(r"STACK:(\d+)", res)
    counts = ", ".join(f"{label} {sum(1 for l in code if re.search(rx, l))}" for label, rx in counted)
    print(f"{d}\n  {len(code)} instructions; registers {regs.group(1) if regs else '?'}, "
          f"stack {stack.group(1) if stack else '?'} bytes; {counts}")
    if full:
        print("\n".join(functions[n]))
EOF
