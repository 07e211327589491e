// GPU tests of the convolution's deterministic mode (options.deterministic = 1): on shapes that
// default mode races (2-D depthwise, 1x1) or sends to cuDNN's timed engines (3x3), and a small-o
// one, a fresh process returns the same bits, kernels and reasons as another fresh process that
// first ran every shape in default mode (races, cuDNN engine timing), and as this process, which
// ran other tests before; two calls in one process give the same bits; the reasons name the mode
// and no timing; every result is correct.
//
// The fresh processes are this test binary, run on the DISABLED_ test below with
// GEMMKIT_TEST_DETERMINISTIC_OUT naming the file it writes its records to and
// GEMMKIT_TEST_DETERMINISTIC_WARM=1 asking for the default-mode calls first.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpu/conv/test_util.h"
#include "gpu/gpu_test_util.h"

namespace gemmkit {
namespace {

using gemmkit_test::DeviceTensor;
using gemmkit_test::HostTensor;
using gemmkit_test::to_device;

struct DeterministicCase {
  std::string name;
  std::vector<int64_t> x_shape, w_shape;
  ConvParams params;
  bool bias = false;
};

DeterministicCase make_case(const std::string& name, std::vector<int64_t> x_shape,
                            std::vector<int64_t> w_shape, int64_t pad = 0) {
  DeterministicCase c;
  c.name = name;
  c.x_shape = std::move(x_shape);
  c.w_shape = std::move(w_shape);
  c.params.padding_lo = {pad};
  c.params.padding_hi = {pad};
  return c;
}

std::vector<DeterministicCase> cases() {
  std::vector<DeterministicCase> v;
  DeterministicCase dw =
      make_case("2-D depthwise 5x5 (raced against cuDNN)", {2, 15, 17, 64}, {64, 5, 5, 1}, 2);
  dw.params.groups = 64;
  v.push_back(dw);
  v.push_back(
      make_case("1x1 (the 1x1 GEMM raced against cuDNN)", {1, 32, 32, 256}, {128, 1, 1, 256}));
  DeterministicCase three =
      make_case("3x3 with bias (cuDNN's engines timed)", {2, 16, 16, 64}, {64, 3, 3, 64}, 1);
  three.bias = true;
  v.push_back(three);
  v.push_back(make_case("small o 3x3", {1, 32, 32, 64}, {3, 3, 3, 64}, 1));
  return v;
}

// One case's inputs (the same in every process: fixed seeds), on cuda:0.
struct Prepared {
  HostTensor x, w, b, out;
  DeviceTensor dx, dw, db, dout;
  std::optional<Tensor> bias;

  Prepared(const DeterministicCase& c, uint64_t seed)
      : x(gemmkit_test::random_tensor(DType::bf16, c.x_shape, seed)),
        w(gemmkit_test::random_tensor(DType::bf16, c.w_shape, seed + 1)),
        b(gemmkit_test::random_tensor(DType::bf16, {c.w_shape[0]}, seed + 2)),
        out(gemmkit_test::make_tensor(DType::bf16,
                                      conv_output_shape(c.x_shape, c.w_shape, c.params))),
        dx(to_device(x)),
        dw(to_device(w)),
        db(to_device(b)),
        dout(to_device(out)) {
    if (c.bias) bias = db.view;
  }

