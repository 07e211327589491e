// gemmkit::conv and its shape helpers: parameter normalization, validation, backend dispatch.
#include <sstream>

#include "api/checks.h"
#include "api/dispatch.h"
#include "api/validate.h"
#include "common/problems.h"
#include "cpu/cpu_backend.h"
#ifdef GEMMKIT_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace gemmkit {

namespace {

constexpr const char* kOp = "conv";
// Bound on |padding| and on dilations: far above any real layer, low enough that the output
// size arithmetic below cannot overflow int64 with sizes below 2^62.
constexpr int64_t kMaxPadding = int64_t{1} << 40;
constexpr int64_t kMaxDilation = int64_t{1} << 20;

// Expands a parameter vector to `spatial` entries (empty -> default, one value -> broadcast).
void expand(const char* op, const char* name, const std::vector<int64_t>& values,
            int64_t default_value, int spatial, int64_t* out) {
  if (values.empty()) {
    for (int d = 0; d < spatial; ++d) out[d] = default_value;
  } else if (values.size() == 1) {
    for (int d = 0; d < spatial; ++d) out[d] = values[0];
  } else if (values.size() == static_cast<std::size_t>(spatial)) {
    for (int d = 0; d < spatial; ++d) out[d] = values[static_cast<std::size_t>(d)];
  } else {
    detail::fail(op, name,
                 detail::format_dims(values) + ": has " + std::to_string(values.size()) +
                     " entries; give 0, 1 or " + std::to_string(spatial) +
                     " (one per spatial dim)");
  }
}

std::vector<int64_t> output_shape_of(const detail::ConvProblem& p) {
  std::vector<int64_t> shape{p.batch};
  for (int d = 0; d < p.spatial; ++d) shape.push_back(p.out_size[d]);
  shape.push_back(p.out_channels);
  return shape;
}

std::string describe(const detail::ConvProblem& p) {
  std::ostringstream s;
  const auto dims = [&](const int64_t* v) {
    std::string r;
    for (int d = 0; d < p.spatial; ++d) r += (d ? "x" : "") + std::to_string(v[d]);
    return r;
  };
  s << "n=" << p.batch << " in=" << dims(p.in_size) << " c=" << p.in_channels
    << " o=" << p.out_channels << " kernel=" << dims(p.kernel_size) << " stride=" << dims(p.stride)
    << " pad=" << dims(p.padding_lo) << "/" << dims(p.padding_hi)
    << " kdil=" << dims(p.kernel_dilation) << " idil=" << dims(p.input_dilation)
    << " groups=" << p.groups << (p.flip ? " flip" : "") << " " << dtype_name(p.x.dtype)
    << (p.has_bias ? " bias" : "") << " on " << p.x.device.str();
  return s.str();
}

detail::ConvProblem validate_conv(const Tensor& x, const Tensor& weight,
                                  const std::optional<Tensor>& bias, const Tensor& out,
                                  const ConvParams& params) {
  using detail::fail;
  detail::check_rank_in_range(kOp, "x", x);
  if (x.rank < 3 || x.rank > 2 + detail::kMaxSpatial) {
    fail(kOp, "x",
         x.str() + ": has rank " + std::to_string(x.rank) +
             "; conv takes (n, spatial..., c) with 1, 2 or 3 spatial dims (rank 3-5)");
  }
  detail::check_tensor(kOp, "x", x, x.rank, /*allow_empty_dim0=*/true);
  detail::check_tensor(kOp, "weight", weight, x.rank);
  detail::check_tensor(kOp, "out", out, x.rank, /*allow_empty_dim0=*/true);
  if (bias) detail::check_tensor(kOp, "bias", *bias, 1);
  detail::check_operand_devices_and_dtypes(kOp, x, "weight", weight, bias, out);

  detail::ConvProblem p = detail::conv_geometry(kOp, x.sizes(), weight.sizes(), params);
  if (bias && bias->shape[0] != p.out_channels) {
    fail(kOp, "bias",
         bias->str() + ": must have shape [" + std::to_string(p.out_channels) +
             "] (o, weight's dim 0)");
  }
  const std::vector<int64_t> expected = output_shape_of(p);
  if (out.sizes() != expected) {
    fail(kOp, "out",
         out.str() + ": must have shape " + detail::format_dims(expected) +
             " (n, out_spatial..., o)");
  }
  detail::check_non_overlapping(kOp, "out", out);
  detail::check_disjoint(kOp, "out", out, "x", x);
  detail::check_disjoint(kOp, "out", out, "weight", weight);
  if (bias) detail::check_disjoint(kOp, "out", out, "bias", *bias);
  p.set_tensors(x, weight, bias, out);
  return p;
}

}  // namespace

