#include <cmath>
#include <cstdio>
#include <iostream>

#include "bench/table.h"
#include "tools/commands.h"

namespace gemmkit::cli {

const std::vector<OptionSpec> kTimingOptions{{"device", true},   {"reps", true},
                                             {"replays", true},  {"seed", true},
                                             {"no-cold", false}, {"host-cost", true}};

Device resolve_device(const std::string& text) {
  if (text.empty() || text == "auto") {
    const auto devices = cuda_devices();
    return devices.empty() ? Device::cpu() : devices.front().device;
  }
  try {
    return parse_device(text);
  } catch (const Error& error) {
    throw UsageError(error.what());  // names the option's value and the accepted ones
  }
}

DType dtype_option(const Options& options, const std::string& name, DType fallback) {
  if (!options.has(name)) return fallback;
  try {
    return parse_dtype(options.text(name, ""));
  } catch (const Error& error) {
    throw UsageError("--" + name + " '" + options.text(name, "") + "': expected bf16, f16 or f32");
  }
}

bench::BenchSettings settings_from(const Options& options) {
  bench::BenchSettings settings;
  settings.device = resolve_device(options.text("device", "auto"));
  settings.reps = static_cast<int>(options.integer("reps", 0, 1));
  settings.replays = static_cast<int>(options.integer("replays", 0, 1));
  settings.seed = static_cast<uint64_t>(options.integer("seed", 0x5eed, 0));
  settings.cold = !options.has("no-cold");
  settings.host_cost_calls = static_cast<int>(options.integer("host-cost", 0, 1));
  return settings;
}

namespace {

std::string describe_time(const bench::Measurement& m) {
  std::string text = bench::format_number(m.timing.warm_us) + " us";
  if (!std::isnan(m.timing.cold_us))
    text += " warm L2, " + bench::format_number(m.timing.cold_us) + " us cold L2 (" +
            std::to_string(m.timing.cold_copies) + " input copies)";
  return text;
}

}  // namespace

void print_case(const bench::CaseResult& result, const bench::BenchSettings& settings) {
  const bench::Measurement& m = result.gemmkit;
  const double us = m.timing.warm_us;
  std::printf("problem   %s %s on %s\n", result.name.c_str(), result.shape.c_str(),
              settings.device.str().c_str());
  std::printf("kernel    %s  [%s backend: %s]\n", result.info.kernel.c_str(),
              result.info.backend.c_str(), result.info.reason.c_str());
  std::printf("time      %s; %s\n", describe_time(m).c_str(), m.timing.method.c_str());
  std::printf("rate      %.1f GFLOP/s, %.1f GB/s\n", result.cost.flops / (us * 1e3),
              result.cost.bytes / (us * 1e3));
  if (!std::isnan(result.floor_us))
    std::printf("floor     %s us on an H200 (this run: %.0f%% of the floor's speed)\n",
                bench::format_number(result.floor_us).c_str(), 100 * result.floor_us / us);
  const auto print_host = [](const char* who, const bench::Timing& t) {
    if (std::isnan(t.host_us)) return;
    std::printf(
        "host      %s %s us per eager call on the calling thread (an empty kernel launch: "
        "%s us; without attributes %s; cuLaunchKernelEx %s)\n",
        who, bench::format_number(t.host_us).c_str(),
        bench::format_number(t.empty_launch_us).c_str(),
        bench::format_number(t.empty_plain_launch_us).c_str(),
        bench::format_number(t.empty_driver_launch_us).c_str());
  };
  print_host("gemmkit", m.timing);
  for (const auto& peer : result.peers) print_host(peer.name.c_str(), peer.timing);
  for (const auto& peer : result.peers) {
    if (!peer.ran) {
      std::printf("peer      %s %s: %s\n", peer.name.c_str(), peer.unsupported ? "n/a" : "error",
                  peer.note.c_str());
      continue;
    }
    std::printf("peer      %s %s (%.2fx gemmkit's time), check %s\n", peer.name.c_str(),
                describe_time(peer).c_str(), peer.timing.warm_us / us, peer.check.verdict());
  }
  std::printf("check     %s\n", m.check.summary().c_str());
}

}  // namespace gemmkit::cli
