#include "bench/harness.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>

#include "bench/data.h"
#include "bench/random.h"
#if GEMMKIT_BENCH_CUDA
#include "bench/cuda_timing.h"
#endif

namespace gemmkit::bench {
namespace {

using LaunchFn = std::function<void(int copy, Stream stream)>;

// Used when the device does not report its L2 size; the H200 has 60 MiB.
constexpr double kFallbackL2Bytes = 60.0 * (1 << 20);
// Input copies for cold-L2 timing never take more device memory than this.
constexpr double kColdCopiesMemoryCap = 8.0 * (1 << 30);

// Independent random streams of one case.
enum : uint64_t { kSeedX = 1, kSeedWeight = 2, kSeedBias = 3, kSeedSamples = 4 };

// Scales keeping every output O(1): weights by 1/sqrt(reduction length), bias smaller than x.
constexpr double kInputScale = 1.0;
constexpr double kBiasScale = 0.5;

// One input operand: the host data the reference reads, and device copies holding the same
// values (copy 0 for every warm call; more for cold-L2 rotation) — in `image`'s memory order
// when the device layout differs from the host's (else image is empty and host is uploaded).
struct Operand {
  HostTensor host;
  HostTensor image;
  std::vector<Buffer> copies;

  void* data(int copy) const { return copies.empty() ? nullptr : copies[copy].data(); }
  const HostTensor& uploaded() const { return image.numel() > 0 ? image : host; }
  void upload_copy(Device device) {
    copies.emplace_back(uploaded().bytes(), device);
    copies.back().copy_from_host(uploaded().data(), uploaded().bytes());
  }
};

// Random host data, not yet on the device.
Operand random_operand(DType dtype, int64_t numel, uint64_t seed, double scale) {
  Operand operand;
  operand.host = HostTensor(dtype, numel);
  fill_random_parallel(operand.host, seed, scale);
  return operand;
}

Operand make_operand(DType dtype, int64_t numel, uint64_t seed, double scale, Device device) {
  Operand operand = random_operand(dtype, numel, seed, scale);
  operand.upload_copy(device);
  return operand;
}

// The contiguous host tensor `host` of `shape` rearranged so that element (i...) sits at
// sum(i[d] * strides[d]) (strides of a dense permutation of the shape).
HostTensor permuted_image(const HostTensor& host, const std::vector<int64_t>& shape,
                          const std::vector<int64_t>& strides) {
  HostTensor image(host.dtype(), host.numel());
  const std::size_t size = dtype_size(host.dtype());
  const auto* from = static_cast<const unsigned char*>(host.data());
  auto* to = static_cast<unsigned char*>(image.data());
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t linear = 0; linear < host.numel(); ++linear) {
    int64_t offset = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) offset += index[d] * strides[d];
    std::memcpy(to + static_cast<std::size_t>(offset) * size,
                from + static_cast<std::size_t>(linear) * size, size);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return image;
}

double l2_bytes_of(Device device) {
  for (const auto& info : cuda_devices())
    if (info.device == device && info.l2_bytes > 0) return static_cast<double>(info.l2_bytes);
  return kFallbackL2Bytes;
}

// The parts shared by every implementation measured on one problem: the output buffer, the
// sampled reference values (computed once), the stream, the input copies.
class CaseRunner {
 public:
  CaseRunner(const BenchSettings& settings, DType out_dtype, int64_t out_numel,
             std::function<Reference(int64_t)> reference_at, std::vector<Operand*> inputs)
      : settings_(settings),
        out_dtype_(out_dtype),
        out_numel_(out_numel),
        reference_at_(std::move(reference_at)),
        inputs_(std::move(inputs)),
        out_(static_cast<std::size_t>(out_numel) * dtype_size(out_dtype), settings.device) {
#if GEMMKIT_BENCH_CUDA
    if (settings.device.is_cuda()) stream_ = std::make_unique<cuda::StreamOwner>(settings.device);
#endif
  }

