// Thompson selection's draw from a cached selection distribution (policy._draw,
// beliefs.two_stage_index: stage_index, then inverse_cdf_index over the drawn stage's
// column) as one native loop per row, for XLA:CPU.
//
// Each simulation draws once per tree at the root and once per level below it. The
// array program needs two running sums per draw (the stage weights' and the drawn
// column's); XLA:CPU lowers jnp.cumsum to a padded reduce-window, which made the draws
// of an 11x11 search (B = 256, 32 simulations) cost ~4 ms of the root's alone
// (results/bench/README.md, "Thompson draws as a native pass"). Here the running sums
// are plain left-to-right sums and the rules are two_stage_index's, step for step:
//
//   stage:  c_s = w_0 + ... + w_s; t = u * c_{W-1}; stage = #{s : c_s <= t}, at most
//           W - 1; inside = (t - c_{stage-1}) / (c_stage - c_{stage-1}) where that
//           width is positive (c_{-1} = 0), else u; clipped to [0, 1 - 2^-23];
//   action: d_a = table[0, stage] + ... + table[a, stage]; t' = inside * d_{A-1};
//           action = #{a : d_a <= t'}, at most A - 1.
//
// A zero-probability entry repeats its predecessor's running sum exactly, so it is
// never drawn (beliefs.inverse_cdf_index). The array program's cumsum sums in another
// order; the two can differ in the last bit of a running sum, which changes a draw
// only where u lands within that bit of a boundary.
//
// Shapes: weights [R, W] f32, table [R, A, W] f32 (arm-major, as
// selection_cache.SelectionCache stores it), uniform [R] f32; result: action [R] int32.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "custom_call_cpu.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kMinRowsPerChunk = 64;
constexpr float kBelowOne = 1.0f - 1.0f / 8388608.0f;  // 1 - 2^-23

// #{i : running[i] <= target}, at most count - 1 (beliefs.inverse_cdf_index).
int32_t CountAtMost(const float* running, int64_t count, float target) {
  int32_t at_most = 0;
  for (int64_t i = 0; i < count; ++i) at_most += running[i] <= target ? 1 : 0;
  return static_cast<int32_t>(std::min<int64_t>(at_most, count - 1));
}

// The first stage of one row's draw: the stage `uniform` picks over the running sum of
// weights [W] and its position inside that stage's interval.
struct Stage {
  int32_t stage;
  float inside;
};

Stage DrawStage(const float* weights, int64_t stages, float uniform,
                std::vector<float>& running) {
  float sum = 0.0f;
  for (int64_t s = 0; s < stages; ++s) running[s] = sum += weights[s];
  const float target = uniform * running[stages - 1];
  const int32_t stage = CountAtMost(running.data(), stages, target);
  const float high = running[stage];
  const float low = stage > 0 ? running[stage - 1] : 0.0f;
  const float width = high - low;
  const float inside = width > 0.0f ? (target - low) / width : uniform;
  return Stage{stage, std::min(std::max(inside, 0.0f), kBelowOne)};
}

// The second stage: the action `inside` picks over the running sum of column `stage`
// of table [A, W].
int32_t DrawAction(const float* table, int64_t actions, int64_t stages, Stage stage,
                   std::vector<float>& running) {
  float sum = 0.0f;
  for (int64_t a = 0; a < actions; ++a) running[a] = sum += table[a * stages + stage.stage];
  return CountAtMost(running.data(), actions, stage.inside * running[actions - 1]);
}

// A column of a many-stage table is one float per cache line: ask for the next row's
// lines while this row's are summed.
void PrefetchColumn(const float* table, int64_t actions, int64_t stages, int32_t stage) {
  if (stages == 1) return;  // contiguous: the hardware prefetcher sees it
  for (int64_t a = 0; a < actions; ++a) __builtin_prefetch(table + a * stages + stage);
}

}  // namespace

static ffi::Error DrawImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> weights,
                           ffi::Buffer<ffi::F32> table, ffi::Buffer<ffi::F32> uniform,
                           ffi::ResultBuffer<ffi::S32> action) {
  const auto dims = table.dimensions();
  if (dims.size() < 2) return ffi::Error::InvalidArgument("table must be [..., A, W]");
  const int64_t actions = dims[dims.size() - 2], stages = dims[dims.size() - 1];
  const int64_t rows = static_cast<int64_t>(uniform.element_count());
  if (actions < 1 || stages < 1 ||
      static_cast<int64_t>(weights.element_count()) != rows * stages ||
      static_cast<int64_t>(table.element_count()) != rows * actions * stages) {
    return ffi::Error::InvalidArgument("weights must be [..., W], table [..., A, W], "
                                       "uniform [...], with the same leading shape");
  }
  const float* w = weights.typed_data();
  const float* t = table.typed_data();
  const float* u = uniform.typed_data();
  int32_t* out = action->typed_data();
  ParallelChunks(pool, rows, kMinRowsPerChunk, [=](int64_t begin, int64_t end) {
    if (begin >= end) return;  // no rows (an empty batch): nothing to read
    std::vector<float> running(std::max(actions, stages));
    Stage next = DrawStage(w + begin * stages, stages, u[begin], running);
    for (int64_t r = begin; r < end; ++r) {
      const Stage stage = next;
      if (r + 1 < end) {
        next = DrawStage(w + (r + 1) * stages, stages, u[r + 1], running);
        PrefetchColumn(t + (r + 1) * actions * stages, actions, stages, next.stage);
      }
      out[r] = DrawAction(t + r * actions * stages, actions, stages, stage, running);
    }
  });
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(CuriosityDraw, DrawImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()   // weights
                                  .Arg<ffi::Buffer<ffi::F32>>()   // table
                                  .Arg<ffi::Buffer<ffi::F32>>()   // uniform
                                  .Ret<ffi::Buffer<ffi::S32>>());  // action
