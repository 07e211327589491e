// Launcher of the blocked depthwise variant (depthwise.cuh): one instantiation per element
// types, vector (2: multiplier 1 and aligned x / out; 1: anything), kernel width (3, 5, 7),
// last-dim stride (1, 2) and thread-tile rows (1, 2); the tile width follows from the kernel width
// and the stride (depthwise_blocked_tw). Its own file so that the two depthwise launchers compile
// in parallel.
#include "cuda/common/cuda_check.h"
#include "cuda/conv/common/dispatch.cuh"
#include "cuda/conv/depthwise/blocked.cuh"
#include "cuda/conv/depthwise/launch.h"

namespace gemmkit::cuda::conv_impl {

namespace {

template <typename T, typename TOut, int kV, int kKW, int kS>
void launch_rows(const ConvGeometry& g, const DepthwiseTiling& t, const ConvPointers& ptr,
                 LaunchGrid grid, int64_t smem_bytes, cudaStream_t stream) {
  constexpr int kTW = depthwise_blocked_tw(kKW, kS);
  const auto run = [&](auto kernel) {
    const dim3 block(static_cast<unsigned>(t.cvt), static_cast<unsigned>(t.spb()));
    kernel<<<dim3(grid.x, grid.y, grid.z), block, static_cast<size_t>(smem_bytes), stream>>>(
        g, t, static_cast<const T*>(ptr.x), static_cast<const T*>(ptr.w),
        static_cast<const T*>(ptr.bias), static_cast<TOut*>(ptr.out));
    GEMMKIT_CUDA_CHECK_LAUNCH();
  };
  static_assert(kDepthwiseBlockedRows == 2, "instantiated for 1- and 2-row thread tiles");
  if (t.th == 1) {
    run(conv_depthwise_blocked_kernel<T, TOut, kV, kKW, kS, 1, kTW>);
  } else if (t.th == 2) {
    run(conv_depthwise_blocked_kernel<T, TOut, kV, kKW, kS, 2, kTW>);
  } else {
    throw Error("gemmkit::conv: internal error: blocked depthwise tile of " + std::to_string(t.th) +
                " rows");
  }
}

template <typename T, typename TOut, int kV>
void launch_shape(const ConvGeometry& g, const DepthwiseTiling& t, const ConvPointers& ptr,
                  LaunchGrid grid, int64_t smem_bytes, cudaStream_t stream) {
  const int64_t kw = g.kernel[2], s = g.stride[2];
  const auto pick = [&](auto kw_tag, auto s_tag) {
    launch_rows<T, TOut, kV, decltype(kw_tag)::value, decltype(s_tag)::value>(g, t, ptr, grid,
                                                                              smem_bytes, stream);
  };
  using One = std::integral_constant<int, 1>;
  using Two = std::integral_constant<int, 2>;
  if (kw == 3 && s == 1) return pick(std::integral_constant<int, 3>{}, One{});
  if (kw == 3 && s == 2) return pick(std::integral_constant<int, 3>{}, Two{});
  if (kw == 5 && s == 1) return pick(std::integral_constant<int, 5>{}, One{});
  if (kw == 5 && s == 2) return pick(std::integral_constant<int, 5>{}, Two{});
  if (kw == 7 && s == 1) return pick(std::integral_constant<int, 7>{}, One{});
  if (kw == 7 && s == 2) return pick(std::integral_constant<int, 7>{}, Two{});
  throw Error("gemmkit::conv: internal error: blocked depthwise kernel width " +
              std::to_string(kw) + ", stride " + std::to_string(s));
}

}  // namespace

void launch_conv_depthwise_blocked(const ConvGeometry& g, const DepthwiseTiling& t, int vector,
                                   DType x_dtype, DType out_dtype, const ConvPointers& ptr,
                                   LaunchGrid grid, int64_t smem_bytes, cudaStream_t stream) {
  dispatch_types(x_dtype, out_dtype, [&](auto in_tag, auto out_tag) {
    using T = typename decltype(in_tag)::type;
    using TOut = typename decltype(out_tag)::type;
    if (vector == 2) {
      launch_shape<T, TOut, 2>(g, t, ptr, grid, smem_bytes, stream);
    } else if (vector == 1) {
      launch_shape<T, TOut, 1>(g, t, ptr, grid, smem_bytes, stream);
    } else {
      throw Error("gemmkit::conv: internal error: blocked depthwise vector " +
                  std::to_string(vector));
    }
  });
}

}  // namespace gemmkit::cuda::conv_impl
