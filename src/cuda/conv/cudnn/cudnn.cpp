// The cuDNN path of the CUDA convolution (contract in launch.h): a per-device cuDNN handle,
// a plan cache keyed by everything a plan depends on, engine choice by timing, and the call.
//
// Handle: one per device, created on first use; cudnnSetStream + cudnnBackendExecute (and the
// timing of candidates) run under the handle's mutex, since the stream is state of the handle.
// Plans: keyed by device, geometry, dims, strides, dtypes, pointer alignments, the workspace
// left for the engine and the mode. The first call of a key outside stream capture builds up to
// kMaxCandidates plans from cuDNN's heuristic mode A and up to kMaxCandidatesFromB more from
// mode B (else the fallback list), times each on the caller's stream behind a GPU delay (so the
// host's enqueue cost is not timed) and keeps the fastest; under capture (no timing possible) it
// takes the heuristic's first buildable engine and leaves the key to be timed by a later eager
// call. Deterministic mode takes the heuristic's first allowed precompiled engine, never timed,
// under capture or not (cudnn_engine_search in plan.h). Plans that ran are kept for the process: a
// captured CUDA graph may still launch their kernels. Workspace: the conv workspace of the GEMM
// paths (with_conv_workspace), laid out as [f32 scratch of the bias pass | the packed backward-data
// filter | cuDNN's workspace]; engines needing more than the budget left are skipped.
#include "cuda/conv/cudnn/launch.h"

#ifdef GEMMKIT_WITH_CUDNN
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "api/validate.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/cudnn_types.h"
#include "cuda/common/device_context.h"
#include "cuda/common/gpu_timing.h"
#include "cuda/conv/common/launch.h"
#include "cuda/conv/common/operands.h"
#include "cuda/conv/common/request.h"
#include "cuda/conv/cudnn/plan.h"
#include "cuda/conv/gemm/launch.h"
#endif

namespace gemmkit::cuda::conv_impl {

#ifndef GEMMKIT_WITH_CUDNN

namespace {
constexpr const char* kNotBuilt = "cuDNN not built (configure found no cuDNN)";
}  // namespace

std::string cudnn_unavailable_reason() {
  return kNotBuilt;
}

bool run_cudnn_path(const detail::ConvProblem&, const ConvConfig&, int, cudaStream_t, bool,
                    RunFailure& failure, std::string&) {
  failure.why = kNotBuilt;
  failure.pure = true;
  return false;
}

#else

namespace {

constexpr int kMaxDevices = 64;
constexpr int kMaxCandidates = 8;       // engine configurations of heuristic mode A timed
constexpr int kMaxCandidatesFromB = 4;  // more from mode B, when not among A's
constexpr int kTuneRuns = 10;           // timed runs per candidate, after one warm-up
// GPU wait ahead of each candidate's timed runs: longer than the host needs to enqueue them
// (cuDNN's execute costs several us of host time per call, more than a 10 us engine runs).
constexpr int kTuneDelayUs = 1000;
constexpr int kMaxNotes = 32;  // more than cuDNN 9 defines
// Alignment told to cuDNN: the largest any engine asks about.
constexpr int kMaxTensorAlignment = 16;
enum : int64_t { kUidX = 1, kUidW = 2, kUidY = 3 };

std::string status_text(cudnnStatus_t status) {
  return cudnnGetErrorString(status);
}

void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status != CUDNN_STATUS_SUCCESS) {
    throw Error(std::string("cuDNN error ") + status_text(status) + " in " + call + " at " + file +
                ":" + std::to_string(line));
  }
}

#define GEMMKIT_CUDNN_CHECK(call) check_cudnn((call), #call, __FILE__, __LINE__)

