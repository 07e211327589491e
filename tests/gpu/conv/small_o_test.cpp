// GPU tests of the small-o kernels launched directly: the taps kernel against the tensor-core
// region kernel, and its TMA-fed form against its register form, bit for bit and on any grid.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpu/conv/cases.h"
#include "gpu/gpu_test_util.h"
#ifdef GEMMKIT_WITH_CUDA
#include <cuda_runtime.h>

#include "common/problems.h"
#include "cuda/conv/select.h"
#include "cuda/conv/small_o/launch.h"
#endif

namespace gemmkit {
namespace {

using namespace conv_test;

#ifdef GEMMKIT_WITH_CUDA
// Direct launches (small_o/launch.h) of the small-o kernels on one prepared case: its config under
// a GEMMKIT_CONV_SMALL_O setting, a run of any small-o config (either taps form or the region
// kernel) returning the output, and a taps config moved onto fewer blocks.
struct SmallODirect {
  PreparedConv& prepared;
  DtypePair d;
  detail::ConvProblem p;
  cuda::conv_impl::ConvGeometry g;
  cuda::conv_impl::ConvPointers ptr;

  SmallODirect(PreparedConv& prepared_case, const ConvCase& c, const DtypePair& dtypes)
      : prepared(prepared_case),
        d(dtypes),
        p(gemmkit_test::conv_problem(
            prepared.dx.view, prepared.dw.view,
            c.bias ? std::optional<Tensor>(prepared.db.view) : std::nullopt, prepared.dout.view,
            c.params)),
        g(cuda::conv_impl::normalize(p)) {
    ptr.x = p.x.data;
    ptr.w = p.weight.data;
    ptr.bias = c.bias ? p.bias.data : nullptr;
    ptr.out = p.out.data;
  }
  cuda::conv_impl::ConvConfig config(const cuda::conv_impl::DeviceDescription& dev,
                                     const std::string& small_o) const {
    cuda::conv_impl::ConvRequestSettings settings;
    settings.option_algo = "direct";
    settings.env_small_o = small_o;
    return cuda::conv_impl::select_conv_config(p, dev, cuda::conv_impl::resolve_request(settings));
  }
  HostTensor run(const cuda::conv_impl::ConvConfig& k) {
    return prepared.run([&] {
      if (k.small_o_taps.active) {
        cuda::conv_impl::launch_conv_small_o_taps(g, k.small_o_taps, d.x, d.out, ptr, k.grid,
                                                  k.smem_bytes, nullptr);
      } else {
        cuda::conv_impl::launch_conv_small_o(g, k.small_o, k.vector, d.x, d.out, ptr, k.grid,
                                             k.block, k.smem_bytes, nullptr);
      }
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    });
  }
  static cuda::conv_impl::ConvConfig on_blocks(cuda::conv_impl::ConvConfig k, int64_t blocks) {
    k.small_o_taps.grid = std::min(blocks, k.small_o_taps.tiles);
    k.small_o_taps.tiles_per_block =
        cuda::conv_impl::ceil_div(k.small_o_taps.tiles, k.small_o_taps.grid);
    k.grid.x = static_cast<uint32_t>(k.small_o_taps.grid);
    return k;
  }
};

// A case for the small-o direct-launch tests (no algos of its own): padding, bias, and the same
// stride and kernel dilation along every spatial dim.
ConvCase direct_launch_case(const std::string& name, std::vector<int64_t> x, std::vector<int64_t> w,
                            int64_t pad_lo, int64_t pad_hi, bool bias, int64_t stride = 1,
                            int64_t dilation = 1) {
  ConvCase k = make_case(name, std::move(x), std::move(w), {});
  k.params.padding_lo = {pad_lo};
  k.params.padding_hi = {pad_hi};
  k.params.stride = {stride};
  k.params.kernel_dilation = {dilation};
  k.bias = bias;
  return k;
}

// The small-o kernels that must give the same bits, launched directly (small_o/launch.h) under
// GEMMKIT_CONV_SMALL_O settings:
//   taps, mma  the taps kernel and the tensor-core region kernel on problems both serve: the same
//              products (same k-slot permutation) summed in the same order (per tap, 32-channel
//              chunks ascending, two k-steps each; then taps row-major, + bias);
//   taps, tma  the TMA-fed form of the taps kernel and its register form, with padding, stride,
//              kernel dilation, channels past a 32-channel chunk, batches, and VAE conv_out at a
//              size with interior and edge tiles;
// each run to run, and either taps form on any grid (tiles strided over 1, 3 or the planned
// blocks; the TMA form then streams several tiles through each block's ring).
class GpuConvSmallOSameBits : public ::testing::TestWithParam<SameBitsCase> {};

// Asserts that `k` is the small-o kernel that GEMMKIT_CONV_SMALL_O=`setting` asks for.
void expect_small_o_kernel(const cuda::conv_impl::ConvConfig& k, const std::string& setting) {
  if (setting == "mma") {
    ASSERT_TRUE(k.small_o.mma) << to_string(k);
    return;
  }
  ASSERT_TRUE(k.small_o_taps.active) << to_string(k);
  if (setting == "tma") {
    ASSERT_GT(k.small_o_taps.tma_stages, 0) << to_string(k);
  } else {
    ASSERT_EQ(k.small_o_taps.tma_stages, 0) << to_string(k);
  }
}

TEST_P(GpuConvSmallOSameBits, Kernels) {
  GEMMKIT_REQUIRE_GPU();
  using namespace cuda::conv_impl;
  const SameBitsCase& p = GetParam();
  const DeviceDescription dev = describe_device(0);
  const std::string what = label(p.conv, p.dtypes, "small-o " + p.first);
  SCOPED_TRACE(what);
  PreparedConv prepared(p.conv, p.dtypes, p.seed);
  SmallODirect direct(prepared, p.conv, p.dtypes);
  const ConvConfig first = direct.config(dev, p.first);
  ASSERT_NO_FATAL_FAILURE(expect_small_o_kernel(first, p.first));
  std::vector<ConvConfig> others;
  for (const std::string& other : p.others) {
    others.push_back(direct.config(dev, other));
    ASSERT_NO_FATAL_FAILURE(expect_small_o_kernel(others.back(), other));
  }
  const HostTensor expected = direct.run(first);
  if (gemmkit_test::check_output(expected, any_order(prepared.ref), what) != 0) return;
  // Either taps form on fewer blocks than planned: each block strides over several tiles.
  const auto on_any_grid = [&](const ConvConfig& k) {
    if (!k.small_o_taps.active) return;
    for (const int64_t blocks : {int64_t{1}, int64_t{3}}) {
      EXPECT_TRUE(gemmkit_test::same_bits(expected, direct.run(SmallODirect::on_blocks(k, blocks))))
          << what << ": " << to_string(k) << " on a grid of " << blocks;
    }
  };
  on_any_grid(first);
  for (const ConvConfig& k : others) {
    const HostTensor got = direct.run(k);
    EXPECT_TRUE(gemmkit_test::same_bits(expected, got))
        << what << ": " << to_string(k) << " differs from " << to_string(first);
    EXPECT_TRUE(gemmkit_test::same_bits(got, direct.run(k))) << what << ": run to run";
    on_any_grid(k);
  }
}

// Problems the taps and the region kernel both serve.
std::vector<SameBitsCase> taps_against_region() {
  std::vector<ConvCase> cases;
  const auto add = [&](const std::string& name, std::vector<int64_t> x, std::vector<int64_t> w,
                       int64_t pad_lo, int64_t pad_hi, bool bias) {
    cases.push_back(direct_launch_case(name, std::move(x), std::move(w), pad_lo, pad_hi, bias));
  };
  add("conv_out c128 o3 bias", {1, 45, 70, 128}, {3, 3, 3, 128}, 1, 1, true);
  add("o1 c40 batch 2", {2, 17, 33, 40}, {1, 3, 3, 40}, 1, 1, false);
  add("1d o3 c64 k5", {2, 300, 64}, {3, 5, 64}, 4, -1, true);
  add("o2 c16 5x5", {1, 31, 29, 16}, {2, 5, 5, 16}, 2, 2, true);
  add("o6 c32 3x3 (a shift-add pass per channel)", {1, 20, 37, 32}, {6, 3, 3, 32}, 1, 1, true);
  add("o6 c48 2x2 (shift-add in passes of 4 channels)", {2, 19, 26, 48}, {6, 2, 2, 48}, 1, 0, true);
  return same_bits_cases(cases, {{DType::bf16, DType::bf16}, {DType::f16, DType::f32}}, "taps",
                         {"mma"}, 12000);
}

// Problems the TMA form serves.
std::vector<SameBitsCase> tma_against_taps() {
  std::vector<ConvCase> cases;
  const auto add = [&](const std::string& name, std::vector<int64_t> x, std::vector<int64_t> w,
                       int64_t pad_lo, int64_t pad_hi, int64_t stride, int64_t dilation,
                       bool bias) {
    cases.push_back(direct_launch_case(name, std::move(x), std::move(w), pad_lo, pad_hi, bias,
                                       stride, dilation));
  };
  add("conv_out c128 o3 bias", {1, 45, 70, 128}, {3, 3, 3, 128}, 1, 1, 1, 1, true);
  add("conv_out 200x200", {1, 200, 200, 128}, {3, 3, 3, 128}, 1, 1, 1, 1, true);
  add("o1 c40 batch 2", {2, 17, 33, 40}, {1, 3, 3, 40}, 1, 1, 1, 1, false);
  add("c136 o3 (5 chunks, 2 groups)", {1, 23, 41, 136}, {3, 3, 3, 136}, 1, 1, 1, 1, true);
  add("stride 2 o3 c64", {2, 40, 52, 64}, {3, 3, 3, 64}, 1, 0, 2, 1, true);
  add("dilation 2 o2 c32", {1, 30, 37, 32}, {2, 3, 3, 32}, 2, 2, 1, 2, false);
  add("1d o3 c64 k5", {2, 300, 64}, {3, 5, 64}, 4, -1, 1, 1, true);
  add("o6 c48 2x2 (shift-add in passes of 4 channels)", {2, 19, 26, 48}, {6, 2, 2, 48}, 1, 0, 1, 1,
      true);
  return same_bits_cases(cases, {{DType::bf16, DType::bf16}, {DType::f16, DType::f32}}, "taps",
                         {"tma"}, 14000);
}

INSTANTIATE_TEST_SUITE_P(SmallOTapsKernelBitsAndGrids, GpuConvSmallOSameBits,
                         ::testing::ValuesIn(taps_against_region()), same_bits_name);
INSTANTIATE_TEST_SUITE_P(SmallOTapsTmaFormMatchesTheRegisterForm, GpuConvSmallOSameBits,
                         ::testing::ValuesIn(tma_against_taps()), same_bits_name);
#endif

}  // namespace
}  // namespace gemmkit
