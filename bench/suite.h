// Benchmark suites: CSV files of linear or convolution problems (bench/suites/*.csv).
// Header-only and free of CUDA so the unit tests can include it directly.
//
// Format: lines starting with '#' are comments, blank lines are skipped, the first other line is
// the header. Columns are found by name, so their order does not matter. A suite is a linear
// suite when its header has n, m and k, a conv suite when it has in_spatial, c, o and kernel.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "gemmkit/gemmkit.h"

namespace gemmkit::bench {

enum class SuiteKind { linear, conv };

// out[n, m] = x[n, k] . w[m, k]^T (+ bias[m]).
struct LinearRow {
  std::string name;
  int line = 0;  // line in the suite file, for messages
  int64_t n = 0, m = 0, k = 0;
  bool bias = false;
  DType dtype = DType::bf16;      // x, w and bias
  DType out_dtype = DType::bf16;  // out
  std::string source;
};

// One conv_general problem; every per-dim vector has spatial_dims() entries after parsing.
struct ConvRow {
  std::string name;
  int line = 0;
  int64_t count = 1;  // how many times the model runs this shape
  int64_t n = 1, c = 0, o = 0, groups = 1;
  std::vector<int64_t> in_spatial, kernel, stride, pad_lo, pad_hi, kdil, idil;
  bool flip = false;
  bool bias = false;
  DType dtype = DType::bf16;
  // The weight's memory: false, (o, kernel..., c / groups) packed (gemmkit's canonical OHWI);
  // true, (c, kernel..., o) packed — PyTorch's ConvTranspose weight (c, o, kernel...) in
  // channels-last memory — handed to conv() as the permuted (strided) view of that shape. Only
  // for transposed convolutions with one group (`gemmkit conv --weight-layout filter`).
  bool weight_filter_layout = false;

  int spatial_dims() const { return static_cast<int>(in_spatial.size()); }
};

struct Suite {
  std::string path;
  SuiteKind kind = SuiteKind::linear;
  std::vector<LinearRow> linear_rows;
  std::vector<ConvRow> conv_rows;

  std::size_t size() const {
    return kind == SuiteKind::linear ? linear_rows.size() : conv_rows.size();
  }
};

// ---- Field parsing ------------------------------------------------------------------------

// Parses a whole string as a base-10 int64; false on anything else (empty, junk, overflow).
inline bool parse_int64(const std::string& text, int64_t& value) {
  if (text.empty()) return false;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (*first == '+') ++first;  // from_chars rejects a leading '+', people write it
  auto [end, error] = std::from_chars(first, last, value);
  return error == std::errc() && end == last && first != last;
}

// Parses 'x'-separated integers ("3x3", "5x128x128", "7"); false when any part is not an integer.
inline bool parse_int_list(const std::string& text, std::vector<int64_t>& values) {
  values.clear();
  std::size_t start = 0;
  while (true) {
    const std::size_t sep = text.find('x', start);
    int64_t value = 0;
    if (!parse_int64(text.substr(start, sep == std::string::npos ? std::string::npos : sep - start),
                     value))
      return false;
    values.push_back(value);
    if (sep == std::string::npos) return true;
    start = sep + 1;
  }
}

inline std::string join_ints(const std::vector<int64_t>& values, const char* separator = "x") {
  std::string text;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) text += separator;
    text += std::to_string(values[i]);
  }
  return text;
}

inline std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

// Splits one CSV line. Fields may be double-quoted (a quoted field may hold commas; "" is a quote).
inline std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        fields.back() += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      fields.emplace_back();
    } else {
      fields.back() += ch;
    }
  }
  for (auto& field : fields) field = trim(field);
  return fields;
}

// out_size of conv_general for one spatial dim (see gemmkit.h); may be <= 0 for invalid problems.
inline int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_lo,
                             int64_t pad_hi, int64_t kdil, int64_t idil) {
  const int64_t dilated_in = (in - 1) * idil + 1 + pad_lo + pad_hi;
  const int64_t dilated_kernel = (kernel - 1) * kdil + 1;
  if (dilated_in < dilated_kernel) return 0;
  return (dilated_in - dilated_kernel) / stride + 1;
}

// ---- Row accessors ------------------------------------------------------------------------