namespace detail {

ConvProblem conv_geometry(const char* op, const std::vector<int64_t>& x_shape,
                          const std::vector<int64_t>& w_shape, const ConvParams& params) {
  ConvProblem p;
  const int rank = static_cast<int>(x_shape.size());
  if (rank < 3 || rank > 2 + kMaxSpatial) {
    fail(op, "x",
         "shape " + format_dims(x_shape) + ": has rank " + std::to_string(rank) +
             "; conv takes (n, spatial..., c) with 1, 2 or 3 spatial dims (rank 3-5)");
  }
  if (static_cast<int>(w_shape.size()) != rank) {
    fail(op, "weight",
         "shape " + format_dims(w_shape) + ": has rank " + std::to_string(w_shape.size()) +
             "; must equal x's rank " + std::to_string(rank) + " ((o, kernel..., c / groups))");
  }
  for (int i = 0; i < rank; ++i) {
    // n = 0 (an empty batch) is valid: every other size must be >= 1.
    if (x_shape[static_cast<std::size_t>(i)] < (i == 0 ? 0 : 1)) {
      fail(op, "x",
           "shape " + format_dims(x_shape) + ": dim " + std::to_string(i) + " has size " +
               std::to_string(x_shape[static_cast<std::size_t>(i)]) +
               (i == 0 ? "; the batch must be >= 0" : "; every size but the batch must be >= 1"));
    }
    if (w_shape[static_cast<std::size_t>(i)] < 1) {
      fail(op, "weight",
           "shape " + format_dims(w_shape) + ": dim " + std::to_string(i) + " has size " +
               std::to_string(w_shape[static_cast<std::size_t>(i)]) + "; every size must be >= 1");
    }
  }
  const int spatial = rank - 2;
  p.spatial = spatial;
  p.batch = x_shape.front();
  p.in_channels = x_shape.back();
  p.out_channels = w_shape.front();
  p.groups = params.groups;
  expand(op, "params.stride", params.stride, 1, spatial, p.stride);
  expand(op, "params.padding_lo", params.padding_lo, 0, spatial, p.padding_lo);
  expand(op, "params.padding_hi", params.padding_hi, 0, spatial, p.padding_hi);
  expand(op, "params.kernel_dilation", params.kernel_dilation, 1, spatial, p.kernel_dilation);
  expand(op, "params.input_dilation", params.input_dilation, 1, spatial, p.input_dilation);
  p.flip = params.flip;

  if (p.groups < 1) {
    fail(op, "params.groups", std::to_string(p.groups) + ": must be >= 1");
  }
  if (p.in_channels % p.groups != 0) {
    fail(op, "params.groups",
         std::to_string(p.groups) +
             ": must divide the input channels c = " + std::to_string(p.in_channels));
  }
  if (p.out_channels % p.groups != 0) {
    fail(op, "params.groups",
         std::to_string(p.groups) + ": must divide the output channels o = " +
             std::to_string(p.out_channels) + " (weight's dim 0)");
  }
  p.in_channels_per_group = p.in_channels / p.groups;
  p.out_channels_per_group = p.out_channels / p.groups;
  if (w_shape.back() != p.in_channels_per_group) {
    fail(op, "weight",
         "shape " + format_dims(w_shape) +
             ": last dim must be c / groups = " + std::to_string(p.in_channels) + " / " +
             std::to_string(p.groups) + " = " + std::to_string(p.in_channels_per_group));
  }
  for (int d = 0; d < spatial; ++d) {
    const std::string dim = "[" + std::to_string(d) + "]";
    const auto check_range = [&](const char* name, int64_t value, int64_t lo, int64_t hi,
                                 const char* rule) {
      if (value < lo || value > hi) fail(op, std::string(name) + dim, std::to_string(value) + rule);
    };
    check_range("params.stride", p.stride[d], 1, kMaxDilation, ": must be in [1, 2^20]");
    check_range("params.kernel_dilation", p.kernel_dilation[d], 1, kMaxDilation,
                ": must be in [1, 2^20]");
    check_range("params.input_dilation", p.input_dilation[d], 1, kMaxDilation,
                ": must be in [1, 2^20]");
    check_range("params.padding_lo", p.padding_lo[d], -kMaxPadding, kMaxPadding,
                ": must be in [-2^40, 2^40]");
    check_range("params.padding_hi", p.padding_hi[d], -kMaxPadding, kMaxPadding,
                ": must be in [-2^40, 2^40]");
    p.in_size[d] = x_shape[static_cast<std::size_t>(d + 1)];
    p.kernel_size[d] = w_shape[static_cast<std::size_t>(d + 1)];
    // Each overflow names the tensor, the spatial dim and the expression that overflows.
    const auto overflow = [&](const char* name, const std::vector<int64_t>& shape,
                              const std::string& expression) {
      fail(op, name,
           "shape " + format_dims(shape) + ": spatial dim " + std::to_string(d) + ": " +
               expression + " overflows int64");
    };
    int64_t dilated_in, padded, kernel_extent;
    if (__builtin_mul_overflow(p.in_size[d] - 1, p.input_dilation[d], &dilated_in)) {
      overflow("x", x_shape,
               "(in - 1) * input_dilation = " + std::to_string(p.in_size[d] - 1) + " * " +
                   std::to_string(p.input_dilation[d]));
    }
    if (__builtin_add_overflow(dilated_in, 1 + p.padding_lo[d], &padded) ||
        __builtin_add_overflow(padded, p.padding_hi[d], &padded)) {
      overflow("x", x_shape,
               "(in - 1) * input_dilation + 1 + padding_lo + padding_hi = " +
                   std::to_string(dilated_in) + " + 1 + " + std::to_string(p.padding_lo[d]) +
                   " + " + std::to_string(p.padding_hi[d]));
    }
    if (__builtin_mul_overflow(p.kernel_size[d] - 1, p.kernel_dilation[d], &kernel_extent) ||
        __builtin_add_overflow(kernel_extent, 1, &kernel_extent)) {
      overflow("weight", w_shape,
               "(kernel - 1) * kernel_dilation + 1 = " + std::to_string(p.kernel_size[d] - 1) +
                   " * " + std::to_string(p.kernel_dilation[d]) + " + 1");
    }
    if (padded < kernel_extent) {
      fail(op, "spatial dim " + dim,
           "has dilated, padded input size " + std::to_string(padded) +
               " ((in - 1) * input_dilation + 1 + padding_lo + padding_hi with in = " +
               std::to_string(p.in_size[d]) + ") smaller than the dilated kernel extent " +
               std::to_string(kernel_extent) + "; the output would be empty");
    }
    p.out_size[d] = (padded - kernel_extent) / p.stride[d] + 1;
  }
  int64_t positions = p.batch;
  for (int d = 0; d < spatial; ++d) {
    positions = checked_mul(positions, p.out_size[d], [&] {
      return std::string("gemmkit::") + op + ": output element count";
    });
  }
  checked_mul(positions, p.out_channels,
              [&] { return std::string("gemmkit::") + op + ": output element count"; });
  return p;
}

}  // namespace detail