// An owned backend descriptor.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    GEMMKIT_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &raw_));
  }
  Descriptor(Descriptor&& other) noexcept : raw_(std::exchange(other.raw_, nullptr)) {}
  Descriptor& operator=(Descriptor&&) = delete;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (raw_ != nullptr) cudnnBackendDestroyDescriptor(raw_);
  }

  cudnnBackendDescriptor_t get() const { return raw_; }

  template <typename T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values,
           int64_t count = 1) {
    GEMMKIT_CUDNN_CHECK(cudnnBackendSetAttribute(raw_, name, type, count, values));
  }
  void set(cudnnBackendAttributeName_t name, const Descriptor& value) {
    const cudnnBackendDescriptor_t raw = value.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &raw);
  }
  // Finalizing is where cuDNN judges a configuration: callers decide whether failure is fatal.
  cudnnStatus_t try_finalize() { return cudnnBackendFinalize(raw_); }
  void finalize() { GEMMKIT_CUDNN_CHECK(try_finalize()); }

 private:
  cudnnBackendDescriptor_t raw_ = nullptr;
};

// ---- Handles ----------------------------------------------------------------------------------

struct DeviceHandle {
  std::mutex mutex;  // creation, and every set-stream + execute
  cudnnHandle_t handle = nullptr;
  bool tried = false;
  std::string why;  // why creation failed
};

DeviceHandle& device_handle(int device) {
  static std::array<DeviceHandle, kMaxDevices> handles;
  if (device < 0 || device >= kMaxDevices) {
    throw Error("gemmkit::conv: device cuda:" + std::to_string(device) + " is beyond the " +
                std::to_string(kMaxDevices) + " devices the cuDNN handles cover");
  }
  return handles[static_cast<std::size_t>(device)];
}

// The device's handle (the device is current), or null with `why`.
cudnnHandle_t handle_of(DeviceHandle& h, std::string& why) {
  std::lock_guard<std::mutex> lock(h.mutex);
  if (!h.tried) {
    h.tried = true;
    const RelaxedCaptureMode relaxed;  // a first call may come inside a capture
    const cudnnStatus_t status = cudnnCreate(&h.handle);
    if (status != CUDNN_STATUS_SUCCESS) {
      h.handle = nullptr;
      h.why = "cudnnCreate failed: " + status_text(status);
      cudaGetLastError();  // do not leave a sticky-looking error to the fallback path
    }
  }
  why = h.why;
  return h.handle;
}

// ---- The problem as cuDNN sees it -------------------------------------------------------------

struct TensorView {
  std::vector<int64_t> dims, strides;  // cuDNN order: (n or o, channels, spatial...)
  DType dtype = DType::f32;
  int64_t alignment = 1;
};

// gemmkit's (n, spatial..., c) as cuDNN's (n, c, spatial...); a 1-D problem gets a leading unit
// spatial dim, strided as if packed (stride of the next dim times its size).
TensorView channels_second(const int64_t* shape, const int64_t* strides, int rank, bool unit,
                           DType dtype, const void* data) {
  TensorView v;
  v.dims = {shape[0], shape[rank - 1]};
  v.strides = {strides[0], strides[rank - 1]};
  if (unit) {
    v.dims.push_back(1);
    v.strides.push_back(strides[1] * shape[1]);
  }
  for (int i = 1; i + 1 < rank; ++i) {
    v.dims.push_back(shape[i]);
    v.strides.push_back(strides[i]);
  }
  v.dtype = dtype;
  v.alignment = std::min(kMaxTensorAlignment, pointer_alignment(data));
  return v;
}

// The operation cuDNN runs: forward, x -> y; or backward-data (a transposed convolution,
// cudnn/plan.h's cudnn_dgrad_form), where gemmkit's x is cuDNN's dy, out is dx and w is the
// packed filter the call copies into the workspace.
struct CudnnProblem {
  TensorView x, w, y;
  int64_t spatial = 2;
  std::vector<int64_t> stride, dilation, pad_lo, pad_hi;
  bool dgrad = false;
  bool cross_correlation = true;
  bool f32_inputs = false;
};

// Strides of a packed row-major tensor of `shape` (the last dim fastest).
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