inline ConvParams conv_params(const ConvRow& row) {
  ConvParams params;
  params.stride = row.stride;
  params.padding_lo = row.pad_lo;
  params.padding_hi = row.pad_hi;
  params.kernel_dilation = row.kdil;
  params.input_dilation = row.idil;
  params.groups = row.groups;
  params.flip = row.flip;
  return params;
}

inline std::vector<int64_t> conv_x_shape(const ConvRow& row) {
  std::vector<int64_t> shape{row.n};
  shape.insert(shape.end(), row.in_spatial.begin(), row.in_spatial.end());
  shape.push_back(row.c);
  return shape;
}

inline std::vector<int64_t> conv_weight_shape(const ConvRow& row) {
  std::vector<int64_t> shape{row.o};
  shape.insert(shape.end(), row.kernel.begin(), row.kernel.end());
  shape.push_back(row.groups > 0 ? row.c / row.groups : row.c);
  return shape;
}

// Strides (in elements) of the weight view of conv_weight_shape in the row's memory layout.
inline std::vector<int64_t> conv_weight_strides(const ConvRow& row) {
  const std::vector<int64_t> shape = conv_weight_shape(row);
  const std::size_t rank = shape.size();
  // The dims from outermost to innermost in memory: (o, kernel..., c), or (c, kernel..., o).
  std::vector<std::size_t> order(rank);
  for (std::size_t d = 0; d < rank; ++d) order[d] = d;
  if (row.weight_filter_layout) std::swap(order.front(), order.back());
  std::vector<int64_t> strides(rank);
  int64_t stride = 1;
  for (std::size_t i = rank; i-- > 0;) {
    strides[order[i]] = stride;
    stride *= shape[order[i]];
  }
  return strides;
}

// Whether the row is a transposed convolution (input dilation in some dim).
inline bool conv_is_transposed(const ConvRow& row) {
  return std::any_of(row.idil.begin(), row.idil.end(), [](int64_t v) { return v != 1; });
}

inline std::vector<int64_t> conv_out_spatial(const ConvRow& row) {
  std::vector<int64_t> out;
  for (int d = 0; d < row.spatial_dims(); ++d)
    out.push_back(conv_out_size(row.in_spatial[d], row.kernel[d], row.stride[d], row.pad_lo[d],
                                row.pad_hi[d], row.kdil[d], row.idil[d]));
  return out;
}

inline std::vector<int64_t> conv_out_shape(const ConvRow& row) {
  std::vector<int64_t> shape{row.n};
  const auto spatial = conv_out_spatial(row);
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  shape.push_back(row.o);
  return shape;
}

// The row with every input spatial size multiplied by `factor`, rounded, at least 1: a small
// version of a big suite for the CPU. Kernel, stride, padding and dilations are kept.
inline ConvRow scale_conv_row(const ConvRow& row, double factor) {
  ConvRow scaled = row;
  for (auto& size : scaled.in_spatial)
    size = std::max<int64_t>(1, std::llround(static_cast<double>(size) * factor));
  return scaled;
}

// Short human description: "n1 64x64 c512->o512 k3x3 s2x2 p1x1 g32 flip".
inline std::string describe_conv(const ConvRow& row) {
  const auto all_equal = [](const std::vector<int64_t>& values, int64_t expected) {
    return std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == expected; });
  };
  std::string text = "n" + std::to_string(row.n) + " " + join_ints(row.in_spatial) + " c" +
                     std::to_string(row.c) + "->o" + std::to_string(row.o) + " k" +
                     join_ints(row.kernel);
  if (!all_equal(row.stride, 1)) text += " s" + join_ints(row.stride);
  if (row.pad_lo == row.pad_hi) {
    if (!all_equal(row.pad_lo, 0)) text += " p" + join_ints(row.pad_lo);
  } else {
    text += " p" + join_ints(row.pad_lo) + "/" + join_ints(row.pad_hi);
  }
  if (!all_equal(row.kdil, 1)) text += " d" + join_ints(row.kdil);
  if (!all_equal(row.idil, 1)) text += " id" + join_ints(row.idil);
  if (row.groups != 1) text += " g" + std::to_string(row.groups);
  if (row.flip) text += " flip";
  if (row.bias) text += " +bias";
  if (row.dtype != DType::bf16) text += std::string(" ") + dtype_name(row.dtype);
  if (row.weight_filter_layout) text += " w(c,k,o)";
  return text;
}

