// gemmkit::linear: validation, then the backend of the tensors' device.
#include <sstream>

#include "api/dispatch.h"
#include "api/validate.h"
#include "common/problems.h"
#include "cpu/cpu_backend.h"
#ifdef GEMMKIT_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace gemmkit {

namespace {

constexpr const char* kOp = "linear";

detail::LinearProblem validate_linear(const Tensor& x, const Tensor& w,
                                      const std::optional<Tensor>& bias, const Tensor& out) {
  using detail::fail;
  detail::check_tensor(kOp, "x", x, 2, /*allow_empty_dim0=*/true);
  detail::check_tensor(kOp, "w", w, 2);
  detail::check_tensor(kOp, "out", out, 2, /*allow_empty_dim0=*/true);
  if (bias) detail::check_tensor(kOp, "bias", *bias, 1);

  detail::check_operand_devices_and_dtypes(kOp, x, "w", w, bias, out);
  if (w.shape[1] != x.shape[1]) {
    fail(kOp, "w",
         w.str() + ": w[m, k] must have k = " + std::to_string(x.shape[1]) + " (x's dim 1)");
  }
  if (bias && bias->shape[0] != w.shape[0]) {
    fail(kOp, "bias",
         bias->str() + ": must have shape [" + std::to_string(w.shape[0]) + "] (m, w's dim 0)");
  }
  if (out.shape[0] != x.shape[0] || out.shape[1] != w.shape[0]) {
    fail(kOp, "out",
         out.str() + ": must have shape [" + std::to_string(x.shape[0]) + ", " +
             std::to_string(w.shape[0]) + "] ([n, m])");
  }
  detail::check_non_overlapping(kOp, "out", out);
  detail::check_disjoint(kOp, "out", out, "x", x);
  detail::check_disjoint(kOp, "out", out, "w", w);
  if (bias) detail::check_disjoint(kOp, "out", out, "bias", *bias);

  // Built in one step: every field copied once (a default-built problem would zero its four
  // descriptors first, on every call).
  return detail::LinearProblem{
      x.shape[0], w.shape[0], x.shape[1], x, w, bias.has_value(), bias ? *bias : Tensor{}, out};
}

std::string describe(const detail::LinearProblem& p) {
  std::ostringstream s;
  s << "n=" << p.n << " m=" << p.m << " k=" << p.k << " " << dtype_name(p.x.dtype) << "->"
    << dtype_name(p.out.dtype) << (p.has_bias ? " bias" : "") << " on " << p.x.device.str();
  return s.str();
}

}  // namespace

void linear(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias, const Tensor& out,
            const LinearOptions& options, Stream stream) {
  const detail::LinearProblem problem = validate_linear(x, w, bias, out);
  detail::check_switch_option(kOp, "options.deterministic", options.deterministic,
                              "GEMMKIT_DETERMINISTIC");
  detail::check_switch_option(kOp, "options.batch_invariant", options.batch_invariant,
                              "GEMMKIT_LINEAR_BATCH_INVARIANT");
  detail::check_switch_option(kOp, "options.pdl", options.pdl, "GEMMKIT_LINEAR_PDL");
  CallInfo local;
  CallInfo* const info = detail::call_info_sink(options.info, local);
  if (problem.n == 0) {
    detail::finish_empty_call(kOp, x.device, "options.kernel", options.kernel, info,
                              [&] { return describe(problem); });
    return;
  }
  detail::run_on_backend(
      kOp, x.device, "options.kernel", options.kernel, info,
      [&] { cpu::linear(problem, options.kernel == "reference", info); },
      [&] {
#ifdef GEMMKIT_WITH_CUDA
        cuda::linear(problem, options, stream, info);
#else
        (void)stream;
#endif
      },
      [&] { return describe(problem); });
}

}  // namespace gemmkit