  void* out() const {
    return out_.data();
  }
  Stream stream() const {
#if GEMMKIT_BENCH_CUDA
    if (stream_) return stream_->get();
#endif
    return nullptr;
  }

  // First call (output pre-filled with NaN, so elements it skips fail), check, then timing.
  // Errors are recorded in `measurement`.
  void measure(Measurement& measurement, const LaunchFn& launch) {
    try {
      out_.fill_bytes(0xFF);  // all-ones bits are NaN in bf16, f16 and f32
      launch(0, stream());
      synchronize();
      if (settings_.check) {
        compute_references();
        measurement.check = check_outputs(indices_, read_elements(out_, out_dtype_, indices_),
                                          references_, out_numel_, out_dtype_);
      }
      if (settings_.time) measurement.timing = time(launch);
      measurement.ran = true;
    } catch (const std::exception& error) {
      measurement.ran = false;
      measurement.note = error.what();
      recover();
    }
  }

 private:
  void synchronize() {
#if GEMMKIT_BENCH_CUDA
    if (stream_) {
      stream_->synchronize();
      cuda::check_last_error("the benchmarked call");
    }
#endif
  }

  // After an error on the GPU: drain the stream so the next measurement starts clean.
  void recover() {
#if GEMMKIT_BENCH_CUDA
    if (stream_) {
      try {
        synchronize();
      } catch (const std::exception&) {
      }
    }
#endif
  }

  void compute_references() {
    if (!references_.empty() || out_numel_ == 0) return;
    indices_ = sample_indices(out_numel_, derive_seed(settings_.seed, kSeedSamples));
    references_.reserve(indices_.size());
    for (int64_t index : indices_) references_.push_back(reference_at_(index));
  }

  Timing time(const LaunchFn& launch) {
    Timing timing;
    if (settings_.device.is_cpu()) {
      const int reps = effective_reps(settings_);
      std::vector<double> samples;
      for (int rep = 0; rep < reps; ++rep) {
        const auto start = std::chrono::steady_clock::now();
        launch(0, nullptr);
        const auto stop = std::chrono::steady_clock::now();
        samples.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
      }
      timing.warm_us = median(samples);
      timing.method = "wall clock, median of " + std::to_string(reps) + " calls after a warm-up";
      return timing;
    }
#if GEMMKIT_BENCH_CUDA
    const int calls = effective_reps(settings_);
    const int replays = effective_replays(settings_);
    const auto warm = cuda::time_calls(launch, calls, 1, replays, stream());
    timing.warm_us = median(warm.per_call_us);
    timing.method = warm.method;
    if (settings_.cold) {
      const int copies = ensure_cold_copies();
      if (copies > 1) {
        const auto cold =
            cuda::time_calls(launch, cold_graph_calls(calls, copies), copies, replays, stream());
        timing.cold_us = median(cold.per_call_us);
        timing.cold_copies = copies;
      }
    }
    if (settings_.host_cost_calls > 0) {
      const auto host = cuda::time_host_cost(launch, settings_.host_cost_calls, stream());
      timing.host_us = host.call_us;
      timing.empty_launch_us = host.empty_launch_us;
      timing.empty_plain_launch_us = host.empty_plain_launch_us;
      timing.empty_driver_launch_us = host.empty_driver_launch_us;
    }
    synchronize();
    return timing;
#else
    (void)launch;
    throw Error("this gemmkit CLI was built without CUDA");
#endif
  }

  int ensure_cold_copies() {
    if (cold_copies_ == 0) {
      double input_bytes = 0;
      for (const Operand* input : inputs_) input_bytes += static_cast<double>(input->host.bytes());
      cold_copies_ =
          cold_copy_count(input_bytes, l2_bytes_of(settings_.device), kColdCopiesMemoryCap);
      for (Operand* input : inputs_) {
        if (input->host.numel() == 0) continue;
        while (static_cast<int>(input->copies.size()) < cold_copies_) {
          input->upload_copy(settings_.device);
        }
      }
    }
    return cold_copies_;
  }

