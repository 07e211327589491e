// Unit tests of the benchmark harness's pure parts: suite parsing, per-dim fields, medians,
// floors, cold-L2 copy counts, the double references, sampling, the pass/fail rule, random data,
// tables and JSON.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "../bench/json.h"
#include "../bench/random.h"
#include "../bench/reference.h"
#include "../bench/stats.h"
#include "../bench/suite.h"
#include "../bench/table.h"

namespace gb = gemmkit::bench;
using gemmkit::DType;

namespace {

const char* const kConvHeader =
    "name,count,n,in_spatial,c,o,kernel,stride,pad_lo,pad_hi,kdil,idil,groups,flip,dtype\n";

// The message of the gemmkit::Error that parsing `text` throws ("" when it parses).
std::string parse_error(const std::string& text) {
  try {
    gb::parse_suite(text, "t.csv");
  } catch (const gemmkit::Error& error) {
    return error.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

gb::ConvRow conv_1d(std::vector<int64_t> in, int64_t c, int64_t o, int64_t kernel) {
  gb::ConvRow row;
  row.n = 1;
  row.c = c;
  row.o = o;
  row.in_spatial = std::move(in);
  row.kernel = {kernel};
  row.stride = {1};
  row.pad_lo = {0};
  row.pad_hi = {0};
  row.kdil = {1};
  row.idil = {1};
  return row;
}

// conv_reference at every output of a 1-D f32 conv.
std::vector<double> conv_all(const gb::ConvRow& row, const std::vector<float>& x,
                             const std::vector<float>& w) {
  const auto geometry = gb::ConvGeometry::from_row(row);
  gb::ConvHostView view;
  view.x = x.data();
  view.weight = w.data();
  view.dtype = DType::f32;
  std::vector<double> out;
  const double total = gb::product(gb::conv_out_shape(row));
  for (int64_t i = 0; i < static_cast<int64_t>(total); ++i)
    out.push_back(gb::conv_reference(geometry, view, i).value);
  return out;
}

// The suites that ship with gemmkit (bench/suites), found from this file's place in the tree.
std::filesystem::path repo_suites_dir() {
  return std::filesystem::path(__FILE__).parent_path() / ".." / "bench" / "suites";
}

}  // namespace

// ---- Field parsing ----------------------------------------------------------------------------

TEST(CliSuiteFields, ParsesIntegersStrictly) {
  int64_t value = 0;
  EXPECT_TRUE(gb::parse_int64("42", value));
  EXPECT_EQ(value, 42);
  EXPECT_TRUE(gb::parse_int64("-3", value));
  EXPECT_EQ(value, -3);
  EXPECT_TRUE(gb::parse_int64("+5", value));
  EXPECT_EQ(value, 5);
  EXPECT_FALSE(gb::parse_int64("", value));
  EXPECT_FALSE(gb::parse_int64("12a", value));
  EXPECT_FALSE(gb::parse_int64("1.5", value));
  EXPECT_FALSE(gb::parse_int64("+", value));
  EXPECT_FALSE(gb::parse_int64("99999999999999999999", value));
}

TEST(CliSuiteFields, ParsesXSeparatedLists) {
  std::vector<int64_t> values;
  ASSERT_TRUE(gb::parse_int_list("5x128x128", values));
  EXPECT_EQ(values, (std::vector<int64_t>{5, 128, 128}));
  ASSERT_TRUE(gb::parse_int_list("7", values));
  EXPECT_EQ(values, (std::vector<int64_t>{7}));
  ASSERT_TRUE(gb::parse_int_list("-1x0", values));
  EXPECT_EQ(values, (std::vector<int64_t>{-1, 0}));
  for (const char* bad : {"", "x3", "3x", "3xx3", "3y3", "3 x 3", "axb"})
    EXPECT_FALSE(gb::parse_int_list(bad, values)) << bad;
  EXPECT_EQ(gb::join_ints({3, 3}), "3x3");
  EXPECT_EQ(gb::join_ints({1, 2, 3}, ", "), "1, 2, 3");
}

TEST(CliSuiteFields, SplitsCsvWithQuotesAndTrims) {
  EXPECT_EQ(gb::split_csv_line("a, b ,c"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(gb::split_csv_line("x,\"p, q\",\"say \"\"hi\"\"\""),
            (std::vector<std::string>{"x", "p, q", "say \"hi\""}));
  EXPECT_EQ(gb::split_csv_line("a,,"), (std::vector<std::string>{"a", "", ""}));
}

TEST(CliSuiteFields, ConvOutSizeFollowsConvGeneral) {
  EXPECT_EQ(gb::conv_out_size(32, 3, 1, 1, 1, 1, 1), 32);
  EXPECT_EQ(gb::conv_out_size(224, 7, 2, 3, 3, 1, 1), 112);
  EXPECT_EQ(gb::conv_out_size(128, 4, 1, 2, 2, 1, 2), 256);  // transposed k4 s2 form
  EXPECT_EQ(gb::conv_out_size(2048, 4, 1, 3, 0, 1, 1), 2048);
  EXPECT_EQ(gb::conv_out_size(128, 3, 1, 2, 2, 2, 1), 128);
  EXPECT_EQ(gb::conv_out_size(2, 5, 1, 0, 0, 1, 1), 0);  // kernel larger than the input
}

// ---- Suite parsing ----------------------------------------------------------------------------

TEST(CliSuiteParse, ReadsALinearSuite) {
  const auto suite = gb::parse_suite(
      "# comment\n"
      "\n"
      "name,n,m,k,bias,out,source\n"
      "# another comment\n"
      "a,1,128,720,1,bf16,tinygemm2 PR\n"
      "b,8,256,7168,0,fp32,\"DeepSeek-V3, fp32 logits\"\r\n",
      "lin.csv");
  EXPECT_EQ(suite.kind, gb::SuiteKind::linear);
  ASSERT_EQ(suite.size(), 2u);
  const auto& a = suite.linear_rows[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.line, 5);
  EXPECT_EQ(a.n, 1);
  EXPECT_EQ(a.m, 128);
  EXPECT_EQ(a.k, 720);
  EXPECT_TRUE(a.bias);
  EXPECT_EQ(a.dtype, DType::bf16);
  EXPECT_EQ(a.out_dtype, DType::bf16);
  const auto& b = suite.linear_rows[1];
  EXPECT_FALSE(b.bias);
  EXPECT_EQ(b.out_dtype, DType::f32);
  EXPECT_EQ(b.source, "DeepSeek-V3, fp32 logits");
  EXPECT_EQ(gb::describe_linear(a), "1x128x720 +bias");
  EXPECT_EQ(gb::describe_linear(b), "8x256x7168 ->f32");
}

TEST(CliSuiteParse, ReadsAConvSuiteInAnyColumnOrder) {
  const auto suite =
      gb::parse_suite(std::string(kConvHeader) +
                          "conv_in,1,1,32x32,32,512,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16\n"
                          "whisper,1,1,3000,128,1280,3,2,1,1,1,1,1,0,bf16\n"
                          "vid,2,1,9x64x64,256,256,3x3x3,1,1x1x1,1x1x1,1x1x1,1,4,1,f16\n"
                          "tr,1,1,128x128,256,128,4x4,1x1,2x2,2x2,1x1,2x2,1,1,bf16\n",
                      "conv.csv");
  EXPECT_EQ(suite.kind, gb::SuiteKind::conv);
  ASSERT_EQ(suite.size(), 4u);
  const auto& whisper = suite.conv_rows[1];
  EXPECT_EQ(whisper.spatial_dims(), 1);
  EXPECT_EQ(whisper.stride, (std::vector<int64_t>{2}));
  EXPECT_EQ(gb::conv_out_shape(whisper), (std::vector<int64_t>{1, 1500, 1280}));
  const auto& vid = suite.conv_rows[2];
  EXPECT_EQ(vid.count, 2);
  EXPECT_EQ(vid.spatial_dims(), 3);
  EXPECT_EQ(vid.stride, (std::vector<int64_t>{1, 1, 1}));  // one value for every dim
  EXPECT_EQ(vid.idil, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(vid.groups, 4);
  EXPECT_TRUE(vid.flip);
  EXPECT_EQ(vid.dtype, DType::f16);
  EXPECT_EQ(gb::conv_weight_shape(vid), (std::vector<int64_t>{256, 3, 3, 3, 64}));
  const auto& tr = suite.conv_rows[3];
  EXPECT_EQ(gb::conv_out_shape(tr), (std::vector<int64_t>{1, 256, 256, 128}));
  EXPECT_EQ(gb::describe_conv(tr), "n1 128x128 c256->o128 k4x4 p2x2 id2x2 flip");

  // Reordered columns, optional ones left out (defaults: count 1, stride 1, padding 0, ...).
  const auto reordered = gb::parse_suite("o,kernel,c,in_spatial,name\n64,3x3,16,8x8,r\n", "r.csv");
  ASSERT_EQ(reordered.kind, gb::SuiteKind::conv);
  const auto& r = reordered.conv_rows[0];
  EXPECT_EQ(r.count, 1);
  EXPECT_EQ(r.n, 1);
  EXPECT_EQ(r.pad_lo, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(r.kdil, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(gb::conv_out_shape(r), (std::vector<int64_t>{1, 6, 6, 64}));
}

TEST(CliSuiteParse, WeightStridesOfBothLayouts) {
  gb::ConvRow row;
  row.c = 6;
  row.o = 4;
  row.in_spatial = {5, 5};
  row.kernel = {3, 2};
  EXPECT_EQ(gb::conv_weight_strides(row), (std::vector<int64_t>{36, 12, 6, 1}));
  // Memory (c, 3, 2, o) seen as (o, 3, 2, c): o fastest, then kw, kh, c outermost.
  row.weight_filter_layout = true;
  EXPECT_EQ(gb::conv_weight_strides(row), (std::vector<int64_t>{1, 8, 4, 24}));
}

TEST(CliSuiteParse, AcceptsNegativePadding) {
  const auto suite = gb::parse_suite(
      std::string(kConvHeader) + "crop,1,1,8x8,4,4,1x1,1x1,-1x0,-1x0,1x1,1x1,1,0,bf16\n", "t.csv");
  EXPECT_EQ(gb::conv_out_shape(suite.conv_rows[0]), (std::vector<int64_t>{1, 6, 8, 4}));
}

TEST(CliSuiteParse, ReportsMalformedRowsWithFileAndLine) {
  const std::string conv_row_prefix = std::string("# c\n") + kConvHeader;
  const auto conv_error = [&](const std::string& row) {
    return parse_error(conv_row_prefix + row);
  };

  std::string message = conv_error("a,1,1,32x32,32,512,3x3,1x1,1x1,1x1,1x1,1x1,1,0\n");
  EXPECT_TRUE(contains(message, "t.csv:3:")) << message;
  EXPECT_TRUE(contains(message, "expected 15")) << message;
  EXPECT_TRUE(contains(message, "found 14")) << message;

  message = conv_error("a,1,1,32x32,32,512,3y3,1x1,1x1,1x1,1x1,1x1,1,0,bf16\n");
  EXPECT_TRUE(contains(message, "'kernel'")) << message;
  EXPECT_TRUE(contains(message, "3y3")) << message;
  EXPECT_TRUE(contains(message, "separated by 'x'")) << message;

  message = conv_error("a,1,1,32x32,32,512,3x3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16\n");
  EXPECT_TRUE(contains(message, "has 3 values but in_spatial has 2 dims")) << message;

  message = conv_error("a,1,0,32x32,32,512,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16\n");
  EXPECT_TRUE(contains(message, "'n' is 0: must be >= 1")) << message;

  message = conv_error("a,1,1,32x32,32,512,3x3,0x1,1x1,1x1,1x1,1x1,1,0,bf16\n");
  EXPECT_TRUE(contains(message, "'stride'")) << message;

  message = conv_error("a,1,1,32x32,32,512,3x3,1x1,1x1,1x1,1x1,1x1,1,2,bf16\n");
  EXPECT_TRUE(contains(message, "'flip' is '2': expected 0 or 1")) << message;

  message = conv_error("a,1,1,32x32,32,512,3x3,1x1,1x1,1x1,1x1,1x1,1,0,int8\n");
  EXPECT_TRUE(contains(message, "'dtype' is 'int8'")) << message;

  message = conv_error("a,1,1,32x32,30,512,3x3,1x1,1x1,1x1,1x1,1x1,4,0,bf16\n");
  EXPECT_TRUE(contains(message, "groups 4 must divide c 30")) << message;

  message = conv_error("a,1,1,2x2,32,512,5x5,1x1,0x0,0x0,1x1,1x1,1,0,bf16\n");
  EXPECT_TRUE(contains(message, "larger than the padded input")) << message;

  message = conv_error("a,1,1,2x2x2x2,32,512,1,1,0,0,1,1,1,0,bf16\n");
  EXPECT_TRUE(contains(message, "1 to 3 spatial dims")) << message;

  message = conv_error(",1,1,32x32,32,512,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16\n");
  EXPECT_TRUE(contains(message, "'name' is empty")) << message;

  message = parse_error("name,n,m,k\nx,1,two,3\n");
  EXPECT_TRUE(contains(message, "t.csv:2: field 'm' is 'two': expected an integer")) << message;

  message = parse_error("name,n,m,k,bias\nx,1,2,3,yes\n");
  EXPECT_TRUE(contains(message, "'bias' is 'yes'")) << message;
}

TEST(CliSuiteParse, ReportsBadHeadersAndEmptySuites) {
  EXPECT_TRUE(contains(parse_error("name,a,b\nx,1,2\n"), "neither the linear columns"));
  EXPECT_TRUE(contains(parse_error("n,m,k\n1,2,3\n"), "no 'name' column"));
  EXPECT_TRUE(contains(parse_error("name,n,n,m,k\n"), "duplicate column 'n'"));
  EXPECT_TRUE(contains(parse_error("# only comments\n\n"), "no header line"));
  EXPECT_TRUE(contains(parse_error("name,n,m,k\n# nothing\n"), "header but no rows"));
  EXPECT_EQ(parse_error("name,n,m,k\nx,1,2,3\n"), "");
}

TEST(CliSuiteParse, LoadReportsMissingFile) {
  try {
    gb::load_suite("/nonexistent/suite.csv");
    FAIL() << "no error";
  } catch (const gemmkit::Error& error) {
    EXPECT_TRUE(contains(error.what(), "cannot open suite '/nonexistent/suite.csv'"));
  }
}

TEST(CliSuiteParse, ParsesTheShippedSuitesAndAgreesWithTheLibraryOnShapes) {
  const auto dir = repo_suites_dir();
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".csv") continue;
    ++files;
    const auto suite = gb::load_suite(entry.path().string());
    EXPECT_GT(suite.size(), 0u) << entry.path();
    for (const auto& row : suite.conv_rows) {
      std::vector<int64_t> library_shape;
      try {
        library_shape = gemmkit::conv_output_shape(
            gb::conv_x_shape(row), gb::conv_weight_shape(row), gb::conv_params(row));
      } catch (const gemmkit::Error& error) {
        ADD_FAILURE() << row.name << ": " << error.what();
        continue;
      }
      EXPECT_EQ(library_shape, gb::conv_out_shape(row)) << row.name;
    }
  }
  EXPECT_GE(files, 6);
}

// linear-dense.csv: dense LLM layers from decode (n = 1) to prefill chunks (n = 4096), weights
// up to 28672 x 8192; every row parses into a linear problem the library accepts.
TEST(CliSuiteParse, ParsesTheDenseLinearSuite) {
  const auto suite = gb::load_suite((repo_suites_dir() / "linear-dense.csv").string());
  ASSERT_EQ(suite.kind, gb::SuiteKind::linear);
  ASSERT_GT(suite.size(), 0u);
  int64_t max_n = 0, max_m = 0, max_k = 0;
  for (const auto& row : suite.linear_rows) {
    EXPECT_GE(row.n, 1) << row.name;
    max_n = std::max(max_n, row.n);
    max_m = std::max(max_m, row.m);
    max_k = std::max(max_k, row.k);
    EXPECT_GT(gb::linear_floor_us(gb::linear_cost(row)), 0.0) << row.name;
  }
  EXPECT_EQ(max_n, 4096);
  EXPECT_GE(max_m, 28672);
  EXPECT_GE(max_k, 8192);
}

TEST(CliSuiteParse, ScalesSpatialSizesOnly) {
  auto row = conv_1d({256}, 8, 8, 3);
  row.in_spatial = {256, 100, 3};
  row.kernel = {3, 3, 3};
  const auto scaled = gb::scale_conv_row(row, 0.125);
  EXPECT_EQ(scaled.in_spatial, (std::vector<int64_t>{32, 13, 1}));  // 12.5 rounds away, min 1
  EXPECT_EQ(scaled.kernel, row.kernel);
  EXPECT_EQ(gb::scale_conv_row(row, 2.0).in_spatial, (std::vector<int64_t>{512, 200, 6}));
}

// ---- Statistics and floors --------------------------------------------------------------------

TEST(CliSuiteStats, Median) {
  EXPECT_TRUE(std::isnan(gb::median({})));
  EXPECT_EQ(gb::median({3}), 3);
  EXPECT_EQ(gb::median({5, 1, 3}), 3);
  EXPECT_EQ(gb::median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(gb::median({10, 10, 1, 1000, 10}), 10);
}

TEST(CliSuiteStats, ConvFloorsMatchThePublishedPeerTable) {
  // floor_us of bench/peers/h200-conv.csv, rounded to 0.1 us there.
  struct Case {
    const char* row;
    double floor_us;
  };
  const Case cases[] = {
      {"a,1,1,32x32,512,512,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16", 6.1},
      {"a,1,1,512x512,512,512,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16", 1565.8},
      {"a,1,1,1024x1024,128,3,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16", 68.7},
      {"a,1,8,224x224,3,64,7x7,2x2,3x3,3x3,1x1,1x1,1,0,bf16", 3.8},
      {"a,1,1,3000,128,1280,3,1,1,1,1,1,1,0,bf16", 3.7},
      {"a,1,8,2048,8192,8192,4,1,3,0,1,1,8192,0,bf16", 134.2},
      {"a,1,1,128x128,256,128,4x4,1x1,2x2,2x2,1x1,2x2,1,1,bf16", 87.0},
  };
  for (const auto& c : cases) {
    const auto suite = gb::parse_suite(std::string(kConvHeader) + c.row + "\n", "t.csv");
    const double floor = gb::conv_floor_us(gb::conv_cost(suite.conv_rows[0]));
    EXPECT_NEAR(floor, c.floor_us, 0.05) << c.row;
  }
}

TEST(CliSuiteStats, LinearFloorsMatchThePublishedPeerTable) {
  // floor_us of bench/peers/h200-linear.csv (bytes / 4.3 TB/s for these shapes).
  const auto floor_of = [](int64_t n, int64_t m, int64_t k) {
    gb::LinearRow row;
    row.n = n;
    row.m = m;
    row.k = k;
    row.bias = true;
    return gb::linear_floor_us(gb::linear_cost(row));
  };
  EXPECT_NEAR(floor_of(1, 128, 720), 0.04, 0.005);
  EXPECT_NEAR(floor_of(16, 1024, 1024), 0.50, 0.005);
  EXPECT_NEAR(floor_of(64, 4096, 3072), 6.07, 0.005);
  EXPECT_NEAR(floor_of(4, 128, 14336), 0.88, 0.005);
  EXPECT_NEAR(floor_of(512, 128, 2880), 0.89, 0.005);
  // Large enough to be compute-bound: 2nmk / 790 TFLOP/s.
  EXPECT_NEAR(floor_of(8192, 8192, 8192), 2.0 * 8192 * 8192 * 8192 / 790e12 * 1e6, 1e-6);
}

TEST(CliSuiteStats, LinearCostCountsOutputDtype) {
  gb::LinearRow row;
  row.n = 2;
  row.m = 3;
  row.k = 4;
  row.out_dtype = DType::f32;
  const auto cost = gb::linear_cost(row);
  EXPECT_EQ(cost.flops, 2.0 * 2 * 3 * 4);
  EXPECT_EQ(cost.bytes, (2.0 * 4 + 3 * 4) * 2 + 2 * 3 * 4);
}

TEST(CliSuiteStats, ColdCopiesExceedTwiceTheL2) {
  const double l2 = 60.0 * (1 << 20);
  const double cap = 8.0 * (1 << 30);
  const double small = 184320;  // x + w of a 1x128x720 bf16 linear
  const int copies = gb::cold_copy_count(small, l2, cap);
  EXPECT_GT(copies * small, 2 * l2);
  EXPECT_LE((copies - 1) * small, 2 * l2 + small);
  EXPECT_EQ(gb::cold_copy_count(3 * l2, l2, cap), 2);  // at least two, even when one exceeds L2
  EXPECT_EQ(gb::cold_copy_count(6 * l2, l2, cap), 2);
  EXPECT_EQ(gb::cold_copy_count(cap * 0.75, l2, cap), 1);  // two would not fit
  EXPECT_EQ(gb::cold_copy_count(0, l2, cap), 1);
  EXPECT_EQ(gb::cold_graph_calls(20, 684), 684);
  EXPECT_EQ(gb::cold_graph_calls(20, 2), 20);
  EXPECT_EQ(gb::cold_graph_calls(20, 3), 21);
}

// ---- References -------------------------------------------------------------------------------

TEST(CliSuiteReference, LinearByHand) {
  const std::vector<float> x{1, 2};        // [1, 2]
  const std::vector<float> w{3, 4, 5, 6};  // [2, 2]
  const std::vector<float> bias{0.5f, -1.0f};
  gb::LinearHostView view;
  view.x = x.data();
  view.w = w.data();
  view.bias = bias.data();
  view.dtype = DType::f32;
  view.n = 1;
  view.m = 2;
  view.k = 2;
  const auto first = gb::linear_reference(view, 0);
  EXPECT_DOUBLE_EQ(first.value, 11.5);
  EXPECT_DOUBLE_EQ(first.magnitude, std::sqrt(9.0 + 64.0 + 0.25));
  EXPECT_DOUBLE_EQ(gb::linear_reference(view, 1).value, 16.0);
  view.bias = nullptr;
  EXPECT_DOUBLE_EQ(gb::linear_reference(view, 1).value, 17.0);
}

TEST(CliSuiteReference, Conv1dPaddingStrideDilationFlipByHand) {
  auto row = conv_1d({3}, 1, 1, 2);
  row.pad_lo = {1};
  row.pad_hi = {1};
  // padded x: [0 1 2 3 0], kernel [1 10]
  EXPECT_EQ(conv_all(row, {1, 2, 3}, {1, 10}), (std::vector<double>{10, 21, 32, 3}));
  row.flip = true;  // kernel [10 1]
  EXPECT_EQ(conv_all(row, {1, 2, 3}, {1, 10}), (std::vector<double>{1, 12, 23, 30}));
  row.flip = false;
  row.idil = {2};  // dilated and padded x: [0 1 0 2 0 3 0]
  EXPECT_EQ(conv_all(row, {1, 2, 3}, {1, 10}), (std::vector<double>{10, 1, 20, 2, 30, 3}));

  auto strided = conv_1d({5}, 1, 1, 2);
  strided.kdil = {2};
  strided.stride = {2};  // taps at 2j and 2j + 2
  EXPECT_EQ(conv_all(strided, {1, 2, 3, 4, 5}, {1, 10}), (std::vector<double>{31, 53}));

  auto cropped = conv_1d({4}, 1, 1, 1);
  cropped.pad_lo = {-1};
  cropped.pad_hi = {-1};
  EXPECT_EQ(conv_all(cropped, {1, 2, 3, 4}, {1}), (std::vector<double>{2, 3}));
}

TEST(CliSuiteReference, ConvGroupsReadTheirOwnChannels) {
  auto row = conv_1d({2}, 4, 2, 1);
  row.groups = 2;  // out channel 0 reads channels 0-1, out channel 1 reads channels 2-3
  // x (1, 2, 4): position 0 = [1 2 3 4], position 1 = [5 6 7 8]; weight (2, 1, 2)
  const auto out = conv_all(row, {1, 2, 3, 4, 5, 6, 7, 8}, {1, 10, 100, 1000});
  EXPECT_EQ(out, (std::vector<double>{21, 4300, 65, 8700}));
}

TEST(CliSuiteReference, Conv2dPointwiseEqualsLinear) {
  gb::ConvRow row;
  row.n = 2;
  row.c = 5;
  row.o = 3;
  row.in_spatial = {2, 3};
  row.kernel = {1, 1};
  row.stride = row.kdil = row.idil = {1, 1};
  row.pad_lo = row.pad_hi = {0, 0};
  const int64_t positions = 2 * 2 * 3;
  std::vector<float> x(static_cast<std::size_t>(positions * row.c));
  std::vector<float> w(static_cast<std::size_t>(row.o * row.c));
  gb::fill_random(x.data(), DType::f32, static_cast<int64_t>(x.size()), 1, 1.0);
  gb::fill_random(w.data(), DType::f32, static_cast<int64_t>(w.size()), 2, 1.0);
  const auto geometry = gb::ConvGeometry::from_row(row);
  gb::ConvHostView conv_view;
  conv_view.x = x.data();
  conv_view.weight = w.data();
  conv_view.dtype = DType::f32;
  gb::LinearHostView linear_view;
  linear_view.x = x.data();
  linear_view.w = w.data();
  linear_view.dtype = DType::f32;
  linear_view.n = positions;
  linear_view.m = row.o;
  linear_view.k = row.c;
  for (int64_t i = 0; i < positions * row.o; ++i) {
    const auto conv = gb::conv_reference(geometry, conv_view, i);
    const auto linear = gb::linear_reference(linear_view, i);
    EXPECT_DOUBLE_EQ(conv.value, linear.value) << i;
    EXPECT_DOUBLE_EQ(conv.magnitude, linear.magnitude) << i;
  }
}

TEST(CliSuiteReference, ReadsBf16Operands) {
  std::vector<uint16_t> x{gemmkit::float_to_bf16(1.5f), gemmkit::float_to_bf16(-2.0f)};
  std::vector<uint16_t> w{gemmkit::float_to_bf16(4.0f), gemmkit::float_to_bf16(0.25f)};
  gb::LinearHostView view;
  view.x = x.data();
  view.w = w.data();
  view.dtype = DType::bf16;
  view.n = 1;
  view.m = 1;
  view.k = 2;
  EXPECT_DOUBLE_EQ(gb::linear_reference(view, 0).value, 5.5);
}

// ---- Sampling and the pass/fail rule ----------------------------------------------------------

TEST(CliSuiteCheck, SamplesAllSmallOutputsAndASpreadOfLargeOnes) {
  EXPECT_EQ(gb::sample_indices(5, 1), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(gb::sample_indices(0, 1).empty());
  const int64_t numel = int64_t{1} << 30;
  const auto samples = gb::sample_indices(numel, 7, 100, 50);
  EXPECT_GE(samples.size(), 45u);
  EXPECT_LE(samples.size(), 50u);
  EXPECT_EQ(samples.front(), 0);
  EXPECT_EQ(samples.back(), numel - 1);
  for (std::size_t i = 1; i < samples.size(); ++i) EXPECT_LT(samples[i - 1], samples[i]);
  EXPECT_EQ(samples, gb::sample_indices(numel, 7, 100, 50));  // deterministic
  EXPECT_NE(samples, gb::sample_indices(numel, 8, 100, 50));
  EXPECT_GT(samples[samples.size() / 2], numel / 8);  // spread out, not clustered at the start
}

TEST(CliSuiteCheck, ToleranceIsHalfAnUlpPlusAccumulation) {
  EXPECT_DOUBLE_EQ(gb::check_tolerance(DType::bf16), 0x1.0p-8 + 0x1.0p-10);
  EXPECT_DOUBLE_EQ(gb::check_tolerance(DType::f16), 0x1.0p-11 + 0x1.0p-10);
  EXPECT_LT(gb::check_tolerance(DType::f32), 0.001);
}

TEST(CliSuiteCheck, ScaledErrorUsesTheLargerOfValueAndMagnitude) {
  EXPECT_DOUBLE_EQ(gb::scaled_error(10.5, {10.0, 2.0}), 0.05);
  EXPECT_DOUBLE_EQ(gb::scaled_error(0.5, {0.0, 5.0}), 0.1);  // cancellation: use the magnitude
  EXPECT_DOUBLE_EQ(gb::scaled_error(0.0, {0.0, 0.0}), 0.0);  // padding only: exact zero expected
  EXPECT_DOUBLE_EQ(gb::scaled_error(0.25, {0.0, 0.0}), 0.25);
  EXPECT_TRUE(std::isinf(gb::scaled_error(std::nan(""), {1.0, 1.0})));
  EXPECT_TRUE(std::isinf(gb::scaled_error(INFINITY, {1.0, 1.0})));
}

TEST(CliSuiteCheck, PassesRoundedOutputsAndFailsWrongOrMissingOnes) {
  const std::vector<int64_t> indices{0, 5, 9};
  const std::vector<gb::Reference> expected{{1.0, 1.0}, {-2.0, 2.0}, {0.001, 3.0}};
  auto result = gb::check_outputs(indices, {1.003, -2.0, 0.0}, expected, 10, DType::bf16);
  EXPECT_TRUE(result.passed()) << result.summary();
  EXPECT_EQ(result.samples, 3);
  EXPECT_EQ(result.total, 10);
  EXPECT_STREQ(result.verdict(), "PASS");

  result = gb::check_outputs(indices, {1.0, -2.5, 0.0}, expected, 10, DType::bf16);
  EXPECT_FALSE(result.passed());
  EXPECT_EQ(result.worst_index, 5);
  EXPECT_DOUBLE_EQ(result.worst_got, -2.5);
  EXPECT_TRUE(contains(result.summary(), "FAIL")) << result.summary();
  EXPECT_TRUE(contains(result.summary(), "worst at [5]")) << result.summary();

  result = gb::check_outputs(indices, {1.0, std::nan(""), 0.0}, expected, 10, DType::f32);
  EXPECT_FALSE(result.passed());  // an output the kernel never wrote (NaN fill) fails
  EXPECT_EQ(result.worst_index, 5);

  gb::CheckResult not_run;
  EXPECT_FALSE(not_run.passed());
  EXPECT_STREQ(not_run.verdict(), "-");
}

// ---- Random data ------------------------------------------------------------------------------

TEST(CliSuiteRandom, DeterministicNonZeroAndInRange) {
  gb::SplitMix64 a(42), b(42), c(43);
  for (int i = 0; i < 1000; ++i) {
    const double value = a.next_signed_unit();
    EXPECT_EQ(value, b.next_signed_unit());
    EXPECT_GE(value, -1.0);
    EXPECT_LT(value, 1.0);
    EXPECT_NE(value, 0.0);
  }
  EXPECT_NE(gb::SplitMix64(42).next(), c.next());
  EXPECT_NE(gb::derive_seed(1, 1), gb::derive_seed(1, 2));
}

TEST(CliSuiteRandom, FillIsChunkedAndScaled) {
  const int64_t numel = gb::kRandomChunkElements * 2 + 17;
  std::vector<uint16_t> whole(static_cast<std::size_t>(numel)), by_chunk(whole.size());
  gb::fill_random(whole.data(), DType::bf16, numel, 9, 0.125);
  for (int64_t chunk = gb::random_chunk_count(numel) - 1; chunk >= 0; --chunk)  // any order
    gb::fill_random_chunk(by_chunk.data(), DType::bf16, numel, chunk, 9, 0.125);
  EXPECT_EQ(whole, by_chunk);
  EXPECT_EQ(gb::random_chunk_count(numel), 3);
  double max_abs = 0;
  for (uint16_t bits : whole) {
    const float value = gemmkit::bf16_to_float(bits);
    EXPECT_NE(value, 0.0f);
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(value)));
  }
  EXPECT_LE(max_abs, 0.125);
  EXPECT_GT(max_abs, 0.1);
}

// ---- Presentation -----------------------------------------------------------------------------

TEST(CliSuiteTable, AlignsColumns) {
  gb::TextTable table;
  table.add_column("name", gb::TextTable::Align::left);
  table.add_column("us");
  table.add_row({"a", "1.5"});
  table.add_separator();
  table.add_row({"longer", "10.25"});
  EXPECT_EQ(table.render(),
            "name       us\n"
            "-------------\n"
            "a         1.5\n"
            "-------------\n"
            "longer  10.25\n");
  EXPECT_EQ(gb::format_number(3.14159), "3.142");
  EXPECT_EQ(gb::format_number(31.4159), "31.42");
  EXPECT_EQ(gb::format_number(314.159), "314.2");
  EXPECT_EQ(gb::format_number(std::nan("")), "n/a");
  EXPECT_EQ(gb::format_number(std::nan(""), "-"), "-");
}

TEST(CliSuiteJson, WritesNestedValuesAndEscapes) {
  gb::JsonWriter json;
  json.begin_object();
  json.field("name", std::string("a\"b\\c\n"));
  json.field("n", int64_t{3});
  json.field("ok", true);
  json.field("time", 1.5);
  json.field("missing", std::numeric_limits<double>::quiet_NaN());
  json.field("dims", std::vector<int64_t>{3, 3});
  json.key("rows").begin_array();
  json.begin_object().field("x", 1).end_object();
  json.end_array();
  json.key("empty").begin_array().end_array();
  json.end_object();
  EXPECT_EQ(json.str(),
            "{\n"
            "  \"name\": \"a\\\"b\\\\c\\n\",\n"
            "  \"n\": 3,\n"
            "  \"ok\": true,\n"
            "  \"time\": 1.5,\n"
            "  \"missing\": null,\n"
            "  \"dims\": [3, 3],\n"
            "  \"rows\": [\n"
            "    {\n"
            "      \"x\": 1\n"
            "    }\n"
            "  ],\n"
            "  \"empty\": []\n"
            "}");
  EXPECT_EQ(gb::JsonWriter::quote(std::string("\x01")), "\"\\u0001\"");
}
