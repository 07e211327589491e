// Multi-GPU correctness (two or more GPUs; skipped with the reason otherwise): calls on a device
// other than the current one give the single-GPU bits and restore the caller's device, also
// after an error; per-device state survives alternating devices; one host thread per device
// running 10,000 captured calls each sees no cross-talk; mixed-device calls are rejected.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gpu/gpu_test_util.h"
#ifdef GEMMKIT_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace gemmkit {
namespace {

using testing::download;
using testing::random_host;
using testing::upload;

#define GEMMKIT_REQUIRE_TWO_GPUS()                                                     \
  do {                                                                                 \
    const std::size_t count = ::gemmkit::cuda_devices().size();                        \
    if (count < 2) {                                                                   \
      GTEST_SKIP() << "needs two GPUs, found " << count                                \
                   << (count == 0 ? ": " + ::gemmkit::cuda_unavailable_reason() : ""); \
    }                                                                                  \
  } while (0)

// One linear and one conv problem with fixed random inputs, placed on a chosen device.
struct Workload {
  static constexpr int64_t kN = 8, kM = 256, kK = 256;  // linear; chains need m == k
  static constexpr int64_t kSide = 16, kChannels = 32;  // conv: (1, 16, 16, 32), 3x3, pad 1
  std::vector<uint8_t> x, w, b, image, filter;
  Workload()
      : x(random_host(DType::bf16, kN * kK, 1.0f, 1)),
        w(random_host(DType::bf16, kM * kK, 0.06f, 2)),
        b(random_host(DType::bf16, kM, 1.0f, 3)),
        image(random_host(DType::bf16, kSide * kSide * kChannels, 1.0f, 4)),
        filter(random_host(DType::bf16, kChannels * 9 * kChannels, 0.06f, 5)) {}
};

struct OnDevice {
  Device device;
  Buffer x, w, b, out, image, filter, image_out;
  OnDevice(const Workload& work, int index)
      : device(Device::cuda(index)),
        x(upload(work.x, device)),
        w(upload(work.w, device)),
        b(upload(work.b, device)),
        out(static_cast<std::size_t>(Workload::kN * Workload::kM) * 2, device),
        image(upload(work.image, device)),
        filter(upload(work.filter, device)),
        image_out(work.image.size(), device) {}

  Tensor linear_in() const {
    return Tensor::contiguous(x.data(), DType::bf16, device, {Workload::kN, Workload::kK});
  }
  Tensor linear_w() const {
    return Tensor::contiguous(w.data(), DType::bf16, device, {Workload::kM, Workload::kK});
  }
  Tensor linear_bias() const {
    return Tensor::contiguous(b.data(), DType::bf16, device, {Workload::kM});
  }
  Tensor linear_out() const {
    return Tensor::contiguous(out.data(), DType::bf16, device, {Workload::kN, Workload::kM});
  }
  Tensor conv_in() const {
    return Tensor::contiguous(image.data(), DType::bf16, device,
                              {1, Workload::kSide, Workload::kSide, Workload::kChannels});
  }
  Tensor conv_w() const {
    return Tensor::contiguous(filter.data(), DType::bf16, device,
                              {Workload::kChannels, 3, 3, Workload::kChannels});
  }
  Tensor conv_out() const {
    return Tensor::contiguous(image_out.data(), DType::bf16, device,
                              {1, Workload::kSide, Workload::kSide, Workload::kChannels});
  }

