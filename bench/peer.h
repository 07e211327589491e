// Peers: other libraries timed on the same problems, in the same run, as gemmkit.
// The CUDA build has cuBLASLt (linear) and, when cuDNN is found, cuDNN through its legacy and its
// graph API (conv); the CPU build none. Tables show the fastest peer of a row (see report.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gemmkit/gemmkit.h"
#include "suite.h"

namespace gemmkit::bench {

// Device pointers of one set of operands (contiguous, layouts as in gemmkit.h).
struct LinearOperands {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;  // null when the row has no bias
  void* out = nullptr;
};

struct ConvOperands {
  const void* x = nullptr;
  const void* weight = nullptr;
  const void* bias = nullptr;
  void* out = nullptr;
};

template <class Row, class Operands>
class Peer {
 public:
  virtual ~Peer() = default;
  virtual std::string name() const = 0;
  // "" when the peer can compute `row`, else why not (reported as n/a).
  virtual std::string unsupported_reason(const Row& row) const = 0;
  // Builds descriptors and picks the algorithm for `row` (may run it on `operands`); throws
  // gemmkit::Error when the library refuses.
  virtual void prepare(const Row& row, const Operands& operands, Stream stream) = 0;
  // Enqueues one call on `stream`; capturable into a CUDA graph.
  virtual void launch(const Operands& operands, Stream stream) = 0;
};

using LinearPeer = Peer<LinearRow, LinearOperands>;
using ConvPeer = Peer<ConvRow, ConvOperands>;

struct PeerSet {
  std::vector<std::unique_ptr<LinearPeer>> linear;
  std::vector<std::unique_ptr<ConvPeer>> conv;
};

// The peers this build has, for `device` (none on the CPU). Peers that fail to start (no
// library, no GPU) are left out and their reason appended to `notes`.
PeerSet make_peers(Device device, std::vector<std::string>& notes);

// Peers compiled into this build, for `gemmkit info`: "cublaslt (linear), cudnn (conv)".
std::string compiled_peers();

}  // namespace gemmkit::bench