std::vector<int64_t> conv_output_shape(const std::vector<int64_t>& x_shape,
                                       const std::vector<int64_t>& weight_shape,
                                       const ConvParams& params) {
  const detail::ConvProblem p =
      detail::conv_geometry("conv_output_shape", x_shape, weight_shape, params);
  return output_shape_of(p);
}

ConvParams conv_transpose_params(const std::vector<int64_t>& kernel_size,
                                 const std::vector<int64_t>& stride,
                                 const std::vector<int64_t>& padding,
                                 const std::vector<int64_t>& output_padding,
                                 const std::vector<int64_t>& dilation, int64_t groups) {
  constexpr const char* op = "conv_transpose_params";
  const int spatial = static_cast<int>(kernel_size.size());
  if (spatial < 1 || spatial > detail::kMaxSpatial) {
    detail::fail(op, "kernel_size",
                 detail::format_dims(kernel_size) + ": must have 1, 2 or 3 entries");
  }
  int64_t s[detail::kMaxSpatial], pad[detail::kMaxSpatial], out_pad[detail::kMaxSpatial],
      dil[detail::kMaxSpatial];
  expand(op, "stride", stride, 1, spatial, s);
  expand(op, "padding", padding, 0, spatial, pad);
  expand(op, "output_padding", output_padding, 0, spatial, out_pad);
  expand(op, "dilation", dilation, 1, spatial, dil);
  if (groups < 1) detail::fail(op, "groups", std::to_string(groups) + ": must be >= 1");
  ConvParams params;
  params.groups = groups;
  params.flip = true;
  params.stride.assign(static_cast<std::size_t>(spatial), 1);
  for (int d = 0; d < spatial; ++d) {
    const std::string dim = "[" + std::to_string(d) + "]";
    const int64_t k = kernel_size[static_cast<std::size_t>(d)];
    if (k < 1) detail::fail(op, "kernel_size" + dim, std::to_string(k) + ": must be >= 1");
    if (s[d] < 1 || s[d] > kMaxDilation) {
      detail::fail(op, "stride" + dim, std::to_string(s[d]) + ": must be in [1, 2^20]");
    }
    if (dil[d] < 1 || dil[d] > kMaxDilation) {
      detail::fail(op, "dilation" + dim, std::to_string(dil[d]) + ": must be in [1, 2^20]");
    }
    if (pad[d] < 0 || pad[d] > kMaxPadding) {
      detail::fail(op, "padding" + dim, std::to_string(pad[d]) + ": must be in [0, 2^40]");
    }
    if (out_pad[d] < 0 || (out_pad[d] >= s[d] && out_pad[d] >= dil[d])) {
      detail::fail(op, "output_padding" + dim,
                   std::to_string(out_pad[d]) + ": must be >= 0 and smaller than stride (" +
                       std::to_string(s[d]) + ") or dilation (" + std::to_string(dil[d]) + ")");
    }
    // padding_lo = dilation * (kernel - 1) - padding and padding_hi = padding_lo +
    // output_padding must be paddings conv() takes: within [-2^40, 2^40].
    int64_t lo = 0, hi = 0;
    bool overflows = __builtin_mul_overflow(dil[d], k - 1, &lo);
    if (!overflows) {
      lo -= pad[d];  // dilation * (kernel - 1) >= 0 and padding in [0, 2^40]: no overflow
      overflows = __builtin_add_overflow(lo, out_pad[d], &hi);
    }
    if (overflows || lo > kMaxPadding || hi > kMaxPadding) {
      detail::fail(
          op, "kernel_size" + dim,
          std::to_string(k) + ": with dilation " + std::to_string(dil[d]) + ", padding " +
              std::to_string(pad[d]) + " and output_padding " + std::to_string(out_pad[d]) +
              ", padding_lo = dilation * (kernel - 1) - padding" +
              (overflows ? " (or padding_hi) overflows int64"
                         : " = " + std::to_string(lo) + " and padding_hi = " + std::to_string(hi)) +
              "; conv takes paddings in [-2^40, 2^40]");
    }
    params.padding_lo.push_back(lo);
    params.padding_hi.push_back(hi);
    params.input_dilation.push_back(s[d]);
    params.kernel_dilation.push_back(dil[d]);
  }
  return params;
}

void conv(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
          const Tensor& out, const ConvParams& params, const ConvOptions& options, Stream stream) {
  const detail::ConvProblem problem = validate_conv(x, weight, bias, out, params);
  detail::check_switch_option(kOp, "options.deterministic", options.deterministic,
                              "GEMMKIT_DETERMINISTIC");
  CallInfo local;
  CallInfo& info = options.info ? *options.info : local;
  if (problem.batch == 0) {
    detail::finish_empty_call(kOp, x.device, "options.algo", options.algo, &info,
                              [&] { return describe(problem); });
    return;
  }
  detail::run_on_backend(
      kOp, x.device, "options.algo", options.algo, &info,
      [&] { cpu::conv(problem, options.algo == "reference", info); },
      [&] {
#ifdef GEMMKIT_WITH_CUDA
        cuda::conv(problem, options, stream, info);
#else
        (void)stream;
#endif
      },
      [&] { return describe(problem); });
}

}  // namespace gemmkit
