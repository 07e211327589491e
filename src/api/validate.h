// Argument validation shared by the operations. Every function throws gemmkit::Error whose
// message reads "<op>: <argument> <value>: <rule>".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/problems.h"
#include "gemmkit/gemmkit.h"

namespace gemmkit::detail {

[[noreturn]] void fail(const char* op, const std::string& argument, const std::string& message);

// The rank lies in [0, kMaxRank] (so that shape and strides may be read).
void check_rank_in_range(const char* op, const char* name, const Tensor& t);
// The fields every use of a descriptor relies on: rank in range, dtype and device kind values
// of their enums, CUDA ordinal >= 0.
void check_descriptor(const char* op, const char* name, const Tensor& t);
// check_descriptor, then: rank `rank`, sizes >= 1 (dim 0 >= 0 when `allow_empty_dim0`: an empty
// batch), strides >= 1, element count and byte span within int64; when it has elements, data
// non-null and aligned to the element size.
void check_tensor(const char* op, const char* name, const Tensor& t, int rank,
                  bool allow_empty_dim0 = false);
// No two index tuples of `t` address the same element (required of outputs). Exact for spans up
// to 2^24 elements; above, the layout must pass the sorted-stride rule (sorted by stride, each
// dim's stride at least the extent of the dims of smaller stride).
void check_non_overlapping(const char* op, const char* name, const Tensor& t);
// The memory spans of `out` and `input` do not intersect (outputs never alias inputs).
void check_disjoint(const char* op, const char* out_name, const Tensor& out, const char* input_name,
                    const Tensor& input);
void check_same_device(const char* op, const char* name, const Tensor& t, const char* ref_name,
                       const Tensor& ref);
// A conv problem's geometric fields (spatial rank, sizes, channels, groups, every parameter
// expanded to one value per spatial dim, output sizes) from shapes and parameters, with the
// checks conv() makes on them (Error naming `op`); no tensors are set.
ConvProblem conv_geometry(const char* op, const std::vector<int64_t>& x_shape,
                          const std::vector<int64_t>& w_shape, const ConvParams& params);
// The operands of a call share x's device, and its dtype rules: the weight (named `weight_name`)
// and the bias in x's dtype, out in x's dtype or f32.
void check_operand_devices_and_dtypes(const char* op, const Tensor& x, const char* weight_name,
                                      const Tensor& weight, const std::optional<Tensor>& bias,
                                      const Tensor& out);
// Reads an environment variable once per process (GEMMKIT_* only).
const std::string& env_setting(const char* name);
// An on/off setting's value: "" or "1" is on, "0" off; anything else fails (Error naming `op`,
// the setting `name`, the value and the rule).
bool parse_switch(const char* op, const char* name, const std::string& value);
// The same for a setting that is off by default: "" or "0" is off, "1" on.
bool parse_switch_default_off(const char* op, const char* name, const std::string& value);
// An option that takes its value from an environment switch by default: -1 (read `env_name`), 0
// (off) or 1 (on); anything else fails, naming `option` and the rule.
void check_switch_option(const char* op, const char* option, int value, const char* env_name);
// `text` as a whole decimal number of 1 to `max_digits` digits (no sign, spaces or other
// characters), or nullopt.
std::optional<int64_t> parse_whole_number(const std::string& text, int max_digits);

}  // namespace gemmkit::detail
