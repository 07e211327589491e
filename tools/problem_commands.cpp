// `gemmkit linear` and `gemmkit conv`: one problem, given on the command line.
#include <iostream>

#include "bench/report.h"
#include "tools/commands.h"

namespace gemmkit::cli {
namespace {

const char* const kLinearUsage =
    "usage: gemmkit linear --n N --m M --k K [--bias] [--dtype bf16|f16|f32] [--out-dtype DTYPE]\n"
    "                      [--device auto|cpu|cuda:I] [--kernel NAME] [--check] [--reps R]\n"
    "                      [--replays P] [--seed S] [--no-cold] [--no-peers] [--host-cost C]\n"
    "  out[n,m] = x[n,k] . w[m,k]^T (+ bias[m]) with random data; prints the kernel gemmkit "
    "chose,\n"
    "  the median time, GFLOP/s and GB/s. --check compares with a double-precision reference\n"
    "  (every output when small, sampled otherwise) and exits 1 on FAIL. On CUDA, R calls are\n"
    "  captured in a graph replayed P times (warm and cold L2), and cuBLASLt runs as a peer.\n"
    "  --host-cost C also times C eager calls on the CPU's clock: the host cost of one call\n"
    "  (gemmkit's and each peer's), beside an empty kernel launch.\n";

const char* const kConvUsage =
    "usage: gemmkit conv --in 64x64 --c C --o O --kernel 3x3 [--n N] [--stride 1x1]\n"
    "                    [--pad P | --pad-lo P --pad-hi P] [--kdil D] [--idil D] [--groups G]\n"
    "                    [--flip] [--bias] [--dtype bf16|f16|f32] [--device auto|cpu|cuda:I]\n"
    "                    [--algo NAME] [--check] [--reps R] [--replays P] [--seed S]\n"
    "                    [--weight-layout ohwi|filter] [--no-cold] [--no-peers] [--host-cost C]\n"
    "  conv_general (see gemmkit.h): x (n, in..., c), weight (o, kernel..., c/groups),\n"
    "  out (n, out..., o). Per-dim values are 'x'-separated; one value applies to every dim.\n"
    "  --weight-layout filter stores the weight as (c, kernel..., o) (PyTorch's ConvTranspose\n"
    "  weight in channels-last memory) and passes the permuted view: transposed convolutions\n"
    "  with one group, where the cuDNN path then reads it in place.\n"
    "  Timing and --check as for `gemmkit linear`; cuDNN runs as a peer when built with it.\n";

std::vector<OptionSpec> with_timing(std::vector<OptionSpec> specs) {
  specs.insert(specs.end(), kTimingOptions.begin(), kTimingOptions.end());
  return specs;
}

// Per-dim option: absent -> `fallback` per dim; one value -> every dim; else exactly `dims`.
std::vector<int64_t> per_dim(const Options& options, const std::string& name, int dims,
                             int64_t fallback) {
  auto values = options.dims(name, std::vector<int64_t>(static_cast<std::size_t>(dims), fallback));
  if (values.size() == 1) values.assign(static_cast<std::size_t>(dims), values[0]);
  if (static_cast<int>(values.size()) != dims)
    throw UsageError("conv: --" + name + " has " + std::to_string(values.size()) +
                     " values but --in has " + std::to_string(dims) + " dims");
  return values;
}

int finish(const bench::CaseResult& result, const bench::BenchSettings& settings) {
  if (!result.gemmkit.ran) throw Error(result.gemmkit.note);
  print_case(result, settings);
  return result.gemmkit.check_failed() ? 1 : 0;
}

}  // namespace

int command_linear(const Args& args) {
  const Options options("linear", args,
                        with_timing({{"n", true},
                                     {"m", true},
                                     {"k", true},
                                     {"bias", false},
                                     {"dtype", true},
                                     {"out-dtype", true},
                                     {"kernel", true},
                                     {"check", false},
                                     {"no-peers", false}}));
  if (options.help()) {
    std::cout << kLinearUsage;
    return 0;
  }
  bench::LinearRow row;
  row.name = "linear";
  row.n = options.required_integer("n", 1);
  row.m = options.required_integer("m", 1);
  row.k = options.required_integer("k", 1);
  row.bias = options.has("bias");
  row.dtype = dtype_option(options, "dtype", DType::bf16);
  row.out_dtype = dtype_option(options, "out-dtype", row.dtype);

  bench::BenchSettings settings = settings_from(options);
  settings.check = options.has("check");
  settings.linear_kernel = options.text("kernel", "");
  std::vector<std::string> notes;
  bench::PeerSet peers;
  if (!options.has("no-peers")) peers = bench::make_peers(settings.device, notes);
  for (const auto& note : notes) std::cerr << "gemmkit: " << note << "\n";
  return finish(bench::run_linear_case(row, settings, peers), settings);
}

int command_conv(const Args& args) {
  const Options options("conv", args,
                        with_timing({{"n", true},
                                     {"in", true},
                                     {"c", true},
                                     {"o", true},
                                     {"kernel", true},
                                     {"stride", true},
                                     {"pad", true},
                                     {"pad-lo", true},
                                     {"pad-hi", true},
                                     {"kdil", true},
                                     {"idil", true},
                                     {"groups", true},
                                     {"flip", false},
                                     {"bias", false},
                                     {"dtype", true},
                                     {"weight-layout", true},
                                     {"algo", true},
                                     {"check", false},
                                     {"no-peers", false}}));
  if (options.help()) {
    std::cout << kConvUsage;
    return 0;
  }
  bench::ConvRow row;
  row.name = "conv";
  row.n = options.integer("n", 1, 1);
  row.in_spatial = options.dims("in", {});
  if (row.in_spatial.empty()) throw UsageError("conv: missing required option '--in'");
  const int dims = row.spatial_dims();
  row.c = options.required_integer("c", 1);
  row.o = options.required_integer("o", 1);
  options.required("kernel");
  row.kernel = per_dim(options, "kernel", dims, 1);
  row.stride = per_dim(options, "stride", dims, 1);
  if (options.has("pad") && (options.has("pad-lo") || options.has("pad-hi")))
    throw UsageError("conv: give --pad, or --pad-lo/--pad-hi, not both");
  const auto pad = per_dim(options, "pad", dims, 0);
  row.pad_lo = options.has("pad") ? pad : per_dim(options, "pad-lo", dims, 0);
  row.pad_hi = options.has("pad") ? pad : per_dim(options, "pad-hi", dims, 0);
  row.kdil = per_dim(options, "kdil", dims, 1);
  row.idil = per_dim(options, "idil", dims, 1);
  row.groups = options.integer("groups", 1, 1);
  row.flip = options.has("flip");
  row.bias = options.has("bias");
  row.dtype = dtype_option(options, "dtype", DType::bf16);
  const std::string layout = options.text("weight-layout", "ohwi");
  if (layout != "ohwi" && layout != "filter") {
    throw UsageError("conv: --weight-layout must be ohwi or filter, not '" + layout + "'");
  }
  row.weight_filter_layout = layout == "filter";
  if (row.weight_filter_layout && (!bench::conv_is_transposed(row) || row.groups != 1)) {
    throw UsageError(
        "conv: --weight-layout filter needs a transposed convolution (--idil > 1) with one group");
  }
  // Let the library judge the problem first: its message names the broken rule.
  conv_output_shape(bench::conv_x_shape(row), bench::conv_weight_shape(row),
                    bench::conv_params(row));

  bench::BenchSettings settings = settings_from(options);
  settings.check = options.has("check");
  settings.conv_algo = options.text("algo", "");
  std::vector<std::string> notes;
  bench::PeerSet peers;
  if (!options.has("no-peers")) peers = bench::make_peers(settings.device, notes);
  for (const auto& note : notes) std::cerr << "gemmkit: " << note << "\n";
  return finish(bench::run_conv_case(row, settings, peers), settings);
}

}  // namespace gemmkit::cli
