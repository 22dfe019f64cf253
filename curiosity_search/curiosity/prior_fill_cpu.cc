// The lazy prior fill (nodes.fill_prior_best) as one native pass, for XLA:CPU, in the
// layout it serves: K = 2, the fast P(best), selection from a cached table.
//
// A node's selection row over its Q_a priors is filled the first time a descent stops
// on it: P(best) over its legal children's priors (best_arm.best_arm_probability with
// no exact arms: the fast kernel, normalized over the legal arms), stored as the full
// layout's one stage (selection_cache.from_probability). The batched fill gathers the
// trees that need it into compaction slots and runs P(best)'s array-program wrapper
// around the kernel; here each needed row is computed and written in place. A row
// outside the fast kernel's envelope is left untouched and flagged, and nodes.py fills
// the flagged trees by the batched path (the accurate method).
//
// Shapes: node [B] int32, needed [B] bool, action_beliefs [B, N, A, 2] f32, invalid
// [B, N, A] bool; updated in place (aliased): stage weights [B, N, 1] f32, table
// [B, N, A, 1] f32; result: fallback [B] bool.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "fast_pbest_cpu.h"
#include "custom_call_cpu.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kMinTreesPerChunk = 32;

// P(best) over the legal arms of one row of priors into `out` ([A]); false (out
// unspecified) where an arm is outside the fast envelope and `check_envelope`.
bool PriorRow(const float* priors, const bool* invalid, int actions, int grid_size,
              bool check_envelope, Workspace& w, std::vector<float>& conc,
              std::unique_ptr<bool[]>& legal, float* out) {
  for (int a = 0; a < actions; ++a) {
    legal[a] = !invalid[a];
    const float k0 = legal[a] ? Max(priors[2 * a], kConcentrationFloor) : 1.0f;
    const float k1 = legal[a] ? Max(priors[2 * a + 1], kConcentrationFloor) : 1.0f;
    if (check_envelope && legal[a] && !InFastEnvelope(k0, k1)) return false;
    conc[2 * a] = k0;
    conc[2 * a + 1] = k1;
  }
  Row(conc.data(), legal.get(), actions, grid_size, w, out);
  // best_arm._combine without exact arms: normalized over the legal arms (0 if none).
  float total = 0.0f;
  for (int a = 0; a < actions; ++a) total += legal[a] ? out[a] : 0.0f;
  for (int a = 0; a < actions; ++a) {
    out[a] = (legal[a] && total > 0.0f) ? out[a] / total : 0.0f;
  }
  return true;
}

}  // namespace

static ffi::Error PriorFillImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::S32> node,
                                ffi::Buffer<ffi::PRED> needed,
                                ffi::Buffer<ffi::F32> action_beliefs,
                                ffi::Buffer<ffi::PRED> invalid, ffi::AnyBuffer weights_in,
                                ffi::AnyBuffer table_in, ffi::ResultBuffer<ffi::F32> weights,
                                ffi::ResultBuffer<ffi::F32> table,
                                ffi::ResultBuffer<ffi::PRED> fallback, int64_t grid_size,
                                bool check_envelope) {
  const auto dims = invalid.dimensions();
  if (dims.size() != 3) return ffi::Error::InvalidArgument("invalid must be [B, N, A]");
  if (grid_size < 2) return ffi::Error::InvalidArgument("grid_size must be >= 2");
  CopyIfApart(weights_in, weights->typed_data());
  CopyIfApart(table_in, table->typed_data());
  const int64_t nodes = dims[1], actions = dims[2];
  const int32_t* node_index = node.typed_data();
  const bool* need = needed.typed_data();
  const float* priors = action_beliefs.typed_data();
  const bool* illegal = invalid.typed_data();
  float* stage = weights->typed_data();
  float* rows = table->typed_data();
  bool* flags = fallback->typed_data();
  ParallelChunks(pool, dims[0], kMinTreesPerChunk, [=](int64_t begin, int64_t end) {
    Workspace w;
    w.Resize(static_cast<int>(actions), static_cast<int>(grid_size));
    std::vector<float> conc(2 * actions), out(actions);
    std::unique_ptr<bool[]> legal(new bool[actions > 0 ? actions : 1]);
    for (int64_t tree = begin; tree < end; ++tree) {
      flags[tree] = false;
      if (!need[tree]) continue;
      const int64_t at = tree * nodes + node_index[tree];
      if (!PriorRow(priors + at * actions * 2, illegal + at * actions,
                    static_cast<int>(actions), static_cast<int>(grid_size), check_envelope, w,
                    conc, legal, out.data())) {
        flags[tree] = true;
        continue;
      }
      stage[at] = 1.0f;
      std::memcpy(rows + at * actions, out.data(), sizeof(float) * actions);
    }
  });
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(CuriosityPriorFill, PriorFillImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::S32>>()    // node
                                  .Arg<ffi::Buffer<ffi::PRED>>()   // needed
                                  .Arg<ffi::Buffer<ffi::F32>>()    // action_beliefs
                                  .Arg<ffi::Buffer<ffi::PRED>>()   // invalid
                                  .Arg<ffi::AnyBuffer>()           // weights
                                  .Arg<ffi::AnyBuffer>()           // table
                                  .Ret<ffi::Buffer<ffi::F32>>()    // weights
                                  .Ret<ffi::Buffer<ffi::F32>>()    // table
                                  .Ret<ffi::Buffer<ffi::PRED>>()   // fallback
                                  .Attr<int64_t>("grid_size")
                                  .Attr<bool>("check_envelope"));
