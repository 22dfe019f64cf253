// The fast P(best) kernel (best_arm._fast_core_array) as one loop per row, for XLA:CPU.
//
// The same quadrature, grid and tails as best_arm._fast_core_array, step for step (read
// that function first: this file is its transcription). XLA:CPU runs the array program as
// many fusions that move [rows, arms, 3 (G - 1) + 1] arrays through memory, at 8-12x
// the cost of its transcendental arithmetic (results/bench/README.md, "The fast P(best)
// kernel against its own floor"); here each row's arrays stay in L1 and the per-element
// exp / log run as branch-free polynomials the compiler vectorizes.
//
// Built on first use by fast_pbest_cpu.py (g++ -O3 -march=native, against the XLA FFI
// headers that ship with jaxlib) and called through jax.ffi.ffi_call.
//
// Shapes: concentrations [R, A, 2] (float32, already floored, a stand-in (1, 1) for
// invalid arms), valid [R, A] (bool), out [R, A] (float32, unnormalized P(best), 0 for
// invalid arms).

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace {

constexpr float kInner = 0.5f;         // best_arm._FAST_INNER
constexpr float kTail = 20.0f;         // best_arm._FAST_TAIL
constexpr float kLimit = 1e4f;         // best_arm._FAST_LIMIT
constexpr float kRangeSigmas = 4.0f;   // best_arm._FAST_RANGE_SIGMAS
constexpr float kGridStep = 0.25f;     // best_arm._FAST_GRID_STEP

inline float AsFloat(int32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline int32_t AsInt(float value) {
  int32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// e^x to ~1 ulp for x >= -87.3 (Cody-Waite reduction, Cephes' degree-6 polynomial);
// 0 below (no subnormal results: they are < 1.2e-38 of a row's peak). Branch-free.
inline float Exp(float x) {
  const bool underflow = x < -87.3f;
  x = x > 88.0f ? 88.0f : x;
  x = x < -87.3f ? -87.3f : x;
  const float k = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = x - k * 0.693359375f + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = AsFloat((static_cast<int32_t>(k) + 127) << 23);
  return underflow ? 0.0f : p * scale;
}

// log(x) to ~1 ulp for x > 0 finite, subnormals included (Cephes' polynomial on the
// mantissa in [sqrt(1/2), sqrt(2))). Branch-free.
inline float Log(float x) {
  const bool subnormal = x < 1.17549435e-38f;
  x = subnormal ? x * 8388608.0f : x;  // 2^23
  const int32_t bits = AsInt(x);
  float e = static_cast<float>(((bits >> 23) & 0xff) - 126);
  float m = AsFloat((bits & 0x007fffff) | 0x3f000000);  // [0.5, 1)
  const bool low = m < 0.707106781186547524f;
  e = low ? e - 1.0f : e;
  m = low ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y += -2.12194440e-4f * e;
  y += -0.5f * z;
  float result = m + y + 0.693359375f * e;
  return subnormal ? result - 15.9423851528787f : result;  // 23 log 2
}

// Arms are processed in blocks of kLanes, one per vector lane: every per-sub-node
// step (density, running CDF, log) is then one vector operation over a block, with no
// scalar chain along the grid. The padding arms (to a whole block) are invalid.
constexpr int kLanes = 16;
inline int Padded(int arms) { return (arms + kLanes - 1) / kLanes * kLanes; }

// log Gamma(x) for x >= 1e-6 to ~1e-6 absolute: the recurrence up to x + 8, then
// Stirling's series to 1 / z^5 (truncation < 4e-10 at z >= 8). Branch-free.
inline float LogGamma(float x) {
  const float z = x + 8.0f;
  const float inverse = 1.0f / z;
  const float inverse2 = inverse * inverse;
  const float series =
      inverse * (1.0f / 12.0f - inverse2 * (1.0f / 360.0f - inverse2 * (1.0f / 1260.0f)));
  const float stirling = (z - 0.5f) * Log(z) - z + 0.91893853320467274f + series;
  const float head = x * (x + 1.0f) * (x + 2.0f) * (x + 3.0f);
  const float tail = (x + 4.0f) * (x + 5.0f) * (x + 6.0f) * (x + 7.0f);
  return stirling - Log(head) - Log(tail);
}

// sinh(t) to ~1 ulp: e^t - e^-t, or its series where that cancels. Branch-free.
inline float Sinh(float t) {
  const float e = Exp(t);
  const float t2 = t * t;
  const float series = t * (1.0f + t2 * (1.0f / 6.0f + t2 * (1.0f / 120.0f + t2 / 5040.0f)));
  return std::fabs(t) < 0.5f ? series : 0.5f * (e - 1.0f / e);
}

// Scratch for one row, reused across rows. Per arm ([arm_slots]): alpha, beta, mask
// (1 = valid), log B(alpha, beta), the exact upper tail's mass, log of the mass below
// the grid; per sub-node ([S]): its place, weight, log1p(e^-|z|), prod_b F_b; per
// sub-node and lane ([S, kLanes]): one block's sub-node masses, the running product of
// the CDFs over the blocks (a mantissa in [1, 2) and a power of two, so no log per
// arm and node and no underflow), the count of zero CDFs; ratio ([blocks, S, kLanes]):
// sub-node mass / CDF.
struct Workspace {
  std::vector<float> edges, nodes, weights, softplus, node_weight, powers, zeros;
  std::vector<float> alpha, beta, mask, log_norm, upper, log_lower;
  std::vector<float> sub_mass, mantissa_lanes, power_lanes, zero_lanes, ratio;
  void Resize(int arms, int grid_size) {
    const int subnodes = 3 * (grid_size - 1) + 1;
    const int arm_slots = Padded(arms);
    for (auto* v : {&nodes, &weights, &softplus, &node_weight, &powers, &zeros}) {
      v->assign(subnodes, 0.0f);
    }
    for (auto* v : {&alpha, &beta, &mask, &log_norm, &upper, &log_lower}) {
      v->assign(arm_slots, 0.0f);
    }
    for (auto* v : {&sub_mass, &mantissa_lanes, &power_lanes, &zero_lanes}) {
      v->assign(subnodes * kLanes, 0.0f);
    }
    edges.assign(grid_size, 0.0f);
    ratio.assign(static_cast<size_t>(arm_slots) * subnodes, 0.0f);
  }
};

// best_arm._fast_edges for one row, from the arms' alpha, beta and mask
// ([arm_slots], (1, 1) and mask 0 for invalid arms and the padding).
void RowEdges(const float* __restrict alpha, const float* __restrict beta,
              const float* __restrict mask, int arm_slots, int grid_size, float* edges) {
  float low = -kLimit, high = -kLimit;
#pragma omp simd reduction(max : low, high)
  for (int a = 0; a < arm_slots; ++a) {
    const float mode = Log(alpha[a]) - Log(beta[a]);
    const float sd = std::sqrt(1.0f / alpha[a] + 0.5f / (alpha[a] * alpha[a]) +
                               1.0f / beta[a] + 0.5f / (beta[a] * beta[a]));
    float arm_low = mode - kRangeSigmas * sd, arm_high = mode + kRangeSigmas * sd;
    arm_low = arm_low > -kLimit ? arm_low : -kLimit;
    arm_high = arm_high < kLimit ? arm_high : kLimit;
    arm_low = mask[a] > 0.0f ? arm_low : -kLimit;
    arm_high = mask[a] > 0.0f ? arm_high : -kLimit;
    low = low > arm_low ? low : arm_low;
    high = high > arm_high ? high : arm_high;
  }
  high = std::fmax(high, kTail);
  low = std::fmin(low, high - 1.0f);
  const float t_low = std::floor(std::asinh(low / kInner) / kGridStep) * kGridStep;
  const float t_high = std::ceil(std::asinh(high / kInner) / kGridStep) * kGridStep;
  const float step = 1.0f / static_cast<float>(grid_size - 1);
  for (int g = 0; g < grid_size; ++g) {
    const float fraction = g == grid_size - 1 ? 1.0f : static_cast<float>(g) * step;
    edges[g] = kInner * Sinh(t_low + (t_high - t_low) * fraction);
  }
}

// best_arm._fast_core_array for one row: out[a] = unnormalized P(a is best).
void Row(const float* conc, const bool* __restrict valid, int arms, int grid_size,
         Workspace& w, float* __restrict out) {
  static const float kGaussT[3] = {0.5f - 0.5f * 0.7745966692414834f, 0.5f,
                                   0.5f + 0.5f * 0.7745966692414834f};
  static const float kGaussW[3] = {5.0f / 18.0f, 8.0f / 18.0f, 5.0f / 18.0f};
  const int cells = grid_size - 1;
  const int upper_node = 3 * cells;  // sub-nodes: 3 per cell, Gauss-point-major, then the tail
  const int subnodes = upper_node + 1;
  const int arm_slots = Padded(arms);
  float* __restrict alpha = w.alpha.data();
  float* __restrict beta = w.beta.data();
  float* __restrict mask = w.mask.data();
  float* __restrict log_norm = w.log_norm.data();
  float* __restrict upper = w.upper.data();
  float* __restrict log_lower = w.log_lower.data();
  float* __restrict nodes = w.nodes.data();
  float* __restrict weights = w.weights.data();
  float* __restrict softplus = w.softplus.data();
  float* __restrict node_weight = w.node_weight.data();
  float* __restrict sub_mass = w.sub_mass.data();
  float* __restrict mantissa_lanes = w.mantissa_lanes.data();
  float* __restrict power_lanes = w.power_lanes.data();
  float* __restrict zero_lanes = w.zero_lanes.data();
  float* __restrict edges = w.edges.data();
  for (int a = 0; a < arms; ++a) {
    alpha[a] = conc[2 * a];
    beta[a] = conc[2 * a + 1];
    mask[a] = valid[a] ? 1.0f : 0.0f;
  }
  for (int a = arms; a < arm_slots; ++a) {
    alpha[a] = beta[a] = 1.0f;
    mask[a] = 0.0f;
  }
  RowEdges(alpha, beta, mask, arm_slots, grid_size, edges);
  for (int t = 0; t < 3; ++t) {
    for (int c = 0; c < cells; ++c) {
      const float width = edges[c + 1] - edges[c];
      nodes[t * cells + c] = edges[c] + width * kGaussT[t];
      weights[t * cells + c] = width * kGaussW[t];
    }
  }
  nodes[upper_node] = edges[grid_size - 1];
  weights[upper_node] = 0.0f;
#pragma omp simd
  for (int s = 0; s < subnodes; ++s) {
    // log1p(e^-|z|): log(1 + e) loses e's relative precision below ~1e-4, where the
    // series e - e^2 / 2 is exact to float32.
    const float e = Exp(-std::fabs(nodes[s]));
    softplus[s] = e < 1e-4f ? e - 0.5f * e * e : Log(1.0f + e);
  }
  for (int i = 0; i < subnodes * kLanes; ++i) {
    mantissa_lanes[i] = 1.0f;
    power_lanes[i] = zero_lanes[i] = 0.0f;
  }
  // Per arm: log B(alpha, beta) and the exact upper tail beyond the last edge (>= logit
  // 20, exponential with rate beta).
  const float top = edges[grid_size - 1];
  const float top_softplus = softplus[upper_node];
#pragma omp simd
  for (int a = 0; a < arm_slots; ++a) {
    const float n = alpha[a] + beta[a];
    log_norm[a] = LogGamma(alpha[a]) + LogGamma(beta[a]) - LogGamma(n);
    const float tail = Exp(-beta[a] * top - n * top_softplus - log_norm[a]) / beta[a];
    upper[a] = mask[a] * (tail < 1.0f ? tail : 1.0f);
  }
  for (int block = 0; block < arm_slots; block += kLanes) {
    const float* __restrict a_ = alpha + block;
    const float* __restrict b_ = beta + block;
    const float* __restrict m_ = mask + block;
    const float* __restrict norm = log_norm + block;
    const float* __restrict up = upper + block;
    float* __restrict ratio = w.ratio.data() + static_cast<size_t>(block) * subnodes;
    // Density x weight at every sub-node of the grid; the mass below it by normalization.
    float below[kLanes];
    for (int l = 0; l < kLanes; ++l) below[l] = 1.0f - up[l];
    for (int s = 0; s < upper_node; ++s) {
      const float z = nodes[s], sp = softplus[s], weight = weights[s];
      float* __restrict mass = sub_mass + s * kLanes;
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) {
        const float linear = z > 0.0f ? -b_[l] * z : a_[l] * z;
        mass[l] = m_[l] * Exp(linear - (a_[l] + b_[l]) * sp - norm[l]) * weight;
        below[l] -= mass[l];
      }
    }
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) {
      below[l] = below[l] < 0.0f ? 0.0f : (below[l] > 1.0f ? 1.0f : below[l]);
      log_lower[block + l] = m_[l] * Log(below[l] > 1e-37f ? below[l] : 1e-37f);
    }
    // The CDF at each sub-node's middle (a running sum along each cell's three nodes),
    // then ratio = mass / CDF and the CDF into the row's products (1 for invalid arms).
    float start[kLanes];
    for (int l = 0; l < kLanes; ++l) start[l] = below[l];
    auto take = [&](int s, const float* __restrict middle) {
      const float* __restrict mass = sub_mass + s * kLanes;
      float* __restrict r = ratio + s * kLanes;
      float* __restrict mantissas = mantissa_lanes + s * kLanes;
      float* __restrict powers = power_lanes + s * kLanes;
      float* __restrict zeros = zero_lanes + s * kLanes;
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) {
        float m = m_[l] > 0.0f ? middle[l] : 1.0f;
        m = m < 0.0f ? 0.0f : (m > 1.0f ? 1.0f : m);
        const bool zero = m <= 0.0f;
        const float safe = zero ? 1.0f : m;
        r[l] = zero ? 0.0f : mass[l] / safe;
        // mantissa x safe, renormalized: safe is scaled by 2^23 first if subnormal.
        const bool subnormal = safe < 1.17549435e-38f;
        const int32_t bits = AsInt(mantissas[l] * (subnormal ? safe * 8388608.0f : safe));
        mantissas[l] = AsFloat((bits & 0x007fffff) | 0x3f800000);
        powers[l] += static_cast<float>(((bits >> 23) & 0xff) - 127) - (subnormal ? 23.0f : 0.0f);
        zeros[l] += zero ? 1.0f : 0.0f;
      }
    };
    for (int c = 0; c < cells; ++c) {
      for (int t = 0; t < 3; ++t) {
        const float* __restrict mass = sub_mass + (t * cells + c) * kLanes;
        float middle[kLanes];
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) {
          middle[l] = start[l] + 0.5f * mass[l];
          start[l] += mass[l];
        }
        take(t * cells + c, middle);
      }
    }
    float tail_middle[kLanes];
    for (int l = 0; l < kLanes; ++l) {
      tail_middle[l] = 1.0f - 0.5f * up[l];
      sub_mass[upper_node * kLanes + l] = up[l];
    }
    take(upper_node, tail_middle);
  }
  // prod_b F_b at every sub-node, scaled by its peak; then the mixture.
  float* __restrict powers = w.powers.data();
  float* __restrict zeros = w.zeros.data();
  for (int s = 0; s < subnodes; ++s) {
    float product = 1.0f, power = 0.0f, zero = 0.0f;  // 16 mantissas < 2^16: no overflow
#pragma omp simd reduction(* : product) reduction(+ : power, zero)
    for (int l = 0; l < kLanes; ++l) {
      product *= mantissa_lanes[s * kLanes + l];
      power += power_lanes[s * kLanes + l];
      zero += zero_lanes[s * kLanes + l];
    }
    node_weight[s] = product;
    powers[s] = power;
    zeros[s] = zero;
  }
  float peak = -INFINITY;