CudnnProblem describe(const detail::ConvProblem& p, const ConvConfig& c) {
  CudnnProblem q;
  const bool unit = p.spatial == 1;
  q.x = channels_second(p.x.shape, p.x.strides, p.x.rank, unit, p.x.dtype, p.x.data);
  if (c.cudnn_dgrad) {
    // The packed filter (c, kernel..., o / groups), cc fastest: cuDNN's (K, C/g, spatial...).
    std::vector<int64_t> shape{p.in_channels};
    for (int d = 0; d < p.spatial; ++d) shape.push_back(p.kernel_size[d]);
    shape.push_back(p.out_channels_per_group);
    const std::vector<int64_t> strides = row_major_strides(shape);
    // In place: w itself (its strides are these); else the copy at a kWorkspaceAlign offset.
    q.w = channels_second(shape.data(), strides.data(), p.spatial + 2, unit, p.weight.dtype,
                          c.dgrad_weight_in_place ? p.weight.data : nullptr);
    if (!c.dgrad_weight_in_place) q.w.alignment = kMaxTensorAlignment;
  } else {
    q.w = channels_second(p.weight.shape, p.weight.strides, p.weight.rank, unit, p.weight.dtype,
                          p.weight.data);
  }
  if (c.bias == BiasMode::scratch) {
    // The f32 scratch [positions][o], at the (256-byte aligned) start of the workspace.
    std::vector<int64_t> shape{p.batch};
    for (int d = 0; d < p.spatial; ++d) shape.push_back(p.out_size[d]);
    shape.push_back(p.out_channels);
    const std::vector<int64_t> strides = row_major_strides(shape);
    q.y = channels_second(shape.data(), strides.data(), p.spatial + 2, unit, DType::f32, nullptr);
    q.y.alignment = kMaxTensorAlignment;
  } else {
    q.y = channels_second(p.out.shape, p.out.strides, p.out.rank, unit, p.out.dtype, p.out.data);
  }
  if (unit) {
    q.stride.push_back(1);
    q.dilation.push_back(1);
    q.pad_lo.push_back(0);
    q.pad_hi.push_back(0);
  }
  CudnnDgradForm form;
  if (c.cudnn_dgrad) cudnn_dgrad_form(p, form);  // why_not_cudnn checked that there is one
  for (int d = 0; d < p.spatial; ++d) {
    q.stride.push_back(c.cudnn_dgrad ? form.stride[d] : p.stride[d]);
    q.dilation.push_back(p.kernel_dilation[d]);
    q.pad_lo.push_back(c.cudnn_dgrad ? form.pad_lo[d] : p.padding_lo[d]);
    q.pad_hi.push_back(c.cudnn_dgrad ? form.pad_hi[d] : p.padding_hi[d]);
  }
  q.spatial = static_cast<int64_t>(q.stride.size());
  q.dgrad = c.cudnn_dgrad;
  // Forward: gemmkit's flip is the true convolution. Backward-data: see cudnn_dgrad_form.
  q.cross_correlation = c.cudnn_dgrad ? form.cross_correlation : !p.flip;
  q.f32_inputs = p.x.dtype == DType::f32;
  return q;
}

using PlanKey = std::vector<int64_t>;

// `deterministic`: the mode's plans are kept apart (another engine filter, never timed).
PlanKey plan_key(int device, const CudnnProblem& q, int64_t engine_budget, bool deterministic) {
  PlanKey key{device,          q.spatial,     q.cross_correlation ? 1 : 0,
              q.dgrad ? 1 : 0, engine_budget, deterministic ? 1 : 0};
  for (const TensorView* t : {&q.x, &q.w, &q.y}) {
    key.push_back(static_cast<int64_t>(t->dtype));
    key.push_back(t->alignment);
    key.insert(key.end(), t->dims.begin(), t->dims.end());
    key.insert(key.end(), t->strides.begin(), t->strides.end());
  }
  for (const std::vector<int64_t>* v : {&q.stride, &q.dilation, &q.pad_lo, &q.pad_hi}) {
    key.insert(key.end(), v->begin(), v->end());
  }
  return key;
}

