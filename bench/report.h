// Running a whole suite, and presenting results: aligned text tables and JSON.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "harness.h"
#include "json.h"
#include "suite.h"

namespace gemmkit::bench {

struct SuiteReport {
  Suite suite;  // the rows as run (scaled, filtered)
  double scale = 1;
  BenchSettings settings;
  std::vector<CaseResult> results;  // one per row of `suite`
  std::vector<std::string> notes;   // peers missing, and the like
};

// Runs every row, printing "[i/N] name ..." progress lines to `progress` (may be null).
// Errors of single rows are recorded in their results; the run goes on.
SuiteReport run_suite(const Suite& suite, double scale, const BenchSettings& settings,
                      PeerSet& peers, std::ostream* progress);

// Keeps the rows whose name contains `filter` ("" keeps all).
Suite filter_suite(const Suite& suite, const std::string& filter);
// Multiplies every conv row's spatial sizes by `scale` (see scale_conv_row).
Suite scale_suite(const Suite& suite, double scale);

// The full table (one line per row, then totals) and the notes under it.
std::string render_suite_table(const SuiteReport& report);
// Compact table for `gemmkit run`: name, time, check.
std::string render_summary_table(const std::vector<const SuiteReport*>& reports);

// Totals of a suite: sums of count * median time over the rows that ran.
struct SuiteTotals {
  double gemmkit_us = 0;
  int gemmkit_rows = 0;
  double floor_us = 0;
  // Over the rows where both gemmkit and a peer ran (the fastest peer of each row).
  double paired_gemmkit_us = 0, paired_peer_us = 0;
  int paired_rows = 0;
  int failed_rows = 0;  // errors or failed checks
};
SuiteTotals suite_totals(const SuiteReport& report);

void write_json(JsonWriter& json, const SuiteReport& report);

// Exit status of a run: 0 when every row ran and every check passed, else 1.
bool all_passed(const SuiteReport& report);

}  // namespace gemmkit::bench
