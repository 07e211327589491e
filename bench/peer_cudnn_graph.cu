// cuDNN through its graph (backend) API as a second conv peer. The legacy API (peer_cudnn.cu)
// offers only the two implicit-GEMM algorithms for NHWC bf16, which run small-batch, strided and
// depthwise convolutions up to 10x slower than the engines PyTorch's cuDNN path reaches (the
// figures of bench/peers/h200-conv.csv). Like PyTorch with cudnn.benchmark, this peer asks
// the heuristics (mode A, else fallback) for engine configurations, builds the first few, times
// each on the real operands and keeps the fastest.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench/peer.h"
#include "src/cuda/common/cudnn_types.h"
#include "src/cuda/common/gpu_timing.h"

namespace gemmkit::bench {
namespace {

constexpr int kMaxCandidates = 8;                                 // engine configs tried
constexpr std::size_t kMaxWorkspaceBytes = std::size_t{1} << 30;  // larger plans are skipped
constexpr int kTuneWarmups = 2, kTuneRuns = 5;
constexpr int kTuneDelayUs = 1000;
enum : int64_t { kUidX = 1, kUidW = 2, kUidY = 3 };

void check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw Error(std::string("cuDNN graph API ") + what + ": " + cudnnGetErrorString(status));
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(status));
}

// An owned cudnnBackendDescriptor_t.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    check(cudnnBackendCreateDescriptor(type, &descriptor_), "cudnnBackendCreateDescriptor");
  }
  Descriptor(Descriptor&& other) noexcept
      : descriptor_(std::exchange(other.descriptor_, nullptr)) {}
  Descriptor& operator=(Descriptor&&) = delete;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (descriptor_) cudnnBackendDestroyDescriptor(descriptor_);
  }

  cudnnBackendDescriptor_t get() const { return descriptor_; }

  template <class T>
  Descriptor& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                  const T* values, int64_t count = 1) {
    check(cudnnBackendSetAttribute(descriptor_, name, type, count, values),
          "cudnnBackendSetAttribute");
    return *this;
  }
  Descriptor& set(cudnnBackendAttributeName_t name, const Descriptor& value) {
    const cudnnBackendDescriptor_t raw = value.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &raw);
  }
  // Finalizing is where cuDNN judges the configuration; callers may treat failure as "skip".
  cudnnStatus_t try_finalize() { return cudnnBackendFinalize(descriptor_); }
  void finalize(const char* what) { check(try_finalize(), what); }

 private:
  cudnnBackendDescriptor_t descriptor_ = nullptr;
};

// NHWC strides for dims given in cuDNN's (n, c, spatial...) order.
std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size());
  int64_t stride = 1;
  strides[1] = stride;
  stride *= dims[1];
  for (std::size_t d = dims.size() - 1; d >= 2; --d) {
    strides[d] = stride;
    stride *= dims[d];
  }
  strides[0] = stride;
  return strides;
}

Descriptor make_tensor(int64_t uid, cudnnDataType_t type, const std::vector<int64_t>& dims) {
  const auto strides = channels_last_strides(dims);
  const int64_t alignment = 16;
  const auto count = static_cast<int64_t>(dims.size());
  Descriptor tensor(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  tensor.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), count)
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), count)
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment);
  tensor.finalize("finalize tensor");
  return tensor;
}

bool verbose() {
  const char* value = std::getenv("GEMMKIT_BENCH_VERBOSE");
  return value && *value == '1';
}

class CudnnGraphConvPeer final : public ConvPeer {
 public:
  explicit CudnnGraphConvPeer(Device device) {
    check(cudaSetDevice(device.index), "cudaSetDevice");
    check(cudnnCreate(&handle_), "cudnnCreate");
    if (cudaEventCreate(&start_) != cudaSuccess || cudaEventCreate(&stop_) != cudaSuccess) {
      cudnnDestroy(handle_);
      throw Error("cuDNN graph peer: cudaEventCreate failed");
    }
  }

  ~CudnnGraphConvPeer() override {
    release_plan();
    if (workspace_) cudaFree(workspace_);
    if (stop_) cudaEventDestroy(stop_);
    if (start_) cudaEventDestroy(start_);
    cudnnDestroy(handle_);
  }

