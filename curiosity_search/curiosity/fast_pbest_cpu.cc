// The fast P(best) kernel (best_arm._fast_core_array) as one loop per row, for XLA:CPU.
//
// The same quadrature, grid and tails as best_arm._fast_core_array, step for step (read
// that function first: fast_pbest_cpu.h is its transcription, the row this file runs
// over rows). XLA:CPU runs the array program as many fusions that move [rows, arms,
// 3 (G - 1) + 1] arrays through memory, at 8-12x the cost of its transcendental
// arithmetic (results/bench/README.md, "The fast P(best) kernel against its own
// floor"); here each row's arrays stay in L1 and the per-element
// exp / log run as branch-free polynomials the compiler vectorizes.
//
// Built on first use by native_cpu.py (g++ -O3 -march=native, against the XLA FFI
// headers that ship with jaxlib) and called through jax.ffi.ffi_call.
//
// Shapes: concentrations [R, A, 2] (float32, already floored, a stand-in (1, 1) for
// invalid arms), valid [R, A] (bool), out [R, A] (float32, unnormalized P(best), 0 for
// invalid arms). The second custom call here, CuriosityFastAggregates, builds the same
// kernel's per-row aggregates (best_arm.fast_aggregates; shapes at its handler).

#include <cstdint>

#include "fast_pbest_cpu.h"
#include "custom_call_cpu.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// `rows` consecutive rows from the given pointers, with one workspace.
void Rows(const float* conc, const bool* valid, int64_t rows, int64_t arms, int64_t grid_size,
          float* out) {
  Workspace w;
  w.Resize(static_cast<int>(arms), static_cast<int>(grid_size));
  for (int64_t r = 0; r < rows; ++r) {
    Row(conc + r * arms * 2, valid + r * arms, static_cast<int>(arms),
        static_cast<int>(grid_size), w, out + r * arms);
  }
}

// The arms and rows of concentrations [..., A, 2] and valid [..., A], checked.
ffi::Error RowShape(const ffi::Buffer<ffi::F32>& concentrations,
                    const ffi::Buffer<ffi::PRED>& valid, int64_t grid_size, int64_t* arms,
                    int64_t* rows) {
  const auto dims = concentrations.dimensions();
  if (dims.size() < 2 || dims[dims.size() - 1] != 2) {
    return ffi::Error::InvalidArgument("concentrations must be [..., A, 2]");
  }
  if (grid_size < 2) return ffi::Error::InvalidArgument("grid_size must be >= 2");
  *arms = dims[dims.size() - 2];
  *rows = *arms == 0 ? 0 : static_cast<int64_t>(valid.element_count()) / *arms;
  return ffi::Error::Success();
}

constexpr int64_t kMinRowsPerChunk = 32;
constexpr int64_t kMinAggregateRowsPerChunk = 4;  // a row is A x W terms

}  // namespace

static ffi::Error FastPbestImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> concentrations,
                                ffi::Buffer<ffi::PRED> valid,
                                ffi::ResultBuffer<ffi::F32> out, int64_t grid_size) {
  int64_t arms, rows;
  if (ffi::Error error = RowShape(concentrations, valid, grid_size, &arms, &rows);
      error.failure()) {
    return error;
  }
  const float* conc = concentrations.typed_data();
  const bool* mask = valid.typed_data();
  float* result = out->typed_data();
  ParallelChunks(pool, rows, kMinRowsPerChunk, [=](int64_t begin, int64_t end) {
    Rows(conc + begin * arms * 2, mask + begin * arms, end - begin, arms, grid_size,
         result + begin * arms);
  });
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(CuriosityFastPbest, FastPbestImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("grid_size"));

// best_arm.fast_aggregates over rows (AggregatesRow). Shapes: concentrations [R, A, 2]
// (raw), valid [R, A]; results edges [R, G], log_total, zeros, ratio_sum [R, S],
// vector_sum [R, S, 2], lower_log, rate_sum [R], rate_vector [R, 2], table, logs
// [R, A, S + 1], S = 3 (G - 1) + 1.
static ffi::Error FastAggregatesImpl(
    ffi::ThreadPool pool, ffi::Buffer<ffi::F32> concentrations, ffi::Buffer<ffi::PRED> valid,
    ffi::ResultBuffer<ffi::F32> edges, ffi::ResultBuffer<ffi::F32> log_total,
    ffi::ResultBuffer<ffi::F32> zeros, ffi::ResultBuffer<ffi::F32> ratio_sum,
    ffi::ResultBuffer<ffi::F32> vector_sum, ffi::ResultBuffer<ffi::F32> lower_log,
    ffi::ResultBuffer<ffi::F32> rate_sum, ffi::ResultBuffer<ffi::F32> rate_vector,
    ffi::ResultBuffer<ffi::F32> table, ffi::ResultBuffer<ffi::F32> logs, int64_t grid_size) {
  int64_t arms, rows;
  if (ffi::Error error = RowShape(concentrations, valid, grid_size, &arms, &rows);
      error.failure()) {
    return error;
  }
  const int64_t subnodes = 3 * (grid_size - 1) + 1, stages = subnodes + 1;
  const float* conc = concentrations.typed_data();
  const bool* mask = valid.typed_data();
  float* out_edges = edges->typed_data();
  float* out_log_total = log_total->typed_data();
  float* out_zeros = zeros->typed_data();
  float* out_ratio_sum = ratio_sum->typed_data();
  float* out_vector_sum = vector_sum->typed_data();
  float* out_lower_log = lower_log->typed_data();
  float* out_rate_sum = rate_sum->typed_data();
  float* out_rate_vector = rate_vector->typed_data();
  float* out_table = table->typed_data();
  float* out_logs = logs->typed_data();
  ParallelChunks(pool, rows, kMinAggregateRowsPerChunk, [=](int64_t begin, int64_t end) {
    Workspace w;
    w.Resize(static_cast<int>(arms), static_cast<int>(grid_size));
    for (int64_t r = begin; r < end; ++r) {
      const Aggregates g{out_edges + r * grid_size,    out_log_total + r * subnodes,
                         out_zeros + r * subnodes,     out_ratio_sum + r * subnodes,
                         out_vector_sum + r * subnodes * 2, out_lower_log + r,
                         out_rate_sum + r,             out_rate_vector + r * 2};
      AggregatesRow(conc + r * arms * 2, mask + r * arms, static_cast<int>(arms),
                    static_cast<int>(grid_size), w, g, out_table + r * arms * stages,
                    out_logs + r * arms * stages);
    }
  });
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(CuriosityFastAggregates, FastAggregatesImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()   // concentrations
                                  .Arg<ffi::Buffer<ffi::PRED>>()  // valid
                                  .Ret<ffi::Buffer<ffi::F32>>()   // edges
                                  .Ret<ffi::Buffer<ffi::F32>>()   // log_total
                                  .Ret<ffi::Buffer<ffi::F32>>()   // zeros
                                  .Ret<ffi::Buffer<ffi::F32>>()   // ratio_sum
                                  .Ret<ffi::Buffer<ffi::F32>>()   // vector_sum
                                  .Ret<ffi::Buffer<ffi::F32>>()   // lower_log
                                  .Ret<ffi::Buffer<ffi::F32>>()   // rate_sum
                                  .Ret<ffi::Buffer<ffi::F32>>()   // rate_vector
                                  .Ret<ffi::Buffer<ffi::F32>>()   // table
                                  .Ret<ffi::Buffer<ffi::F32>>()   // logs
                                  .Attr<int64_t>("grid_size"));