  const BenchSettings& settings_;
  DType out_dtype_;
  int64_t out_numel_;
  std::function<Reference(int64_t)> reference_at_;
  std::vector<Operand*> inputs_;
  Buffer out_;
  std::vector<int64_t> indices_;
  std::vector<Reference> references_;
  int cold_copies_ = 0;
#if GEMMKIT_BENCH_CUDA
  std::unique_ptr<cuda::StreamOwner> stream_;
#endif
};

void require_device_support(const BenchSettings& settings) {
#if !GEMMKIT_BENCH_CUDA
  if (settings.device.is_cuda())
    throw Error("this gemmkit CLI was built without CUDA: use --device cpu");
#else
  (void)settings;
#endif
}

// Runs every peer that supports `row` on the operands that `operands_of(copy)` gives.
template <class PeerType, class Row, class OperandsOf>
void run_peers(std::vector<std::unique_ptr<PeerType>>& peers, const Row& row, CaseRunner& runner,
               const OperandsOf& operands_of, std::vector<Measurement>& results) {
  for (auto& peer : peers) {
    Measurement measurement;
    measurement.name = peer->name();
    measurement.note = peer->unsupported_reason(row);
    if (!measurement.note.empty()) {
      measurement.unsupported = true;
      results.push_back(measurement);
      continue;
    }
    try {
      peer->prepare(row, operands_of(0), runner.stream());
    } catch (const std::exception& error) {
      // The peer library refused the problem: that is "n/a" for it, not a gemmkit failure.
      measurement.unsupported = true;
      measurement.note = error.what();
      results.push_back(measurement);
      continue;
    }
    runner.measure(measurement,
                   [&](int copy, Stream stream) { peer->launch(operands_of(copy), stream); });
    results.push_back(measurement);
  }
}

}  // namespace

CaseResult run_linear_case(const LinearRow& row, const BenchSettings& settings, PeerSet& peers) {
  require_device_support(settings);
  CaseResult result;
  result.name = row.name;
  result.shape = describe_linear(row);
  result.cost = linear_cost(row);
  if (settings.device.is_cuda()) result.floor_us = linear_floor_us(result.cost);
  result.gemmkit.name = "gemmkit";

  const Device device = settings.device;
  Operand x = make_operand(row.dtype, row.n * row.k, derive_seed(settings.seed, kSeedX),
                           kInputScale, device);
  Operand w = make_operand(row.dtype, row.m * row.k, derive_seed(settings.seed, kSeedWeight),
                           1.0 / std::sqrt(static_cast<double>(row.k)), device);
  Operand bias;
  if (row.bias)
    bias =
        make_operand(row.dtype, row.m, derive_seed(settings.seed, kSeedBias), kBiasScale, device);

  LinearHostView view;
  view.x = x.host.data();
  view.w = w.host.data();
  view.bias = row.bias ? bias.host.data() : nullptr;
  view.dtype = row.dtype;
  view.n = row.n;
  view.m = row.m;
  view.k = row.k;
  CaseRunner runner(settings, row.out_dtype, row.n * row.m,
                    [view](int64_t index) { return linear_reference(view, index); },
                    {&x, &w, &bias});

  LinearOptions options;
  options.kernel = settings.linear_kernel;
  CallInfo* info_sink = &result.info;  // only the first call reports what it ran
  runner.measure(result.gemmkit, [&](int copy, Stream stream) {
    LinearOptions call_options = options;
    call_options.info = info_sink;
    info_sink = nullptr;
    std::optional<Tensor> bias_tensor;
    if (row.bias) bias_tensor = Tensor::contiguous(bias.data(copy), row.dtype, device, {row.m});
    linear(Tensor::contiguous(x.data(copy), row.dtype, device, {row.n, row.k}),
           Tensor::contiguous(w.data(copy), row.dtype, device, {row.m, row.k}), bias_tensor,
           Tensor::contiguous(runner.out(), row.out_dtype, device, {row.n, row.m}), call_options,
           stream);
  });

  run_peers(
      peers.linear, row, runner,
      [&](int copy) {
        LinearOperands operands;
        operands.x = x.data(copy);
        operands.w = w.data(copy);
        operands.bias = row.bias ? bias.data(copy) : nullptr;
        operands.out = runner.out();
        return operands;
      },
      result.peers);
  return result;
}