// ---- Graph, engines, plans --------------------------------------------------------------------

Descriptor make_tensor(int64_t uid, const TensorView& t) {
  Descriptor d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const cudnnDataType_t type = cudnn_data_type(t.dtype);
  const auto count = static_cast<int64_t>(t.dims.size());
  d.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type);
  d.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, t.dims.data(), count);
  d.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, t.strides.data(), count);
  d.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid);
  d.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &t.alignment);
  d.finalize();
  return d;
}

// Every descriptor of the operation graph, kept alive as long as plans built from it.
struct Graph {
  std::vector<Descriptor> parts;  // tensors, convolution, operation
  std::unique_ptr<Descriptor> graph;
};

std::shared_ptr<Graph> make_graph(cudnnHandle_t handle, const CudnnProblem& q) {
  auto g = std::make_shared<Graph>();
  g->parts.push_back(make_tensor(kUidX, q.x));
  g->parts.push_back(make_tensor(kUidW, q.w));
  g->parts.push_back(make_tensor(kUidY, q.y));
  Descriptor conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode =
      q.cross_correlation ? CUDNN_CROSS_CORRELATION : CUDNN_CONVOLUTION;
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute);
  conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode);
  conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &q.spatial);
  conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, q.dilation.data(), q.spatial);
  conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, q.stride.data(), q.spatial);
  conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, q.pad_lo.data(), q.spatial);
  conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, q.pad_hi.data(), q.spatial);
  conv.finalize();
  g->parts.push_back(std::move(conv));

  // The operation's attributes: gemmkit's x is dy of a backward-data, out is its dx.
  struct OperationAttributes {
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  };
  constexpr OperationAttributes kForward{CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                                         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                                         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                                         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                                         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                                         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
  constexpr OperationAttributes kBackwardData{CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
                                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
                                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                                              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
  const OperationAttributes& names = q.dgrad ? kBackwardData : kForward;
  const float alpha = 1.0f, beta = 0.0f;
  Descriptor op(q.dgrad ? CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
                        : CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  op.set(names.x, g->parts[0]);
  op.set(names.w, g->parts[1]);
  op.set(names.y, g->parts[2]);
  op.set(names.conv, g->parts[3]);
  op.set(names.alpha, CUDNN_TYPE_FLOAT, &alpha);
  op.set(names.beta, CUDNN_TYPE_FLOAT, &beta);
  op.finalize();
  g->parts.push_back(std::move(op));

  g->graph = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  g->graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
  g->graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, g->parts[4]);
  g->graph->finalize();
  return g;
}

// Whether an engine may serve (cudnn_engine_allowed in plan.h, on cuDNN's notes of it). The
// behavior notes are read only where they matter (not `allow_runtime_compiled`); notes that
// cannot be read count as runtime-compiled there. Sets `engine` to its global index.
bool engine_allowed(const Descriptor& config, bool f32_inputs, bool allow_runtime_compiled,
                    int64_t& engine) {
  Descriptor e(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = e.get();
  int64_t count = 0;
  GEMMKIT_CUDNN_CHECK(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &raw));
  GEMMKIT_CUDNN_CHECK(cudnnBackendGetAttribute(e.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                                               CUDNN_TYPE_INT64, 1, &count, &engine));
  std::array<cudnnBackendNumericalNote_t, kMaxNotes> notes{};
  int64_t note_count = 0;
  GEMMKIT_CUDNN_CHECK(cudnnBackendGetAttribute(e.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                               CUDNN_TYPE_NUMERICAL_NOTE, kMaxNotes, &note_count,
                                               notes.data()));
  CudnnEngineNotes n;
  for (int64_t i = 0; i < std::min<int64_t>(note_count, kMaxNotes); ++i) {
    switch (notes[static_cast<std::size_t>(i)]) {
      case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
        n.nondeterministic = true;
        break;
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
        n.down_converts_inputs = true;
        break;
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
        n.reduced_precision_reduction = true;
        break;
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
        n.tensor_core = true;
        break;
      default:
        break;
    }
  }
  if (!allow_runtime_compiled) {
    std::array<cudnnBackendBehaviorNote_t, kMaxNotes> behavior{};
    int64_t behavior_count = 0;
    if (cudnnBackendGetAttribute(e.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                 kMaxNotes, &behavior_count,
                                 behavior.data()) != CUDNN_STATUS_SUCCESS) {
      n.runtime_compiled = true;
    }
    for (int64_t i = 0; i < std::min<int64_t>(behavior_count, kMaxNotes); ++i) {
      if (behavior[static_cast<std::size_t>(i)] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) {
        n.runtime_compiled = true;
      }
    }
  }
  return cudnn_engine_allowed(n, f32_inputs, allow_runtime_compiled);
}

struct Plan {
  explicit Plan(Descriptor d) : plan(std::move(d)) {}
  Descriptor plan;
  int64_t workspace = 0;
  int64_t engine = -1;
  std::string identity;  // engine and knob settings: the same configuration from two heuristics
};

// The descriptors of array attribute `name` of `owner`, each created with `type` (cuDNN fills
// descriptors the caller made): a query of the count, then of the elements.
std::vector<Descriptor> descriptor_array(cudnnBackendDescriptor_t owner,
                                         cudnnBackendAttributeName_t name,
                                         cudnnBackendDescriptorType_t type) {
  int64_t count = 0;
  GEMMKIT_CUDNN_CHECK(
      cudnnBackendGetAttribute(owner, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<Descriptor> elements;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    elements.emplace_back(type);
    raw.push_back(elements.back().get());
  }
  int64_t returned = 0;
  if (count > 0) {
    GEMMKIT_CUDNN_CHECK(cudnnBackendGetAttribute(owner, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                                 &returned, raw.data()));
  }
  // Only the elements cuDNN filled (it may return fewer than it counted).
  while (static_cast<int64_t>(elements.size()) > returned) elements.pop_back();
  return elements;
}

// "engine:knob=value,...": two engine configurations with the same identity build the same plan.
std::string config_identity(const Descriptor& config, int64_t engine) {
  const std::vector<Descriptor> choices = descriptor_array(
      config.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
  std::vector<std::pair<int64_t, int64_t> > knobs;
  for (const Descriptor& element : choices) {
    cudnnBackendKnobType_t type{};
    int64_t value = 0, got = 0;
    const cudnnBackendDescriptor_t choice = element.get();
    GEMMKIT_CUDNN_CHECK(cudnnBackendGetAttribute(choice, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                                 CUDNN_TYPE_KNOB_TYPE, 1, &got, &type));
    GEMMKIT_CUDNN_CHECK(cudnnBackendGetAttribute(choice, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                                 CUDNN_TYPE_INT64, 1, &got, &value));
    knobs.emplace_back(static_cast<int64_t>(type), value);
  }
  std::sort(knobs.begin(), knobs.end());
  std::string identity = std::to_string(engine) + ":";
  for (const auto& [type, value] : knobs) {
    identity += std::to_string(type) + "=" + std::to_string(value) + ",";
  }
  return identity;
}

// Appends to `plans` up to `limit` more buildable plans of allowed engines (engine_allowed) that
// fit `engine_budget`, in the order of the heuristic `mode`; with `only_new`, none whose identity
// is in `plans` already (one heuristic lists an engine several times, with other knob settings).
// With `unsettled` (deterministic mode), a heuristic or plan that fails to build for a cause that
// is not pure (cudnn_refusal_is_pure) stops the search, its text in *unsettled: passing over it
// would let the process's state choose the engine.
void build_plans(cudnnHandle_t handle, const Graph& g, cudnnBackendHeurMode_t mode, bool f32_inputs,
                 bool allow_runtime_compiled, int64_t engine_budget, int limit, bool only_new,
                 std::vector<std::shared_ptr<Plan> >& plans, std::string* unsettled = nullptr) {
  const auto settled = [&](cudnnStatus_t status, const std::string& what) {
    if (unsettled == nullptr || cudnn_refusal_is_pure(static_cast<int>(status))) return true;
    *unsettled = what + " failed to build (" + status_text(status) + ")";
    return false;
  };
  const std::size_t end = plans.size() + static_cast<std::size_t>(limit);
  Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *g.graph);
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
  const cudnnStatus_t heuristic_status = heuristics.try_finalize();
  if (heuristic_status != CUDNN_STATUS_SUCCESS) {
    settled(heuristic_status, "cuDNN's heuristic");
    return;
  }
  const std::vector<Descriptor> configs = descriptor_array(
      heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  for (std::size_t i = 0; i < configs.size() && plans.size() < end; ++i) {
    const Descriptor& config = configs[i];
    int64_t engine = -1;
    if (!engine_allowed(config, f32_inputs, allow_runtime_compiled, engine)) continue;
    std::string identity = config_identity(config, engine);
    if (only_new && std::any_of(plans.begin(), plans.end(),
                                [&](const auto& known) { return known->identity == identity; })) {
      continue;
    }
    auto plan = std::make_shared<Plan>(Descriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
    plan->plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle);
    plan->plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
    const cudnnStatus_t status = plan->plan.try_finalize();
    if (status != CUDNN_STATUS_SUCCESS) {  // not buildable here
      if (!settled(status, "the plan of engine " + std::to_string(engine))) return;
      continue;
    }
    int64_t count = 0;
    GEMMKIT_CUDNN_CHECK(cudnnBackendGetAttribute(plan->plan.get(),
                                                 CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                 CUDNN_TYPE_INT64, 1, &count, &plan->workspace));
    if (plan->workspace < 0 || plan->workspace > engine_budget) continue;
    plan->engine = engine;
    plan->identity = std::move(identity);
    plans.push_back(std::move(plan));
  }
}

// ---- Plan cache -------------------------------------------------------------------------------

struct Entry {
  std::shared_ptr<Graph> graph;
  std::shared_ptr<Plan> chosen;  // null: no usable engine (`why`)
  bool final = false;            // timed (or nothing to time): never searched again
  std::string why;
  std::string how;  // how `chosen` was chosen
  // Every plan that ran for this key: CUDA graphs captured with them may still be replayed.
  std::vector<std::shared_ptr<Plan> > kept;
};

std::mutex g_cache_mutex;
std::map<PlanKey, std::shared_ptr<const Entry> >& plan_cache() {
  static std::map<PlanKey, std::shared_ptr<const Entry> > cache;
  return cache;
}

std::shared_ptr<const Entry> find_entry(const PlanKey& key) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  const auto it = plan_cache().find(key);
  return it == plan_cache().end() ? nullptr : it->second;
}

void store_entry(const PlanKey& key, std::shared_ptr<const Entry> entry) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  plan_cache()[key] = std::move(entry);
}

}  // namespace

