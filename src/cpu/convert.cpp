#include "cpu/convert.h"

#include <vector>

namespace gemmkit::cpu {

const float* f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536u; ++h) t[h] = f16_decode(static_cast<uint16_t>(h));
    return t;
  }();
  return table.data();
}

}  // namespace gemmkit::cpu