inline std::string describe_linear(const LinearRow& row) {
  std::string text =
      std::to_string(row.n) + "x" + std::to_string(row.m) + "x" + std::to_string(row.k);
  if (row.bias) text += " +bias";
  if (row.dtype != DType::bf16) text += std::string(" ") + dtype_name(row.dtype);
  if (row.out_dtype != row.dtype) text += std::string(" ->") + dtype_name(row.out_dtype);
  return text;
}

// ---- Suite parsing ------------------------------------------------------------------------

namespace suite_detail {

// The fields of one data line, looked up by column name, with messages naming file and line.
class RowReader {
 public:
  RowReader(const std::string& source, int line, const std::map<std::string, std::size_t>& columns,
            const std::vector<std::string>& fields)
      : source_(source), line_(line), columns_(columns), fields_(fields) {}

  [[noreturn]] void fail(const std::string& message) const {
    throw Error(source_ + ":" + std::to_string(line_) + ": " + message);
  }

  bool has(const std::string& column) const { return columns_.count(column) != 0; }

  const std::string& text(const std::string& column) const {
    const auto it = columns_.find(column);
    if (it == columns_.end()) fail("missing column '" + column + "'");
    return fields_[it->second];
  }

  int64_t integer(const std::string& column, int64_t min_value) const {
    int64_t value = 0;
    const std::string& field = text(column);
    if (!parse_int64(field, value))
      fail("field '" + column + "' is '" + field + "': expected an integer");
    if (value < min_value)
      fail("field '" + column + "' is " + field + ": must be >= " + std::to_string(min_value));
    return value;
  }

  int64_t integer_or(const std::string& column, int64_t min_value, int64_t fallback) const {
    return has(column) ? integer(column, min_value) : fallback;
  }

  bool flag_or(const std::string& column, bool fallback) const {
    if (!has(column)) return fallback;
    const std::string& field = text(column);
    if (field == "0") return false;
    if (field == "1") return true;
    fail("field '" + column + "' is '" + field + "': expected 0 or 1");
  }

  DType dtype_or(const std::string& column, DType fallback) const {
    if (!has(column)) return fallback;
    try {
      return parse_dtype(text(column));
    } catch (const Error&) {
      fail("field '" + column + "' is '" + text(column) + "': expected bf16, f16/fp16 or f32/fp32");
    }
  }

  // 'x'-separated per-dim values: exactly `dims` of them, or one value applied to every dim.
  // dims < 0 accepts any count (1 to 3); absent columns give `fallback` for every dim.
  std::vector<int64_t> per_dim(const std::string& column, int dims, int64_t min_value,
                               int64_t fallback) const {
    if (!has(column)) {
      if (dims < 0) fail("missing column '" + column + "'");
      return std::vector<int64_t>(static_cast<std::size_t>(dims), fallback);
    }
    std::vector<int64_t> values;
    const std::string& field = text(column);
    if (!parse_int_list(field, values))
      fail("field '" + column + "' is '" + field +
           "': expected integers separated by 'x' (like 3x3)");
    if (dims < 0) {
      if (values.size() < 1 || values.size() > 3)
        fail("field '" + column + "' is '" + field + "': 1 to 3 spatial dims are supported, got " +
             std::to_string(values.size()));
    } else if (values.size() == 1 && dims > 1) {
      values.assign(static_cast<std::size_t>(dims), values[0]);
    } else if (static_cast<int>(values.size()) != dims) {
      fail("field '" + column + "' is '" + field + "': has " + std::to_string(values.size()) +
           " values but in_spatial has " + std::to_string(dims) + " dims");
    }
    for (int64_t value : values)
      if (value < min_value)
        fail("field '" + column + "' is '" + field +
             "': every value must be >= " + std::to_string(min_value));
    return values;
  }

