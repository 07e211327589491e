#include "bench/report.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>

#include "bench/table.h"

namespace gemmkit::bench {
namespace {

std::string check_cell(const Measurement& m) {
  if (!m.ran) return m.unsupported ? "n/a" : "ERROR";
  if (!m.check.ran) return "-";
  char text[48];
  std::snprintf(text, sizeof(text), "%s %.1e", m.check.verdict(), m.check.max_error);
  return text;
}

// The peer a row is compared with: the fastest that ran and passed its check; else one that
// ran; else the first (so the table can say n/a or error).
const Measurement* best_peer(const CaseResult& result) {
  const Measurement* best = nullptr;
  for (const auto& peer : result.peers)
    if (peer.ran && !peer.check_failed() && !std::isnan(peer.timing.warm_us) &&
        (!best || peer.timing.warm_us < best->timing.warm_us))
      best = &peer;
  if (best) return best;
  for (const auto& peer : result.peers)
    if (peer.ran) return &peer;
  return result.peers.empty() ? nullptr : &result.peers.front();
}

double gflops(const CaseResult& result, double us) {
  return result.cost.flops / (us * 1e3);
}

std::string ratio_cell(double numerator, double denominator) {
  if (!(numerator > 0) || !(denominator > 0)) return "";
  char text[32];
  std::snprintf(text, sizeof(text), "%.2fx", numerator / denominator);
  return text;
}

std::string percent_cell(double fraction) {
  if (std::isnan(fraction)) return "n/a";
  char text[32];
  std::snprintf(text, sizeof(text), "%.0f%%", 100 * fraction);
  return text;
}

std::string peer_time_cell(const Measurement& peer) {
  if (!peer.ran) return peer.unsupported ? "n/a" : "error";
  std::string cell = format_number(peer.timing.warm_us);
  if (peer.check_failed()) cell += " FAIL";
  return cell;
}

// One line per distinct reason: "cudnn n/a (reason): row, row".
std::vector<std::string> collect_notes(const SuiteReport& report) {
  std::vector<std::string> notes = report.notes;
  std::map<std::string, std::string> grouped;  // "who: why" -> rows
  const auto add = [&](const std::string& key, const std::string& row) {
    std::string& rows = grouped[key];
    rows += (rows.empty() ? "" : ", ") + row;
  };
  for (const auto& result : report.results) {
    if (!result.gemmkit.ran) add("gemmkit error: " + result.gemmkit.note, result.name);
    if (result.gemmkit.check_failed())
      add("gemmkit check failed", result.name + " (" + result.gemmkit.check.summary() + ")");
    for (const auto& peer : result.peers) {
      if (peer.unsupported)
        add(peer.name + " n/a: " + peer.note, result.name);
      else if (!peer.ran)
        add(peer.name + " error: " + peer.note, result.name);
      else if (peer.check_failed())
        add(peer.name + " check failed", result.name + " (" + peer.check.summary() + ")");
    }
  }
  for (const auto& [key, rows] : grouped) notes.push_back(key + " [" + rows + "]");
  return notes;
}

std::string timing_description(const SuiteReport& report) {
  for (const auto& result : report.results) {
    if (!result.gemmkit.ran || result.gemmkit.timing.method.empty()) continue;
    std::string text = "timing: " + result.gemmkit.timing.method;
    if (report.settings.device.is_cuda())
      text += "; cold L2: the same, rotating through copies of the inputs that exceed 2x L2";
    return text;
  }
  return "";
}

}  // namespace

Suite filter_suite(const Suite& suite, const std::string& filter) {
  if (filter.empty()) return suite;
  Suite kept = suite;
  kept.linear_rows.clear();
  kept.conv_rows.clear();
  for (const auto& row : suite.linear_rows)
    if (row.name.find(filter) != std::string::npos) kept.linear_rows.push_back(row);
  for (const auto& row : suite.conv_rows)
    if (row.name.find(filter) != std::string::npos) kept.conv_rows.push_back(row);
  return kept;
}

Suite scale_suite(const Suite& suite, double scale) {
  Suite scaled = suite;
  for (auto& row : scaled.conv_rows) row = scale_conv_row(row, scale);
  return scaled;
}

SuiteReport run_suite(const Suite& suite, double scale, const BenchSettings& settings,
                      PeerSet& peers, std::ostream* progress) {
  SuiteReport report;
  report.suite = suite;
  report.scale = scale;
  report.settings = settings;
  const std::size_t total = suite.size();
  for (std::size_t i = 0; i < total; ++i) {
    const bool linear = suite.kind == SuiteKind::linear;
    const std::string& name = linear ? suite.linear_rows[i].name : suite.conv_rows[i].name;
    if (progress) *progress << "[" << i + 1 << "/" << total << "] " << name << " ..." << std::flush;
    CaseResult result;
    try {
      result = linear ? run_linear_case(suite.linear_rows[i], settings, peers)
                      : run_conv_case(suite.conv_rows[i], settings, peers);
    } catch (const std::exception& error) {  // making the operands failed (memory, device)
      result.name = name;
      result.shape =
          linear ? describe_linear(suite.linear_rows[i]) : describe_conv(suite.conv_rows[i]);
      result.gemmkit.name = "gemmkit";
      result.gemmkit.note = error.what();
    }
    if (progress) {
      if (result.gemmkit.ran)
        *progress << " " << format_number(result.gemmkit.timing.warm_us) << " us "
                  << result.gemmkit.check.verdict();
      else
        *progress << " error";
      *progress << "\n";
    }
    report.results.push_back(std::move(result));
  }
  return report;
}

SuiteTotals suite_totals(const SuiteReport& report) {
  SuiteTotals totals;
  for (const auto& result : report.results) {
    const double count = static_cast<double>(result.count);
    if (!result.ok()) ++totals.failed_rows;
    if (!result.gemmkit.ran) continue;
    const double us = result.gemmkit.timing.warm_us;
    if (std::isnan(us)) continue;
    totals.gemmkit_us += count * us;
    ++totals.gemmkit_rows;
    if (!std::isnan(result.floor_us)) totals.floor_us += count * result.floor_us;
    const Measurement* peer = best_peer(result);
    if (peer && peer->ran && !std::isnan(peer->timing.warm_us)) {
      totals.paired_gemmkit_us += count * us;
      totals.paired_peer_us += count * peer->timing.warm_us;
      ++totals.paired_rows;
    }
  }
  return totals;
}

bool all_passed(const SuiteReport& report) {
  for (const auto& result : report.results)
    if (!result.ok()) return false;
  return true;
}

std::string render_suite_table(const SuiteReport& report) {
  using Align = TextTable::Align;
  const bool on_cuda = report.settings.device.is_cuda();
  const bool conv = report.suite.kind == SuiteKind::conv;
  bool have_peers = false;
  for (const auto& result : report.results) have_peers = have_peers || !result.peers.empty();

  TextTable table;
  table.add_column("name", Align::left);
  table.add_column("shape", Align::left);
  table.add_column("kernel", Align::left);
  table.add_column("check", Align::left);
  table.add_column("us");
  if (on_cuda) table.add_column("cold us");
  if (conv) {
    table.add_column("count");
    table.add_column("us x count");
  }
  table.add_column("GFLOP/s");
  table.add_column("GB/s");
  if (on_cuda) {
    table.add_column("floor us");
    table.add_column("floor/us");
  }
  if (have_peers) {
    table.add_column("peer", Align::left);
    table.add_column("peer us");
    if (on_cuda) table.add_column("peer cold");
    table.add_column("peer/gemmkit");
  }

  for (const auto& result : report.results) {
    const Measurement& m = result.gemmkit;
    const double us = m.ran ? m.timing.warm_us : kNaN;
    std::vector<std::string> cells{result.name, result.shape,
                                   m.ran ? result.info.kernel : (m.unsupported ? "n/a" : "ERROR"),
                                   check_cell(m), format_number(us, "-")};
    if (on_cuda) cells.push_back(format_number(m.timing.cold_us, "-"));
    if (conv) {
      cells.push_back(std::to_string(result.count));
      cells.push_back(format_number(us * static_cast<double>(result.count), "-"));
    }
    cells.push_back(format_fixed(gflops(result, us), 1, "-"));
    cells.push_back(format_fixed(result.cost.bytes / (us * 1e3), 1, "-"));
    if (on_cuda) {
      cells.push_back(format_number(result.floor_us));
      cells.push_back(percent_cell(result.floor_us / us));
    }
    if (have_peers) {
      const Measurement* peer = best_peer(result);
      cells.push_back(peer ? peer->name : "");
      cells.push_back(peer ? peer_time_cell(*peer) : "n/a");
      if (on_cuda)
        cells.push_back(peer && peer->ran ? format_number(peer->timing.cold_us, "-") : "");
      cells.push_back(peer && peer->ran ? ratio_cell(peer->timing.warm_us, us) : "");
    }
    table.add_row(cells);
  }

  const SuiteTotals totals = suite_totals(report);
  table.add_separator();
  std::vector<std::string> cells{
      conv ? "total (count-weighted)" : "total",
      std::to_string(totals.gemmkit_rows) + " of " + std::to_string(report.results.size()) +
          " rows ran",
      "", totals.failed_rows ? std::to_string(totals.failed_rows) + " failed" : "all PASS"};
  cells.push_back(conv ? "" : format_number(totals.gemmkit_us));
  if (on_cuda) cells.push_back("");
  if (conv) {
    cells.push_back("");
    cells.push_back(format_number(totals.gemmkit_us));
  }
  cells.push_back("");
  cells.push_back("");
  if (on_cuda) {
    cells.push_back(format_number(totals.floor_us));
    cells.push_back(percent_cell(totals.floor_us / totals.gemmkit_us));
  }
  if (have_peers) {
    cells.push_back(totals.paired_rows ? std::to_string(totals.paired_rows) + " paired" : "");
    cells.push_back(totals.paired_rows ? format_number(totals.paired_peer_us) : "");
    if (on_cuda) cells.push_back("");
    cells.push_back(ratio_cell(totals.paired_peer_us, totals.paired_gemmkit_us));
  }
  table.add_row(cells);

  std::string text = table.render();
  if (have_peers && totals.paired_rows)
    text +=
        "peer: the fastest peer of each row that ran and passed its check; total and ratio "
        "over the " +
        std::to_string(totals.paired_rows) + " rows where gemmkit and a peer ran (" +
        format_number(totals.paired_peer_us) + " us vs gemmkit " +
        format_number(totals.paired_gemmkit_us) + " us)\n";
  const std::string timing = timing_description(report);
  if (!timing.empty()) text += timing + "\n";
  for (const auto& note : collect_notes(report)) text += "note: " + note + "\n";
  return text;
}

std::string render_summary_table(const std::vector<const SuiteReport*>& reports) {
  using Align = TextTable::Align;
  bool have_peers = false;
  for (const SuiteReport* report : reports)
    for (const auto& result : report->results) have_peers = have_peers || !result.peers.empty();
  TextTable table;
  table.add_column("suite", Align::left);
  table.add_column("name", Align::left);
  table.add_column("shape", Align::left);
  table.add_column("kernel", Align::left);
  table.add_column("us");
  table.add_column("count");
  table.add_column("us x count");
  table.add_column("check", Align::left);
  if (have_peers) {
    table.add_column("peer", Align::left);
    table.add_column("peer us");
    table.add_column("peer/gemmkit");
  }
  std::string notes;
  for (const SuiteReport* report : reports) {
    std::string suite_name = report->suite.path;
    const auto slash = suite_name.find_last_of('/');
    if (slash != std::string::npos) suite_name = suite_name.substr(slash + 1);
    for (const auto& result : report->results) {
      const Measurement& m = result.gemmkit;
      const double us = m.ran ? m.timing.warm_us : kNaN;
      std::vector<std::string> cells{suite_name,
                                     result.name,
                                     result.shape,
                                     m.ran ? result.info.kernel : "ERROR",
                                     format_number(us, "-"),
                                     std::to_string(result.count),
                                     format_number(us * static_cast<double>(result.count), "-"),
                                     check_cell(m)};
      if (const Measurement* peer = best_peer(result)) {
        cells.push_back(peer->name);
        cells.push_back(peer_time_cell(*peer));
        cells.push_back(peer->ran ? ratio_cell(peer->timing.warm_us, us) : "");
      }
      table.add_row(cells);
    }
    const SuiteTotals totals = suite_totals(*report);
    std::vector<std::string> cells{
        suite_name,
        "total",
        std::to_string(totals.gemmkit_rows) + " of " + std::to_string(report->results.size()) +
            " rows ran",
        "",
        "",
        "",
        format_number(totals.gemmkit_us),
        totals.failed_rows ? std::to_string(totals.failed_rows) + " failed" : "all PASS"};
    if (totals.paired_rows) {
      cells.push_back("(" + std::to_string(totals.paired_rows) + " paired rows)");
      cells.push_back(format_number(totals.paired_peer_us));
      cells.push_back(ratio_cell(totals.paired_peer_us, totals.paired_gemmkit_us));
    }
    table.add_row(cells);
    table.add_separator();
    for (const auto& note : collect_notes(*report))
      notes += "note: " + suite_name + ": " + note + "\n";
  }
  return table.render() + notes;
}

namespace {

void write_measurement(JsonWriter& json, const CaseResult& result, const Measurement& m) {
  json.begin_object();
  json.field("name", m.name);
  json.field("ran", m.ran);
  json.field("unsupported", m.unsupported);
  json.field("note", m.note);
  json.key("check").begin_object();
  json.field("ran", m.check.ran);
  json.field("passed", m.check.passed());
  json.field("max_error", m.check.max_error);
  json.field("tolerance", m.check.tolerance);
  json.field("samples", m.check.samples);
  json.field("outputs", m.check.total);
  json.field("worst_index", m.check.worst_index);
  json.field("worst_got", m.check.worst_got);
  json.field("worst_expected", m.check.worst_expected);
  json.end_object();
  const double us = m.ran ? m.timing.warm_us : kNaN;
  json.field("median_us", us);
  json.field("cold_median_us", m.timing.cold_us);
  json.field("cold_copies", m.timing.cold_copies);
  json.field("timing_method", m.timing.method);
  if (!std::isnan(m.timing.host_us)) {
    json.field("host_us", m.timing.host_us);
    json.field("empty_launch_us", m.timing.empty_launch_us);
    json.field("empty_plain_launch_us", m.timing.empty_plain_launch_us);
    json.field("empty_driver_launch_us", m.timing.empty_driver_launch_us);
  }
  json.field("gflops", gflops(result, us));
  json.field("gbytes_per_s", result.cost.bytes / (us * 1e3));
  json.field("floor_fraction", result.floor_us / us);
  json.end_object();
}

void write_problem(JsonWriter& json, const SuiteReport& report, std::size_t i) {
  if (report.suite.kind == SuiteKind::linear) {
    const LinearRow& row = report.suite.linear_rows[i];
    json.field("line", row.line);
    json.field("n", row.n).field("m", row.m).field("k", row.k);
    json.field("bias", row.bias);
    json.field("dtype", dtype_name(row.dtype));
    json.field("out_dtype", dtype_name(row.out_dtype));
    json.field("source", row.source);
    return;
  }
  const ConvRow& row = report.suite.conv_rows[i];
  json.field("line", row.line);
  json.field("n", row.n);
  json.field("in_spatial", row.in_spatial);
  json.field("out_spatial", conv_out_spatial(row));
  json.field("c", row.c).field("o", row.o);
  json.field("kernel", row.kernel).field("stride", row.stride);
  json.field("pad_lo", row.pad_lo).field("pad_hi", row.pad_hi);
  json.field("kdil", row.kdil).field("idil", row.idil);
  json.field("groups", row.groups);
  json.field("flip", row.flip);
  json.field("bias", row.bias);
  json.field("dtype", dtype_name(row.dtype));
}

}  // namespace

void write_json(JsonWriter& json, const SuiteReport& report) {
  json.begin_object();
  json.field("suite", report.suite.path);
  json.field("kind", report.suite.kind == SuiteKind::linear ? "linear" : "conv");
  json.field("device", report.settings.device.str());
  json.field("scale", report.scale);
  json.field("reps", effective_reps(report.settings));
  json.field("replays", report.settings.device.is_cuda() ? effective_replays(report.settings) : 0);
  json.field("seed", static_cast<int64_t>(report.settings.seed));
  json.key("notes").begin_array();
  for (const auto& note : collect_notes(report)) json.value(note);
  json.end_array();
  json.key("rows").begin_array();
  for (std::size_t i = 0; i < report.results.size(); ++i) {
    const CaseResult& result = report.results[i];
    json.begin_object();
    json.field("name", result.name);
    json.field("shape", result.shape);
    json.field("count", result.count);
    write_problem(json, report, i);
    json.field("flops", result.cost.flops);
    json.field("bytes", result.cost.bytes);
    json.field("floor_us", result.floor_us);
    json.field("backend", result.info.backend);
    json.field("gemmkit_kernel", result.info.kernel);
    json.field("reason", result.info.reason);
    json.field("ok", result.ok());
    json.key("gemmkit");
    write_measurement(json, result, result.gemmkit);
    json.key("peers").begin_array();
    for (const auto& peer : result.peers) write_measurement(json, result, peer);
    json.end_array();
    json.end_object();
  }
  json.end_array();
  const SuiteTotals totals = suite_totals(report);
  json.key("totals").begin_object();
  json.field("count_weighted_us", totals.gemmkit_us);
  json.field("rows_ran", totals.gemmkit_rows);
  json.field("rows_failed", totals.failed_rows);
  json.field("floor_us", report.settings.device.is_cuda() ? totals.floor_us : kNaN);
  json.field("paired_rows", totals.paired_rows);
  json.field("paired_gemmkit_us", totals.paired_gemmkit_us);
  json.field("paired_peer_us", totals.paired_peer_us);
  json.end_object();
  json.end_object();
}

}  // namespace gemmkit::bench
