// Plain-text tables with aligned columns. Header-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace gemmkit::bench {

class TextTable {
 public:
  enum class Align { left, right };

  void add_column(std::string header, Align align = Align::right) {
    headers_.push_back(std::move(header));
    aligns_.push_back(align);
  }
  // Missing trailing cells print empty; extra cells are an error of the caller and dropped.
  void add_row(std::vector<std::string> cells) {
    cells.resize(headers_.size());
    rows_.push_back(std::move(cells));
  }
  void add_separator() { rows_.emplace_back(); }

  std::string render() const {
    std::vector<std::size_t> widths(headers_.size());
    for (std::size_t c = 0; c < headers_.size(); ++c) widths[c] = headers_[c].size();
    for (const auto& row : rows_)
      for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
    std::string out = format_row(headers_, widths) + rule(widths);
    for (const auto& row : rows_) out += row.empty() ? rule(widths) : format_row(row, widths);
    return out;
  }

 private:
  std::string format_row(const std::vector<std::string>& cells,
                         const std::vector<std::size_t>& widths) const {
    std::string line;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(widths[c] - cells[c].size(), ' ');
      if (c) line += "  ";
      line += aligns_[c] == Align::left ? cells[c] + pad : pad + cells[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  }

  static std::string rule(const std::vector<std::size_t>& widths) {
    std::size_t total = 0;
    for (std::size_t w : widths) total += w;
    total += widths.empty() ? 0 : 2 * (widths.size() - 1);
    return std::string(total, '-') + "\n";
  }

  std::vector<std::string> headers_;
  std::vector<Align> aligns_;
  std::vector<std::vector<std::string>> rows_;
};

// Number with `digits` significant-ish decimals, "n/a" for NaN: 3 digits below 10, 2 below 100,
// then 1 (timings in us read best that way).
inline std::string format_number(double value, const char* nan_text = "n/a") {
  if (std::isnan(value)) return nan_text;
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[64];
  const double magnitude = std::fabs(value);
  const int decimals = magnitude < 10 ? 3 : magnitude < 100 ? 2 : 1;
  std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  return text;
}

inline std::string format_fixed(double value, int decimals, const char* nan_text = "n/a") {
  if (std::isnan(value)) return nan_text;
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  return text;
}

}  // namespace gemmkit::bench
