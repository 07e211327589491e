// The generic direct path (direct.cuh): any problem, any strides; one thread per output element,
// grid-stride over all of them. It serves whatever no faster path does, and algo "reference"
// forces it.
#pragma once

#include <string>

#include "common/problems.h"
#include "cuda/conv/common/config.h"
#include "cuda/conv/common/occupancy.h"

namespace gemmkit::cuda::conv_impl {

inline ConvConfig direct_config(const detail::ConvProblem& p, const DeviceDescription& dev,
                                const std::string& algo, const std::string& reason) {
  ConvConfig c = config_of(ConvPath::direct, algo, reason);
  c.block = kDirectBlock;
  c.grid_cap = max_blocks(dev);
  c.grid = grid_for(p.out_positions() * p.out_channels, c.block, c.grid_cap);
  return c;
}

}  // namespace gemmkit::cuda::conv_impl