std::string cudnn_unavailable_reason() {
  const size_t version = cudnnGetVersion();
  if (version < 90000 || version >= 100000) {
    return "the loaded cuDNN is version " + std::to_string(version) + ", this build needs 9.x";
  }
  return "";
}

bool run_cudnn_path(const detail::ConvProblem& p, const ConvConfig& c, int device,
                    cudaStream_t stream, bool deterministic, RunFailure& failure,
                    std::string& note) {
  std::string& why = failure.why;
  const bool autotune = parse_cudnn_autotune(detail::env_setting("GEMMKIT_CONV_CUDNN_AUTOTUNE"));
  const bool capturing = stream_is_capturing(stream);
  const CudnnEngineSearch search = cudnn_engine_search(deterministic, autotune, capturing);
  DeviceHandle& h = device_handle(device);
  const cudnnHandle_t handle = handle_of(h, why);
  if (handle == nullptr) return false;

  const CudnnProblem q = describe(p, c);
  const int64_t engine_budget = c.workspace_budget - c.lt_offset;
  const PlanKey key = plan_key(device, q, engine_budget, deterministic);
  std::shared_ptr<const Entry> entry = find_entry(key);
  const bool time_it = search.time;
  std::vector<std::shared_ptr<Plan> > candidates;
  std::shared_ptr<Graph> graph;
  std::string unsettled;  // deterministic mode: a build failure that is not pure (build_plans)
  if (entry == nullptr || (!entry->final && time_it)) {
    // Building enqueues nothing: any failure here is "cuDNN cannot serve", not an error. It may
    // allocate (engine set-up), which a capture in global mode would not allow.
    const RelaxedCaptureMode relaxed;
    try {
      graph = entry != nullptr ? entry->graph : make_graph(handle, q);
      // Timing: the top candidates of heuristic mode A, then mode B's (a slower, more accurate
      // model) that A did not rank that high.
      const int limit = time_it ? kMaxCandidates : 1;
      const bool rtc = search.allow_runtime_compiled;
      std::string* const stop = deterministic ? &unsettled : nullptr;
      build_plans(handle, *graph, CUDNN_HEUR_MODE_A, q.f32_inputs, rtc, engine_budget, limit, false,
                  candidates, stop);
      if (time_it) {
        build_plans(handle, *graph, CUDNN_HEUR_MODE_B, q.f32_inputs, rtc, engine_budget,
                    kMaxCandidatesFromB, true, candidates);
      }
      if (candidates.empty() && unsettled.empty()) {
        build_plans(handle, *graph, CUDNN_HEUR_MODE_FALLBACK, q.f32_inputs, rtc, engine_budget,
                    limit, false, candidates, stop);
      }
    } catch (const Error& e) {
      why = std::string("cuDNN cannot describe this convolution: ") + e.what();
      failure.pure = true;
      auto failed = std::make_shared<Entry>();
      failed->final = true;
      failed->why = why;
      store_entry(key, failed);
      return false;
    }
    if (!unsettled.empty()) {  // not pure: nothing kept, a later call searches again
      why = unsettled;
      return false;
    }
    if (candidates.empty()) {
      auto failed = std::make_shared<Entry>();
      failed->graph = graph;
      failed->final = true;
      failed->why = std::string("cuDNN has no deterministic fp32-accumulating ") +
                    (search.allow_runtime_compiled ? "" : "precompiled ") +
                    "engine for this convolution within " + std::to_string(engine_budget) +
                    " bytes of workspace";
      if (entry != nullptr) failed->kept = entry->kept;
      why = failed->why;
      failure.pure = true;
      store_entry(key, failed);
      return false;
    }
  } else if (entry->chosen == nullptr) {
    why = entry->why;
    failure.pure = true;  // kept failures are the two above: pure
    return false;
  }

  std::shared_ptr<Plan> plan = candidates.empty() ? entry->chosen : candidates.front();
  int64_t most_workspace = plan->workspace;
  for (const auto& candidate : candidates) {
    most_workspace = std::max(most_workspace, candidate->workspace);
  }
  const bool timing = time_it && candidates.size() > 1;
  std::string how = candidates.empty() ? entry->how + ", cached" : "";

  // Transposed: the filter copied into the workspace in cuDNN's layout, or w read in place.
  const bool pack_filter = c.cudnn_dgrad && !c.dgrad_weight_in_place;
  char* const x = static_cast<char*>(const_cast<void*>(p.x.data));
  char* const w = static_cast<char*>(const_cast<void*>(p.weight.data));
  // Enqueues one execution of `plan`; returns cuDNN's status (no throw: the caller decides).
  const auto execute = [&](const Plan& run, char* workspace) {
    void* y =
        c.bias == BiasMode::scratch ? static_cast<void*>(workspace + c.scratch_offset) : p.out.data;
    void* engine_workspace = run.workspace > 0 ? workspace + c.lt_offset : nullptr;
    const int64_t uids[3] = {kUidX, kUidW, kUidY};
    void* pointers[3] = {x, pack_filter ? workspace + c.weight_t_offset : w, y};
    Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids, 3);
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers, 3);
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &engine_workspace);
    pack.finalize();
    GEMMKIT_CUDNN_CHECK(cudnnSetStream(handle, stream));
    return cudnnBackendExecute(handle, run.plan.get(), pack.get());
  };

  bool ran = false;
  const char* packing = nullptr;  // the filter packing kernel that ran, if any
  const bool allocated =
      with_conv_workspace(device, c.lt_offset + most_workspace, stream, why, [&](void* base) {
        char* const workspace = static_cast<char*>(base);
        std::lock_guard<std::mutex> lock(h.mutex);
        if (pack_filter) {  // before every engine run of the call
          packing = launch_conv_dgrad_weight(p.weight.dtype, dgrad_weight_index(p), p.weight.data,
                                             workspace + c.weight_t_offset, stream);
          GEMMKIT_CUDA_CHECK(cudaGetLastError());
        }
        if (timing) {
          std::string timings;
          double best_us = 0;
          std::shared_ptr<Plan> best;
          for (const auto& candidate : candidates) {
            if (execute(*candidate, workspace) != CUDNN_STATUS_SUCCESS) {  // warm-up
              cudaGetLastError();
              continue;
            }
            const double us = time_calls_us(stream, kTuneRuns, kTuneDelayUs, [&] {
              return execute(*candidate, workspace) == CUDNN_STATUS_SUCCESS;
            });
            if (us < 0) {
              cudaGetLastError();
              continue;
            }
            timings += (timings.empty() ? "" : ", ") + std::string("engine ") +
                       std::to_string(candidate->engine) + " " + std::to_string(us).substr(0, 6) +
                       " us";
            if (best == nullptr || us < best_us) {
              best = candidate;
              best_us = us;
            }
          }
          if (best == nullptr) {
            why = "none of cuDNN's " + std::to_string(candidates.size()) + " engine candidates ran";
            return;
          }
          plan = best;
          how = "timed fastest of " + std::to_string(candidates.size()) + " candidates: " + timings;
        }
        const cudnnStatus_t status = execute(*plan, workspace);
        if (status != CUDNN_STATUS_SUCCESS) {
          cudaGetLastError();
          why = "cudnnBackendExecute of engine " + std::to_string(plan->engine) +
                " failed: " + status_text(status);
          return;
        }
        if (c.bias != BiasMode::none) {
          const int64_t positions = p.out_positions(), o = p.out_channels;
          const int64_t out_ld = c.out_row_stride != 0 ? c.out_row_stride : o;
          const float* acc = c.bias == BiasMode::scratch
                                 ? reinterpret_cast<const float*>(workspace + c.scratch_offset)
                                 : static_cast<const float*>(p.out.data);
          const int64_t acc_ld = c.bias == BiasMode::scratch ? o : out_ld;
          launch_conv_bias_pass(p.bias.dtype, p.out.dtype, acc, acc_ld, p.out.data, out_ld,
                                positions, o, p.bias.data, p.bias.strides[0], c.grid, c.block,
                                stream);
        }
        ran = true;
      });
  if (!allocated || !ran) return false;

  if (!candidates.empty()) {
    if (how.empty()) how = search.how;
    auto updated = std::make_shared<Entry>();
    updated->graph = graph;
    updated->chosen = plan;
    updated->final = search.final;
    updated->how = how;
    if (entry != nullptr) updated->kept = entry->kept;
    updated->kept.push_back(plan);
    store_entry(key, updated);
  }
  note = "cuDNN engine " + std::to_string(plan->engine) + " (" + how + "), workspace " +
         std::to_string(c.lt_offset + plan->workspace) + " bytes";
  if (c.cudnn_dgrad) {
    note += packing != nullptr
                ? std::string(", backward-data filter packed (") + packing + " kernel)"
                : std::string(", backward-data filter read in place");
  }
  return true;
}

#endif

}  // namespace gemmkit::cuda::conv_impl