  // One eager call with options.deterministic = `mode`, out poisoned before; the result.
  HostTensor run(const DeterministicCase& c, int mode, CallInfo& info) {
    dout.buffer.fill_bytes(0xFF);
    ConvOptions options;
    options.deterministic = mode;
    options.info = &info;
    conv(dx.view, dw.view, bias, dout.view, c.params, options);
    synchronize(Device::cuda(0));
    HostTensor r = out;
    dout.buffer.copy_to_host(r.storage.data(), r.storage.size());
    return r;
  }
};

// What a process's first deterministic call of each case returns: kernel, reason, output bits.
struct Record {
  std::string kernel, reason, bits;
};

// The records of this process; with `warm`, each case runs twice in default mode first.
std::vector<Record> records(bool warm) {
  std::vector<Record> v;
  uint64_t seed = 7100;
  for (const DeterministicCase& c : cases()) {
    Prepared prepared(c, seed += 10);
    if (warm) {
      for (int i = 0; i < 2; ++i) {
        CallInfo info;
        prepared.run(c, 0, info);
      }
    }
    CallInfo info;
    const HostTensor r = prepared.run(c, 1, info);
    v.push_back({info.kernel, info.reason, std::string(r.storage.begin(), r.storage.end())});
  }
  return v;
}

void write_records(const std::string& path, const std::vector<Record>& v) {
  std::ofstream out(path, std::ios::binary);
  for (const Record& r : v) {
    for (const std::string* field : {&r.kernel, &r.reason, &r.bits}) {
      out << field->size() << '\n' << *field;
    }
  }
}

// One field as write_records writes it: its size, a newline, its bytes.
bool read_field(std::istream& in, std::string& field) {
  std::size_t size = 0;
  if (!(in >> size) || in.get() != '\n') return false;
  field.resize(size);
  return static_cast<bool>(in.read(&field[0], static_cast<std::streamsize>(size)));
}

std::vector<Record> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<Record> v;
  Record r;
  while (read_field(in, r.kernel) && read_field(in, r.reason) && read_field(in, r.bits)) {
    v.push_back(r);
  }
  return v;
}

// This binary's path, or "" where /proc does not say.
std::string own_binary() {
  std::vector<char> path(4096);
  const ssize_t n = readlink("/proc/self/exe", path.data(), path.size() - 1);
  return n > 0 ? std::string(path.data(), static_cast<std::size_t>(n)) : std::string();
}

// The records of a fresh process of this binary (warm or not); empty if it could not run.
std::vector<Record> fresh_process_records(const std::string& binary, bool warm) {
  const std::string path = ::testing::TempDir() + "gemmkit_deterministic_" +
                           std::to_string(getpid()) + (warm ? "_warm" : "_cold") + ".bin";
  std::remove(path.c_str());
  const std::string command =
      "GEMMKIT_TEST_DETERMINISTIC_OUT='" + path +
      "' GEMMKIT_TEST_DETERMINISTIC_WARM=" + (warm ? "1" : "0") + " '" + binary +
      "' --gtest_filter=GpuConvDeterministic.DISABLED_WriteRecordsOfAFreshProcess"
      " --gtest_also_run_disabled_tests > /dev/null";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::vector<Record> v = read_records(path);
  std::remove(path.c_str());
  return v;
}

// The child's side of SameBitsKernelsAndReasonsInEveryProcess (skipped unless run as one).
TEST(GpuConvDeterministic, DISABLED_WriteRecordsOfAFreshProcess) {
  GEMMKIT_REQUIRE_GPU();
  const char* out = std::getenv("GEMMKIT_TEST_DETERMINISTIC_OUT");
  if (out == nullptr) GTEST_SKIP() << "run by SameBitsKernelsAndReasonsInEveryProcess";
  const char* warm = std::getenv("GEMMKIT_TEST_DETERMINISTIC_WARM");
  write_records(out, records(warm != nullptr && std::string(warm) == "1"));
}

TEST(GpuConvDeterministic, SameBitsKernelsAndReasonsInEveryProcess) {
  GEMMKIT_REQUIRE_GPU();
  const std::string binary = own_binary();
  if (binary.empty()) GTEST_SKIP() << "/proc/self/exe does not name this binary";
  const std::vector<DeterministicCase> all = cases();
  const std::vector<Record> cold = fresh_process_records(binary, false);
  const std::vector<Record> warm = fresh_process_records(binary, true);
  const std::vector<Record> here = records(true);
  ASSERT_EQ(cold.size(), all.size());
  ASSERT_EQ(warm.size(), all.size());
  ASSERT_EQ(here.size(), all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    SCOPED_TRACE(all[i].name + ": " + cold[i].kernel + " (" + cold[i].reason + ")");
    // Fresh processes agree on everything: the kernel, the reason (the engine, how it was chosen)
    // and the bits, whatever ran before in them.
    EXPECT_EQ(warm[i].kernel, cold[i].kernel);
    EXPECT_EQ(warm[i].reason, cold[i].reason);
    EXPECT_TRUE(warm[i].bits == cold[i].bits) << "a warmed-up process returned other bits";
    // This process ran other tests first (and may have seen the shapes before): same kernel and
    // bits.
    EXPECT_EQ(here[i].kernel, cold[i].kernel) << here[i].reason;
    EXPECT_TRUE(here[i].bits == cold[i].bits) << "this process returned other bits";
    // The reason names the mode and no timing.
    const std::string& reason = cold[i].reason;
    EXPECT_NE(reason.find("deterministic mode"), std::string::npos);
    EXPECT_EQ(reason.find("timed fastest"), std::string::npos);
    EXPECT_EQ(reason.find("(raced: "), std::string::npos);
    EXPECT_EQ(reason.find(" us against "), std::string::npos);
  }
}

TEST(GpuConvDeterministic, RunToRunBitsAndCorrectValues) {
  GEMMKIT_REQUIRE_GPU();
  uint64_t seed = 7300;
  for (const DeterministicCase& c : cases()) {
    SCOPED_TRACE(c.name);
    Prepared prepared(c, seed += 10);
    CallInfo first_info, second_info;
    const HostTensor first = prepared.run(c, 1, first_info);
    const HostTensor second = prepared.run(c, 1, second_info);
    EXPECT_TRUE(gemmkit_test::same_bits(first, second)) << second_info.reason;
    EXPECT_EQ(first_info.kernel, second_info.kernel);
    const gemmkit_test::Reference ref = gemmkit_test::reference_conv(
        prepared.x, prepared.w, c.bias ? &prepared.b : nullptr, c.params);
    EXPECT_EQ(gemmkit_test::check_output(first, gemmkit_test::any_order(ref), c.name), 0)
        << first_info.reason;
  }
}

TEST(GpuConvDeterministic, OptionOutOfRangeIsAnError) {
  GEMMKIT_REQUIRE_GPU();
  const DeterministicCase c = cases().front();
  Prepared prepared(c, 7500);
  CallInfo info;
  try {
    prepared.run(c, 2, info);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("options.deterministic 2"), std::string::npos) << m;
    EXPECT_NE(m.find("-1, 0 or 1"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace gemmkit
