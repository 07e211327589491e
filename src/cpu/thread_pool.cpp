// Process-wide thread pool of the CPU backend (see cpu_internal.h).
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cpu/cpu_internal.h"
#include "gemmkit/gemmkit.h"

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#define GEMMKIT_HAVE_ATFORK 1
#endif

namespace gemmkit::cpu {
namespace {

int default_threads() {
  if (const char* env = std::getenv("GEMMKIT_NUM_THREADS")) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 1 && v <= 4096) return static_cast<int>(v);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw >= 1 ? static_cast<int>(hw) : 1;
}

class ThreadPool {
 public:
  explicit ThreadPool(int threads) : size_(threads < 1 ? 1 : threads) {
    workers_.reserve(static_cast<std::size_t>(size_ - 1));
    for (int i = 1; i < size_; ++i) workers_.emplace_back([this] { worker_loop(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_; }

  // Caller must hold the pool's user lock (one run at a time).
  void run(int64_t tasks, const std::function<void(int64_t)>& body) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = &body;
      tasks_ = tasks;
      next_.store(0, std::memory_order_relaxed);
      error_ = nullptr;
      active_ = size_ - 1;
      ++generation_;
    }
    wake_.notify_all();
    execute();
    std::exception_ptr error;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return active_ == 0; });
      body_ = nullptr;
      error = error_;
      error_ = nullptr;
    }
    if (error) std::rethrow_exception(error);
  }

 private:
  void execute() {
    const std::function<void(int64_t)>& body = *body_;
    for (;;) {
      const int64_t task = next_.fetch_add(1, std::memory_order_relaxed);
      if (task >= tasks_) return;
      try {
        body(task);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
        next_.store(tasks_, std::memory_order_relaxed);
      }
    }
  }

  void worker_loop() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      execute();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (--active_ == 0) done_.notify_one();
      }
    }
  }

  const int size_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  int active_ = 0;
  const std::function<void(int64_t)>* body_ = nullptr;
  int64_t tasks_ = 0;
  std::atomic<int64_t> next_{0};
  std::exception_ptr error_;
};

// The pool and the lock that gives one caller at a time the use of it.
std::mutex g_use_mutex;
std::unique_ptr<ThreadPool> g_pool;  // guarded by g_use_mutex
std::atomic<int> g_pool_size{0};     // 0 until the pool is created

#if defined(GEMMKIT_HAVE_ATFORK)
// A forked child has none of the parent's helper threads: drop (leak) the pool object there, so
// that the child's first call builds a fresh one instead of waiting for threads that do not exist.
// (If another parent thread held the pool at the fork, the child's copy of g_use_mutex stays
// locked and parallel_for runs serially there: try_to_lock never blocks.)
void forget_pool_in_child() {
  (void)g_pool.release();
  g_pool_size.store(0);
}
#endif

ThreadPool& pool_locked() {
#if defined(GEMMKIT_HAVE_ATFORK)
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, &forget_pool_in_child);
    return true;
  }();
  (void)registered;
#endif
  if (!g_pool) {
    g_pool = std::make_unique<ThreadPool>(default_threads());
    g_pool_size.store(g_pool->size());
  }
  return *g_pool;
}

}  // namespace

int num_threads() {
  const int size = g_pool_size.load();
  if (size > 0) return size;
  std::unique_lock<std::mutex> lock(g_use_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return default_threads();  // being created by another caller
  return pool_locked().size();
}

void set_num_threads(int threads) {
  std::lock_guard<std::mutex> lock(g_use_mutex);
  g_pool.reset();
  g_pool = std::make_unique<ThreadPool>(threads >= 1 ? threads : default_threads());
  g_pool_size.store(g_pool->size());
}

namespace {

[[noreturn]] void allocation_failed(const std::string& what, int64_t floats) {
  const auto bytes = static_cast<unsigned long long>(floats) * sizeof(float);
  throw Error(what + ": could not allocate " + std::to_string(bytes) + " bytes (" +
              std::to_string(floats) + " floats)");
}

}  // namespace

float* thread_scratch(int slot, int64_t count) {
  thread_local std::vector<float> buffers[4];
  std::vector<float>& buf = buffers[slot];
  if (static_cast<int64_t>(buf.size()) < count) {
    buf.clear();
    buf.shrink_to_fit();
    try {
      buf.resize(static_cast<std::size_t>(count));
    } catch (const std::bad_alloc&) {
      allocation_failed("gemmkit: the CPU backend's scratch", count);
    } catch (const std::length_error&) {
      allocation_failed("gemmkit: the CPU backend's scratch", count);
    }
  }
  return buf.data();
}

std::vector<float> staging_buffer(const char* op, const char* operand, int64_t rows, int64_t cols) {
  const std::string what =
      std::string("gemmkit::") + op + ": the CPU backend's fp32 copy of " + operand;
  const int64_t count = staging_count(rows, cols);
  if (count < 0) {
    throw Error(what + ": " + std::to_string(rows) + " * " + std::to_string(cols) +
                " floats overflows int64");
  }
  try {
    return std::vector<float>(static_cast<std::size_t>(count));
  } catch (const std::bad_alloc&) {
    allocation_failed(what, count);
  } catch (const std::length_error&) {
    allocation_failed(what, count);
  }
}

void parallel_for(int64_t tasks, const std::function<void(int64_t)>& body, bool parallel) {
  if (tasks <= 0) return;
  auto serial = [&] {
    for (int64_t t = 0; t < tasks; ++t) body(t);
  };
  if (!parallel || tasks == 1) return serial();
  std::unique_lock<std::mutex> lock(g_use_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return serial();  // another thread is using the pool: run here
  ThreadPool& pool = pool_locked();
  if (pool.size() == 1) {
    lock.unlock();
    return serial();
  }
  pool.run(tasks, body);
}

ReusedStaging::ReusedStaging(int slot, const char* op, const char* operand, int64_t rows,
                             int64_t cols) {
  const int64_t count = staging_count(rows, cols);
  if (count >= 0 && count <= kMaxReusedStagingFloats) {
    thread_local std::vector<float> buffers[kStagingSlots];
    std::vector<float>& buf = buffers[slot];
    if (static_cast<int64_t>(buf.size()) < count) buf.resize(static_cast<std::size_t>(count));
    data_ = buf.data();
    return;
  }
  own_ = staging_buffer(op, operand, rows, cols);  // throws with the sizes when they overflow
  data_ = own_.data();
}

}  // namespace gemmkit::cpu
