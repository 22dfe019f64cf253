// Helpers of the native CPU custom calls (fast_pbest_cpu.cc, backup_cpu.cc,
// prior_fill_cpu.cc): work shared out between threads, buffers updated in place.
//
// ParallelChunks shares work out in chunks between the calling thread and XLA's
// intra-op thread pool. Every thread takes chunks of [begin, end) from one counter until none is left; the
// caller returns once every item is done. A pool task that starts late finds no chunk
// and touches no buffer (the shared state outlives the call), and the caller never
// waits for a task that has not taken a chunk, so a busy pool only costs parallelism.

#ifndef CURIOSITY_SEARCH_CUSTOM_CALL_CPU_H_
#define CURIOSITY_SEARCH_CUSTOM_CALL_CPU_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include "xla/ffi/api/ffi.h"

namespace {

struct Chunks {
  std::function<void(int64_t, int64_t)> run;  // run(begin, end) on items [begin, end)
  int64_t count, chunk;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
};

inline void TakeChunks(Chunks& chunks) {
  for (;;) {
    const int64_t begin = chunks.next.fetch_add(chunks.chunk);
    if (begin >= chunks.count) return;
    const int64_t end = std::min(begin + chunks.chunk, chunks.count);
    chunks.run(begin, end);
    chunks.done.fetch_add(end - begin);
  }
}

// Calls run(begin, end) over [0, count) in chunks of at least min_chunk items, about
// two chunks per thread; on the calling thread alone when that makes one chunk.
template <typename Run>
void ParallelChunks(xla::ffi::ThreadPool& pool, int64_t count, int64_t min_chunk, Run run) {
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const int64_t chunk = std::max(min_chunk, (count + 2 * threads - 1) / (2 * threads));
  if (threads == 1 || count < 2 * chunk) {
    run(int64_t{0}, count);
    return;
  }
  auto chunks = std::make_shared<Chunks>();
  chunks->run = run;
  chunks->count = count;
  chunks->chunk = chunk;
  const int64_t helpers = std::min(threads, (count + chunk - 1) / chunk) - 1;
  for (int64_t i = 0; i < helpers; ++i) pool.Schedule([chunks] { TakeChunks(*chunks); });
  TakeChunks(*chunks);
  while (chunks->done.load() < count) std::this_thread::yield();
}

// An updated array's result buffer, aliased to its argument (jax.ffi.ffi_call's
// input_output_aliases): XLA passes the same buffer, or a copy of the argument is made.
template <typename T>
void CopyIfApart(const xla::ffi::AnyBuffer& in, T* out) {
  const T* source = reinterpret_cast<const T*>(in.untyped_data());
  if (source != out) std::memcpy(out, source, in.size_bytes());
}

}  // namespace

#endif  // CURIOSITY_SEARCH_CUSTOM_CALL_CPU_H_