#pragma omp simd reduction(max : peak)
  for (int s = 0; s < subnodes; ++s) {
    const float total = Log(node_weight[s]) + 0.693147180559945309f * powers[s];
    node_weight[s] = zeros[s] > 0.0f ? -INFINITY : total;
    peak = peak > node_weight[s] ? peak : node_weight[s];
  }
  if (!std::isfinite(peak)) peak = 0.0f;
#pragma omp simd
  for (int s = 0; s < subnodes; ++s) node_weight[s] = Exp(node_weight[s] - peak);
  float rate_sum = 0.0f, lower_log_sum = 0.0f;
  for (int a = 0; a < arm_slots; ++a) {
    rate_sum += mask[a] * alpha[a];
    lower_log_sum += log_lower[a];
  }
  const float share_scale = Exp(lower_log_sum - peak) / std::fmax(rate_sum, 1e-30f);
  for (int block = 0; block < arm_slots; block += kLanes) {
    const float* __restrict ratio = w.ratio.data() + static_cast<size_t>(block) * subnodes;
    float sum[kLanes];
    for (int l = 0; l < kLanes; ++l) sum[l] = share_scale * alpha[block + l];
    for (int s = 0; s < subnodes; ++s) {
      const float weight = node_weight[s];
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) sum[l] += ratio[s * kLanes + l] * weight;
    }
    for (int l = 0; l < kLanes && block + l < arms; ++l) {
      out[block + l] = mask[block + l] * sum[l];
    }
  }
}

}  // namespace

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

