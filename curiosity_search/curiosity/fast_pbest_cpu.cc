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
// invalid arms).

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

constexpr int64_t kMinRowsPerChunk = 32;

}  // namespace

static ffi::Error FastPbestImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> concentrations,
                                ffi::Buffer<ffi::PRED> valid,
                                ffi::ResultBuffer<ffi::F32> out, int64_t grid_size) {
  const auto dims = concentrations.dimensions();
  if (dims.size() < 2 || dims[dims.size() - 1] != 2) {
    return ffi::Error::InvalidArgument("concentrations must be [..., A, 2]");
  }
  if (grid_size < 2) return ffi::Error::InvalidArgument("grid_size must be >= 2");
  const int64_t arms = dims[dims.size() - 2];
  const int64_t rows = arms == 0 ? 0 : static_cast<int64_t>(valid.element_count()) / arms;
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