  static ConvParams padding_one() {
    ConvParams p;
    p.padding_lo = {1};
    p.padding_hi = {1};
    return p;
  }
  // Poisons both outputs, runs linear and conv, returns their bytes.
  std::pair<std::vector<uint8_t>, std::vector<uint8_t>> run() {
    out.fill_bytes(0xFF);
    image_out.fill_bytes(0xFF);
    linear(linear_in(), linear_w(), linear_bias(), linear_out());
    conv(conv_in(), conv_w(), std::nullopt, conv_out(), padding_one());
    return {download(out), download(image_out)};
  }
};

#ifdef GEMMKIT_WITH_CUDA
int current_device() {
  int d = -1;
  EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
  return d;
}

TEST(GpuMulti, CallsOnTheOtherDeviceMatchAndRestoreTheCaller) {
  GEMMKIT_REQUIRE_TWO_GPUS();
  const Workload work;
  OnDevice zero(work, 0), one(work, 1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const auto reference = zero.run();  // tensors on the current device
  for (const auto& [current, target] :
       std::vector<std::pair<int, OnDevice*>>{{0, &one}, {1, &zero}}) {
    ASSERT_EQ(cudaSetDevice(current), cudaSuccess);
    const auto got = target->run();
    EXPECT_EQ(got.first, reference.first)
        << "linear on " << target->device.str() << " from cuda:" << current;
    EXPECT_EQ(got.second, reference.second)
        << "conv on " << target->device.str() << " from cuda:" << current;
    EXPECT_EQ(current_device(), current) << "the caller's device was not restored";
    // An error raised inside the CUDA backend, after it switched devices.
    LinearOptions bad;
    bad.kernel = "no-such-kernel";
    EXPECT_THROW(
        linear(target->linear_in(), target->linear_w(), std::nullopt, target->linear_out(), bad),
        Error);
    EXPECT_EQ(current_device(), current) << "the caller's device was not restored after an error";
    ConvOptions bad_conv;
    bad_conv.algo = "no-such-algo";
    EXPECT_THROW(conv(target->conv_in(), target->conv_w(), std::nullopt, target->conv_out(),
                      OnDevice::padding_one(), bad_conv),
                 Error);
    EXPECT_EQ(current_device(), current);
  }
}

TEST(GpuMulti, PerDeviceStateSurvivesAlternatingDevices) {
  GEMMKIT_REQUIRE_TWO_GPUS();
  const Workload work;
  OnDevice zero(work, 0), one(work, 1);
  const auto reference = zero.run();
  // Different shapes per device too, so cached attributes, tensor maps and cuBLASLt handles of
  // one device are never what the other needs.
  for (int round = 0; round < 20; ++round) {
    OnDevice& target = round % 2 ? one : zero;
    ASSERT_EQ(target.run(), reference) << "round " << round << " on " << target.device.str();
    LinearOptions options;
    options.kernel = round % 3 == 0 ? "cublaslt" : round % 3 == 1 ? "ring8" : "reference";
    target.out.fill_bytes(0xFF);
    linear(target.linear_in(), target.linear_w(), target.linear_bias(), target.linear_out(),
           options);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
}

TEST(GpuMulti, OneThreadPerDeviceTenThousandGraphCallsEach) {
  GEMMKIT_REQUIRE_TWO_GPUS();
  const Workload work;
  constexpr int kCallsPerGraph = 50;  // 25 linear + 25 conv
  constexpr int kReplays = 200;       // 10,000 calls per thread
  // Single-threaded result of one replay's chain, computed on device 0.
  std::vector<uint8_t> expected_linear, expected_conv;
  std::atomic<int> failures{0};
  std::vector<std::string> messages(2);
  const auto worker = [&](int index, bool record) {
    try {
      if (cudaSetDevice(index) != cudaSuccess) throw Error("cudaSetDevice failed");
      OnDevice on(work, index);
      // Ping-pong chains: linear x -> out -> x ... ; conv image -> image_out -> image ...
      Buffer x_copy(on.x.bytes(), on.device), image_copy(on.image.bytes(), on.device);
      cudaStream_t stream;
      if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
        throw Error("stream");
      const auto s = reinterpret_cast<Stream>(stream);
      const auto chain = [&] {
        for (int i = 0; i < kCallsPerGraph / 2; ++i) {
          const bool even = i % 2 == 0;
          const Tensor lin_in = Tensor::contiguous(even ? on.x.data() : on.out.data(), DType::bf16,
                                                   on.device, {Workload::kN, Workload::kK});
          const Tensor lin_out = Tensor::contiguous(even ? on.out.data() : on.x.data(), DType::bf16,
                                                    on.device, {Workload::kN, Workload::kM});
          linear(lin_in, on.linear_w(), on.linear_bias(), lin_out, {}, s);
          const auto shape =
              std::vector<int64_t>{1, Workload::kSide, Workload::kSide, Workload::kChannels};
          conv(Tensor::contiguous(even ? on.image.data() : on.image_out.data(), DType::bf16,
                                  on.device, shape),
               on.conv_w(), std::nullopt,
               Tensor::contiguous(even ? on.image_out.data() : on.image.data(), DType::bf16,
                                  on.device, shape),
               OnDevice::padding_one(), {}, s);
        }
      };
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
        throw Error("capture");
      chain();
      if (cudaStreamEndCapture(stream, &graph) != cudaSuccess) throw Error("end capture");
      if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) throw Error("instantiate");
      // Every replay starts from the original inputs, so every replay's result is the same.
      for (int replay = 0; replay < kReplays; ++replay) {
        on.x.copy_from_host(work.x.data(), work.x.size());
        on.image.copy_from_host(work.image.data(), work.image.size());
        if (cudaGraphLaunch(exec, stream) != cudaSuccess) throw Error("launch");
        if (cudaStreamSynchronize(stream) != cudaSuccess) throw Error("sync");
        const auto lin = download(on.out);
        const auto img = download(on.image_out);
        if (record && replay == 0) {
          expected_linear = lin;
          expected_conv = img;
        } else if (lin != expected_linear || img != expected_conv) {
          throw Error("replay " + std::to_string(replay) + " on cuda:" + std::to_string(index) +
                      " differs from the single-threaded result");
        }
      }
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      cudaStreamDestroy(stream);
    } catch (const std::exception& e) {
      ++failures;
      messages[static_cast<std::size_t>(index)] = e.what();
    }
  };
  worker(0, true);  // the single-threaded reference
  ASSERT_EQ(failures.load(), 0) << messages[0];
  std::thread t0(worker, 0, false), t1(worker, 1, false);
  t0.join();
  t1.join();
  EXPECT_EQ(failures.load(), 0) << messages[0] << " " << messages[1];
}
#endif

TEST(GpuMulti, TensorsOnDifferentDevicesAreRejected) {
  GEMMKIT_REQUIRE_TWO_GPUS();
  const Workload work;
  OnDevice zero(work, 0), one(work, 1);
  try {
    linear(zero.linear_in(), one.linear_w(), std::nullopt, zero.linear_out());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("w is on cuda:1 but x is on cuda:0"), std::string::npos)
        << e.what();
  }
  try {
    conv(one.conv_in(), one.conv_w(), std::nullopt, zero.conv_out(), OnDevice::padding_one());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out is on cuda:0 but x is on cuda:1"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gemmkit