  std::string name() const override { return "cudnn_graph"; }

  std::string unsupported_reason(const ConvRow& row) const override {
    for (int d = 0; d < row.spatial_dims(); ++d) {
      if (row.idil[d] != 1) return "cuDNN forward conv has no input dilation (transposed conv)";
      if (row.pad_lo[d] < 0 || row.pad_hi[d] < 0) return "cuDNN has no negative padding";
    }
    if (row.bias) return "bias is not benchmarked with cuDNN";
    return "";
  }

  void prepare(const ConvRow& row, const ConvOperands& operands, Stream stream) override {
    release_plan();
    check(cudnnSetStream(handle_, stream), "cudnnSetStream");
    const cudnnDataType_t type = gemmkit::cuda::cudnn_data_type(row.dtype);

    // cuDNN wants at least 2 spatial dims: a 1-D conv gets a leading unit dim.
    const bool one_d = row.spatial_dims() == 1;
    const auto with_unit = [one_d](std::vector<int64_t> values, int64_t unit) {
      if (one_d) values.insert(values.begin(), unit);
      return values;
    };
    const auto in = with_unit(row.in_spatial, 1), kernel = with_unit(row.kernel, 1);
    const auto out = with_unit(conv_out_spatial(row), 1);
    const auto stride = with_unit(row.stride, 1), dilation = with_unit(row.kdil, 1);
    const auto pad_lo = with_unit(row.pad_lo, 0), pad_hi = with_unit(row.pad_hi, 0);
    const int64_t spatial = static_cast<int64_t>(in.size());

    std::vector<int64_t> x_dims{row.n, row.c}, w_dims{row.o, row.c / row.groups},
        y_dims{row.n, row.o};
    x_dims.insert(x_dims.end(), in.begin(), in.end());
    w_dims.insert(w_dims.end(), kernel.begin(), kernel.end());
    y_dims.insert(y_dims.end(), out.begin(), out.end());
    // Groups are implied: x has c channels, w has c / groups.
    const Descriptor x = make_tensor(kUidX, type, x_dims);
    const Descriptor w = make_tensor(kUidW, type, w_dims);
    const Descriptor y = make_tensor(kUidY, type, y_dims);

    Descriptor conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = row.flip ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION;
    conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute)
        .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode)
        .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &spatial)
        .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, dilation.data(), spatial)
        .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, stride.data(), spatial)
        .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, pad_lo.data(), spatial)
        .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, pad_hi.data(), spatial);
    conv.finalize("finalize convolution");

    Descriptor operation(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    const float alpha = 1.0f, beta = 0.0f;
    operation.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, &alpha)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, &beta);
    operation.finalize("finalize convolution operation");

    Descriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle_)
        .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, operation);
    graph.finalize("finalize operation graph");

    std::vector<Candidate> candidates = build_candidates(graph, CUDNN_HEUR_MODE_A);
    if (candidates.empty()) candidates = build_candidates(graph, CUDNN_HEUR_MODE_FALLBACK);
    if (candidates.empty()) throw Error("cuDNN graph API: no engine configuration builds");

    std::size_t workspace_bytes = 0;
    for (const auto& candidate : candidates)
      workspace_bytes = std::max(workspace_bytes, candidate.workspace_bytes);
    ensure_workspace(workspace_bytes);

    // Keep the fastest on the real operands (the first that runs at all, if timing fails).
    double best_us = 0;
    std::size_t best = candidates.size();
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      plan_ = candidates[i].plan.get();
      double us = 0;
      try {
        us = time_plan(operands, stream);
      } catch (const std::exception& error) {
        if (verbose())
          std::fprintf(stderr, "\n  cudnn_graph %s: config %zu failed: %s", row.name.c_str(), i,
                       error.what());
        cudaGetLastError();
        continue;
      }
      if (verbose())
        std::fprintf(stderr, "\n  cudnn_graph %s: config %zu %.2f us, workspace %zu",
                     row.name.c_str(), i, us, candidates[i].workspace_bytes);
      if (best == candidates.size() || us < best_us) {
        best = i;
        best_us = us;
      }
    }
    if (verbose()) std::fprintf(stderr, "\n");
    plan_ = nullptr;
    variant_packs_.clear();
    if (best == candidates.size()) throw Error("cuDNN graph API: no engine configuration runs");
    owned_plan_ = std::make_unique<Descriptor>(std::move(candidates[best].plan));
    plan_ = owned_plan_->get();
  }

  void launch(const ConvOperands& operands, Stream stream) override {
    check(cudnnSetStream(handle_, stream), "cudnnSetStream");
    check(cudnnBackendExecute(handle_, plan_, variant_pack(operands)), "cudnnBackendExecute");
  }

 private:
  struct Candidate {
    Descriptor plan;
    std::size_t workspace_bytes;
  };

  std::vector<Candidate> build_candidates(const Descriptor& graph, cudnnBackendHeurMode_t mode) {
    Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
    std::vector<Candidate> candidates;
    if (heuristics.try_finalize() != CUDNN_STATUS_SUCCESS) return candidates;
    int64_t available = 0;
    check(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &available, nullptr),
          "heuristic result count");
    std::vector<Descriptor> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < available; ++i) {
      configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(configs.back().get());
    }
    int64_t returned = 0;
    check(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, available, &returned, raw.data()),
          "heuristic results");
    for (int64_t i = 0; i < returned && static_cast<int>(candidates.size()) < kMaxCandidates; ++i) {
      Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle_)
          .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[static_cast<std::size_t>(i)]);
      if (plan.try_finalize() != CUDNN_STATUS_SUCCESS) continue;  // config not buildable here
      int64_t workspace = 0, count = 0;
      check(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                     CUDNN_TYPE_INT64, 1, &count, &workspace),
            "plan workspace size");
      if (workspace < 0 || static_cast<std::size_t>(workspace) > kMaxWorkspaceBytes) continue;
      candidates.push_back({std::move(plan), static_cast<std::size_t>(workspace)});
    }
    return candidates;
  }

  double time_plan(const ConvOperands& operands, Stream stream) {
    for (int i = 0; i < kTuneWarmups; ++i) launch(operands, stream);
    // The GPU waits while the host enqueues the timed runs: their enqueue cost is not timed.
    cuda::launch_gpu_delay(stream, kTuneDelayUs);
    check(cudaGetLastError(), "GPU delay");
    check(cudaEventRecord(start_, stream), "cudaEventRecord");
    for (int i = 0; i < kTuneRuns; ++i) launch(operands, stream);
    check(cudaEventRecord(stop_, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return 1000.0 * static_cast<double>(ms) / kTuneRuns;
  }

  // Variant packs bind the data pointers; one per operand set (cold-L2 copies), made once.
  cudnnBackendDescriptor_t variant_pack(const ConvOperands& operands) {
    const auto key = std::make_tuple(operands.x, operands.weight, operands.out);
    auto it = variant_packs_.find(key);
    if (it == variant_packs_.end()) {
      const int64_t uids[3] = {kUidX, kUidW, kUidY};
      void* pointers[3] = {const_cast<void*>(operands.x), const_cast<void*>(operands.weight),
                           operands.out};
      Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids, 3)
          .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers, 3)
          .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace_);
      pack.finalize("finalize variant pack");
      it = variant_packs_.emplace(key, std::move(pack)).first;
    }
    return it->second.get();
  }

  void ensure_workspace(std::size_t bytes) {
    if (bytes <= workspace_capacity_) return;
    if (workspace_) cudaFree(workspace_);
    workspace_ = nullptr;
    workspace_capacity_ = 0;
    check(cudaMalloc(&workspace_, bytes), "cudaMalloc (cuDNN workspace)");
    workspace_capacity_ = bytes;
    variant_packs_.clear();  // they point at the old workspace
  }

  void release_plan() {
    variant_packs_.clear();
    owned_plan_.reset();
    plan_ = nullptr;
  }

  cudnnHandle_t handle_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::unique_ptr<Descriptor> owned_plan_;
  cudnnBackendDescriptor_t plan_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_capacity_ = 0;
  std::map<std::tuple<const void*, const void*, void*>, Descriptor> variant_packs_;
};

}  // namespace

std::unique_ptr<ConvPeer> make_cudnn_graph_peer(Device device) {
  return std::make_unique<CudnnGraphConvPeer>(device);
}

}  // namespace gemmkit::bench