 private:
  const std::string& source_;
  int line_;
  const std::map<std::string, std::size_t>& columns_;
  const std::vector<std::string>& fields_;
};

inline LinearRow read_linear_row(const RowReader& reader) {
  LinearRow row;
  row.name = reader.text("name");
  row.n = reader.integer("n", 1);
  row.m = reader.integer("m", 1);
  row.k = reader.integer("k", 1);
  row.bias = reader.flag_or("bias", false);
  row.dtype = reader.dtype_or("dtype", DType::bf16);
  row.out_dtype = reader.dtype_or("out", row.dtype);
  if (reader.has("source")) row.source = reader.text("source");
  return row;
}

inline ConvRow read_conv_row(const RowReader& reader) {
  ConvRow row;
  row.name = reader.text("name");
  row.count = reader.integer_or("count", 1, 1);
  row.n = reader.integer_or("n", 1, 1);
  row.c = reader.integer("c", 1);
  row.o = reader.integer("o", 1);
  row.groups = reader.integer_or("groups", 1, 1);
  row.in_spatial = reader.per_dim("in_spatial", -1, 1, 0);
  const int dims = row.spatial_dims();
  row.kernel = reader.per_dim("kernel", dims, 1, 1);
  row.stride = reader.per_dim("stride", dims, 1, 1);
  // Negative padding crops (conv_general allows it).
  row.pad_lo = reader.per_dim("pad_lo", dims, INT64_MIN, 0);
  row.pad_hi = reader.per_dim("pad_hi", dims, INT64_MIN, 0);
  row.kdil = reader.per_dim("kdil", dims, 1, 1);
  row.idil = reader.per_dim("idil", dims, 1, 1);
  row.flip = reader.flag_or("flip", false);
  row.bias = reader.flag_or("bias", false);
  row.dtype = reader.dtype_or("dtype", DType::bf16);
  if (row.c % row.groups != 0 || row.o % row.groups != 0)
    reader.fail("groups " + std::to_string(row.groups) + " must divide c " + std::to_string(row.c) +
                " and o " + std::to_string(row.o));
  for (int64_t size : conv_out_spatial(row))
    if (size < 1)
      reader.fail("output size is " + join_ints(conv_out_spatial(row)) +
                  ": the dilated kernel is larger than the padded input");
  return row;
}

}  // namespace suite_detail

// Parses suite text; `source` names it in error messages ("file.csv:12: ...").
inline Suite parse_suite(const std::string& text, const std::string& source) {
  Suite suite;
  suite.path = source;
  std::map<std::string, std::size_t> columns;
  std::size_t column_count = 0;
  bool have_header = false;
  std::istringstream stream(text);
  std::string raw_line;
  int line_number = 0;
  while (std::getline(stream, raw_line)) {
    ++line_number;
    const std::string line = trim(raw_line);
    if (line.empty() || line[0] == '#') continue;
    const auto fields = split_csv_line(line);
    const auto where = source + ":" + std::to_string(line_number) + ": ";
    if (!have_header) {
      for (std::size_t i = 0; i < fields.size(); ++i)
        if (!columns.emplace(fields[i], i).second)
          throw Error(where + "duplicate column '" + fields[i] + "' in the header");
      column_count = fields.size();
      const auto has = [&](const char* name) { return columns.count(name) != 0; };
      if (!has("name")) throw Error(where + "the header has no 'name' column");
      if (has("in_spatial") && has("kernel") && has("c") && has("o")) {
        suite.kind = SuiteKind::conv;
      } else if (has("n") && has("m") && has("k")) {
        suite.kind = SuiteKind::linear;
      } else {
        throw Error(where + "the header '" + line +
                    "' has neither the linear columns (name,n,m,k) nor the conv columns "
                    "(name,in_spatial,c,o,kernel)");
      }
      have_header = true;
      continue;
    }
    if (fields.size() != column_count)
      throw Error(where + "expected " + std::to_string(column_count) +
                  " comma-separated fields as in the header, found " +
                  std::to_string(fields.size()));
    const suite_detail::RowReader reader(source, line_number, columns, fields);
    if (fields[columns.at("name")].empty()) reader.fail("field 'name' is empty");
    if (suite.kind == SuiteKind::linear) {
      suite.linear_rows.push_back(suite_detail::read_linear_row(reader));
      suite.linear_rows.back().line = line_number;
    } else {
      suite.conv_rows.push_back(suite_detail::read_conv_row(reader));
      suite.conv_rows.back().line = line_number;
    }
  }
  if (!have_header) throw Error(source + ": no header line (the file is empty or all comments)");
  if (suite.size() == 0) throw Error(source + ": the suite has a header but no rows");
  return suite;
}

inline Suite load_suite(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error("cannot open suite '" + path + "'");
  std::ostringstream text;
  text << file.rdbuf();
  return parse_suite(text.str(), path);
}

}  // namespace gemmkit::bench
