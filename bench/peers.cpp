#include <string>

#include "bench/peer.h"

namespace gemmkit::bench {

#if GEMMKIT_BENCH_CUDA
// Defined in bench/peer_cublaslt.cu and bench/peer_cudnn.cu.
std::unique_ptr<LinearPeer> make_cublaslt_peer(Device device);
#if GEMMKIT_BENCH_CUDNN
std::unique_ptr<ConvPeer> make_cudnn_peer(Device device);
std::unique_ptr<ConvPeer> make_cudnn_graph_peer(Device device);
#endif
#endif

PeerSet make_peers(Device device, std::vector<std::string>& notes) {
  PeerSet peers;
  if (!device.is_cuda()) return peers;
#if GEMMKIT_BENCH_CUDA
  try {
    peers.linear.push_back(make_cublaslt_peer(device));
  } catch (const std::exception& error) {
    notes.push_back(std::string("cuBLASLt peer unavailable: ") + error.what());
  }
#if GEMMKIT_BENCH_CUDNN
  // Two ways into cuDNN: the legacy API, and the graph API (its engines are what PyTorch gets).
  try {
    peers.conv.push_back(make_cudnn_peer(device));
    peers.conv.push_back(make_cudnn_graph_peer(device));
  } catch (const std::exception& error) {
    notes.push_back(std::string("cuDNN peer unavailable: ") + error.what());
  }
#else
  notes.push_back("cuDNN peer not built (cuDNN was not found at configure time)");
#endif
#else
  (void)notes;  // a CUDA device without CUDA support fails in the harness, with its own message
#endif
  return peers;
}

std::string compiled_peers() {
#if GEMMKIT_BENCH_CUDA && GEMMKIT_BENCH_CUDNN
  return "cublaslt (linear), cudnn and cudnn_graph (conv)";
#elif GEMMKIT_BENCH_CUDA
  return "cublaslt (linear); no cudnn (not found at configure time)";
#else
  return "none (CPU-only build)";
#endif
}

}  // namespace gemmkit::bench