CaseResult run_conv_case(const ConvRow& row, const BenchSettings& settings, PeerSet& peers) {
  require_device_support(settings);
  CaseResult result;
  result.name = row.name;
  result.shape = describe_conv(row);
  result.count = row.count;
  result.cost = conv_cost(row);
  if (settings.device.is_cuda()) result.floor_us = conv_floor_us(result.cost);
  result.gemmkit.name = "gemmkit";

  const auto x_shape = conv_x_shape(row);
  const auto weight_shape = conv_weight_shape(row);
  const ConvParams params = conv_params(row);
  std::vector<int64_t> out_shape;
  try {
    out_shape = conv_output_shape(x_shape, weight_shape, params);
  } catch (const std::exception& error) {
    result.gemmkit.note = error.what();
    return result;
  }
  if (out_shape != conv_out_shape(row)) {
    // The reference decodes indices with the bench's own arithmetic; they must agree.
    result.gemmkit.note = "conv_output_shape gives [" + join_ints(out_shape, ", ") +
                          "], the benchmark computes [" + join_ints(conv_out_shape(row), ", ") +
                          "]";
    return result;
  }

  const Device device = settings.device;
  const ConvGeometry geometry = ConvGeometry::from_row(row);
  const int64_t reduction = geometry.kernel_positions() * (row.c / row.groups);
  Operand x = make_operand(row.dtype, static_cast<int64_t>(product(x_shape)),
                           derive_seed(settings.seed, kSeedX), kInputScale, device);
  Operand weight = random_operand(row.dtype, static_cast<int64_t>(product(weight_shape)),
                                  derive_seed(settings.seed, kSeedWeight),
                                  1.0 / std::sqrt(static_cast<double>(reduction)));
  const std::vector<int64_t> weight_strides = conv_weight_strides(row);
  if (row.weight_filter_layout) {
    weight.image = permuted_image(weight.host, weight_shape, weight_strides);
  }
  weight.upload_copy(device);
  Operand bias;
  if (row.bias)
    bias =
        make_operand(row.dtype, row.o, derive_seed(settings.seed, kSeedBias), kBiasScale, device);

  ConvHostView view;
  view.x = x.host.data();
  view.weight = weight.host.data();
  view.bias = row.bias ? bias.host.data() : nullptr;
  view.dtype = row.dtype;
  CaseRunner runner(
      settings, row.dtype, static_cast<int64_t>(product(out_shape)),
      [geometry, view](int64_t index) { return conv_reference(geometry, view, index); },
      {&x, &weight, &bias});

  ConvOptions options;
  options.algo = settings.conv_algo;
  CallInfo* info_sink = &result.info;
  runner.measure(result.gemmkit, [&](int copy, Stream stream) {
    ConvOptions call_options = options;
    call_options.info = info_sink;
    info_sink = nullptr;
    std::optional<Tensor> bias_tensor;
    if (row.bias) bias_tensor = Tensor::contiguous(bias.data(copy), row.dtype, device, {row.o});
    conv(Tensor::contiguous(x.data(copy), row.dtype, device, x_shape),
         Tensor::strided(weight.data(copy), row.dtype, device, weight_shape, weight_strides),
         bias_tensor, Tensor::contiguous(runner.out(), row.dtype, device, out_shape), params,
         call_options, stream);
  });

  run_peers(
      peers.conv, row, runner,
      [&](int copy) {
        ConvOperands operands;
        operands.x = x.data(copy);
        operands.weight = weight.data(copy);
        operands.bias = row.bias ? bias.data(copy) : nullptr;
        operands.out = runner.out();
        return operands;
      },
      result.peers);
  return result;
}

}  // namespace gemmkit::bench
