// `gemmkit bench` (one suite) and `gemmkit run` (the standard job: VAE decoder convs and MoE
// router linears).
#include <fstream>
#include <iostream>

#include "bench/report.h"
#include "bench/table.h"
#include "tools/commands.h"
#include "tools/suites.h"

namespace gemmkit::cli {
namespace {

const char* const kBenchUsage =
    "usage: gemmkit bench --suite PATH.csv [--suites DIR] [--device auto|cpu|cuda:I] [--json "
    "FILE]\n"
    "                     [--reps R] [--replays P] [--scale F] [--filter SUBSTR] [--seed S]\n"
    "                     [--no-cold] [--no-peers] [--host-cost C]\n"
    "  Runs every row of a linear or conv suite (told apart by the header): checks each result\n"
    "  against a double-precision reference, then times it. CPU: median of R calls (default 5).\n"
    "  CUDA: a graph of R calls (default 20) replayed P times (default 10), with warm and cold\n"
    "  L2, and the peers (cuBLASLt, cuDNN) timed the same way. --scale multiplies the spatial\n"
    "  sizes of a conv suite (to run big suites small on the CPU). A bare file name is looked up\n"
    "  in the suites folder (see `gemmkit run --help`). Exit status 1 when a row fails.\n";

const char* const kRunUsage =
    "usage: gemmkit run [--suites DIR] [--device auto|cpu|cuda:I] [--scale F] [--reps R]\n"
    "                   [--replays P] [--seed S] [--json FILE] [--no-cold] [--no-peers]\n"
    "  The FLUX.2 VAE decoder convolutions and the MoE router linears (rows of linear-decode.csv\n"
    "  named *router*), every result checked, then a summary. On a GPU: conv-flux2-vae-1024.csv\n"
    "  at full size. On the CPU: conv-flux2-vae-256.csv with spatial sizes x0.5 and 3 reps.\n"
    "  Suites come from --suites DIR, else $GEMMKIT_SUITES_DIR, else the suites that ship with\n"
    "  gemmkit: share/gemmkit/suites of an installed CLI, else bench/suites of the source tree.\n";

// The CPU version of `run` must stay well under two minutes on two cores. The 256x256 VAE at
// half its spatial size is ~80 GFLOP a pass over its shapes; with a warm-up and 3 timed calls
// the whole run took 5 s on two AVX2 cores, leaving room for slower machines and kernels.
constexpr double kCpuRunConvScale = 0.5;
constexpr int kCpuRunReps = 3;

std::vector<OptionSpec> suite_options(std::vector<OptionSpec> specs) {
  specs.insert(specs.end(), kTimingOptions.begin(), kTimingOptions.end());
  specs.push_back({"suites", true});
  specs.push_back({"json", true});
  specs.push_back({"scale", true});
  specs.push_back({"no-peers", false});
  return specs;
}

double scale_option(const Options& options, double fallback) {
  const double scale = options.number("scale", fallback);
  if (!(scale > 0)) throw UsageError("--scale must be > 0");
  return scale;
}

void write_json_file(const std::string& path, const std::string& command,
                     const std::vector<const bench::SuiteReport*>& reports) {
  bench::JsonWriter json;
  json.begin_object();
  json.field("command", command);
  json.field("build_info", build_info());
  json.key("suites").begin_array();
  for (const auto* report : reports) bench::write_json(json, *report);
  json.end_array();
  json.end_object();
  std::ofstream file(path);
  if (!file) throw Error("cannot write --json file '" + path + "'");
  file << json.str() << "\n";
  if (!file) throw Error("error writing --json file '" + path + "'");
}

bench::PeerSet peers_for(const Options& options, const bench::BenchSettings& settings,
                         std::vector<std::string>& notes) {
  if (options.has("no-peers")) return {};
  return bench::make_peers(settings.device, notes);
}

}  // namespace

int command_bench(const Args& args) {
  const Options options("bench", args, suite_options({{"suite", true}, {"filter", true}}));
  if (options.help()) {
    std::cout << kBenchUsage;
    return 0;
  }
  const std::string path =
      resolve_suite_path(options.required("suite"), options.text("suites", ""));
  bench::Suite suite = bench::load_suite(path);
  const double scale = scale_option(options, 1.0);
  std::vector<std::string> notes;
  if (suite.kind == bench::SuiteKind::linear && scale != 1.0) {
    notes.push_back("--scale applies to conv suites only; ignored");
  }
  suite = bench::filter_suite(bench::scale_suite(suite, scale), options.text("filter", ""));
  if (suite.size() == 0)
    throw Error("no row of " + path + " has a name containing '" + options.text("filter", "") +
                "'");

  const bench::BenchSettings settings = settings_from(options);
  bench::PeerSet peers = peers_for(options, settings, notes);
  std::cout << "gemmkit bench: " << path << " ("
            << (suite.kind == bench::SuiteKind::linear ? "linear" : "conv") << ", " << suite.size()
            << " rows) on " << settings.device.str();
  if (scale != 1.0 && suite.kind == bench::SuiteKind::conv)
    std::cout << ", spatial sizes x" << scale;
  std::cout << "\n" << std::flush;

  bench::SuiteReport report = bench::run_suite(suite, scale, settings, peers, &std::cerr);
  report.notes.insert(report.notes.begin(), notes.begin(), notes.end());
  std::cout << bench::render_suite_table(report);
  if (options.has("json")) write_json_file(options.text("json", ""), "bench", {&report});
  return bench::all_passed(report) ? 0 : 1;
}

int command_run(const Args& args) {
  const Options options("run", args, suite_options({}));
  if (options.help()) {
    std::cout << kRunUsage;
    return 0;
  }
  bench::BenchSettings settings = settings_from(options);
  const bool on_cuda = settings.device.is_cuda();
  if (!on_cuda && !options.has("reps")) settings.reps = kCpuRunReps;
  const std::string dir = locate_suites_dir(options.text("suites", ""));
  const std::string conv_path =
      dir + (on_cuda ? "/conv-flux2-vae-1024.csv" : "/conv-flux2-vae-256.csv");
  const std::string linear_path = dir + "/linear-decode.csv";
  const double scale = scale_option(options, on_cuda ? 1.0 : kCpuRunConvScale);

  const bench::Suite conv_suite = bench::scale_suite(bench::load_suite(conv_path), scale);
  const bench::Suite router_suite = bench::filter_suite(bench::load_suite(linear_path), "router");
  if (conv_suite.kind != bench::SuiteKind::conv || router_suite.kind != bench::SuiteKind::linear ||
      router_suite.size() == 0)
    throw Error("unexpected suites in " + dir + ": need a conv suite " + conv_path +
                " and router rows in " + linear_path);

  std::vector<std::string> notes;
  bench::PeerSet peers = peers_for(options, settings, notes);
  std::cout << "gemmkit run on " << settings.device.str() << ": FLUX.2 VAE decoder convs ("
            << conv_path;
  if (scale != 1.0) std::cout << ", spatial sizes x" << scale;
  std::cout << ") and MoE router linears (" << router_suite.size() << " rows of " << linear_path
            << ")\n"
            << std::flush;
  for (const auto& note : notes) std::cerr << "gemmkit: " << note << "\n";

  bench::SuiteReport conv_report = bench::run_suite(conv_suite, scale, settings, peers, &std::cerr);
  bench::SuiteReport router_report =
      bench::run_suite(router_suite, 1.0, settings, peers, &std::cerr);
  conv_report.notes = notes;
  std::cout << bench::render_summary_table({&conv_report, &router_report});

  const auto conv_totals = bench::suite_totals(conv_report);
  const auto router_totals = bench::suite_totals(router_report);
  const bool passed = bench::all_passed(conv_report) && bench::all_passed(router_report);
  std::cout << "total: VAE decoder convs " << bench::format_number(conv_totals.gemmkit_us)
            << " us (count-weighted, " << conv_totals.gemmkit_rows << " shapes), router linears "
            << bench::format_number(router_totals.gemmkit_us) << " us ("
            << router_totals.gemmkit_rows << " rows); "
            << (passed ? "every check PASS"
                       : std::to_string(conv_totals.failed_rows + router_totals.failed_rows) +
                             " rows FAILED")
            << "\n";
  if (options.has("json"))
    write_json_file(options.text("json", ""), "run", {&conv_report, &router_report});
  return passed ? 0 : 1;
}

}  // namespace gemmkit::cli
