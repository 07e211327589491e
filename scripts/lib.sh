# Sourced by the GPU-machine scripts: the --out option and the cuDNN library path.

# take_out_option ARGS...: sets `out_dir` to the value of --out DIR / --out=DIR (default ./out, made
# absolute and created) and `rest` to the other arguments, in order. Usage:
#   take_out_option "$@"; set -- "${rest[@]+"${rest[@]}"}"
take_out_option() {
  out_dir=./out
  rest=()
  while [ $# -gt 0 ]; do
    case $1 in
    --out)
      [ $# -ge 2 ] || { echo "--out needs a folder" >&2; exit 2; }
      out_dir=$2
      shift 2
      ;;
    --out=*)
      out_dir=${1#--out=}
      shift
      ;;
    *)
      rest+=("$1")
      shift
      ;;
    esac
  done
  mkdir -p "$out_dir" && out_dir=$(cd "$out_dir" && pwd)
}

# Puts the cuDNN of the Python package nvidia-cudnn (when installed) on LD_LIBRARY_PATH and sets
# cudnn_root to its folder ("" when absent: the build then looks for cuDNN in the CUDA toolkit).
use_python_cudnn() {
  cudnn_root=$(python3 -c "import nvidia.cudnn as m; print(m.__path__[0])" 2>/dev/null || true)
  export LD_LIBRARY_PATH=${cudnn_root:+$cudnn_root/lib:}${LD_LIBRARY_PATH:-}
}