// Rows are shared out in chunks between the calling thread and XLA's intra-op pool.
// Every thread takes chunks from one counter until none is left; the caller returns
// once every row is done. A pool task that starts late finds no chunk and touches no
// buffer (the shared state outlives the call), and the caller never waits for a task
// that has not taken a chunk, so a busy pool only costs parallelism.
constexpr int64_t kMinRowsPerChunk = 32;

struct Shared {
  const float* conc;
  const bool* valid;
  float* out;
  int64_t rows, arms, grid_size, chunk;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
};

void Work(Shared& shared) {
  for (;;) {
    const int64_t begin = shared.next.fetch_add(shared.chunk);
    if (begin >= shared.rows) return;
    const int64_t count = std::min(shared.chunk, shared.rows - begin);
    Rows(shared.conc + begin * shared.arms * 2, shared.valid + begin * shared.arms, count,
         shared.arms, shared.grid_size, shared.out + begin * shared.arms);
    shared.done.fetch_add(count);
  }
}

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
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const int64_t chunk = std::max(kMinRowsPerChunk, (rows + 2 * threads - 1) / (2 * threads));
  if (threads == 1 || rows < 2 * chunk) {
    Rows(concentrations.typed_data(), valid.typed_data(), rows, arms, grid_size,
         out->typed_data());
    return ffi::Error::Success();
  }
  auto shared = std::make_shared<Shared>();
  shared->conc = concentrations.typed_data();
  shared->valid = valid.typed_data();
  shared->out = out->typed_data();
  shared->rows = rows;
  shared->arms = arms;
  shared->grid_size = grid_size;
  shared->chunk = chunk;
  const int64_t helpers = std::min(threads, (rows + chunk - 1) / chunk) - 1;
  for (int64_t i = 0; i < helpers; ++i) pool.Schedule([shared] { Work(*shared); });
  Work(*shared);
  while (shared->done.load() < rows) std::this_thread::yield();
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(CuriosityFastPbest, FastPbestImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("grid_size"));
