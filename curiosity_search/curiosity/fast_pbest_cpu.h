// The fast P(best) kernel's row (best_arm._fast_core_array for one row, step for step:
// read that function first, this file is its transcription), shared by the native CPU
// custom calls: fast_pbest_cpu.cc (rows of P(best)), backup_cpu.cc (the curiosity
// backup's levels) and prior_fill_cpu.cc (the lazy prior fill). Why native: read
// fast_pbest_cpu.cc's opening comment.

#ifndef CURIOSITY_SEARCH_FAST_PBEST_CPU_H_
#define CURIOSITY_SEARCH_FAST_PBEST_CPU_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace {

constexpr float kInner = 0.5f;         // best_arm._FAST_INNER
constexpr float kTail = 20.0f;         // best_arm._FAST_TAIL
constexpr float kLimit = 1e4f;         // best_arm._FAST_LIMIT
constexpr float kRangeSigmas = 4.0f;   // best_arm._FAST_RANGE_SIGMAS
constexpr float kGridStep = 0.25f;     // best_arm._FAST_GRID_STEP
constexpr float kConcentrationFloor = 1e-6f;    // best_arm._CONCENTRATION_FLOOR
constexpr float kFastMinConcentration = 1e-3f;  // best_arm.FAST_MIN_CONCENTRATION
constexpr float kFastMaxTotal = 64.0f;          // best_arm.FAST_MAX_TOTAL
// best_arm._GAUSS_T / _GAUSS_W: 3-point Gauss-Legendre nodes and weights on [0, 1].
constexpr float kGaussT[3] = {0.5f - 0.5f * 0.7745966692414834f, 0.5f,
                              0.5f + 0.5f * 0.7745966692414834f};
constexpr float kGaussW[3] = {5.0f / 18.0f, 8.0f / 18.0f, 5.0f / 18.0f};

// The larger / smaller of two floats, one instruction: std::fmax / fmin are library
// calls (GCC does not inline them, for their NaN rule), one per arm and sub-node in the
// loops below, and they keep those loops scalar. With a NaN in `a` (none reaches
// them), the result is b, as std::fmax(a, b)'s.
inline float Max(float a, float b) { return a > b ? a : b; }
inline float Min(float a, float b) { return a < b ? a : b; }

// best_arm.in_fast_envelope for one arm's floored concentrations.
inline bool InFastEnvelope(float alpha, float beta) {
  return Min(alpha, beta) >= kFastMinConcentration && alpha + beta <= kFastMaxTotal;
}

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

// One block's kLanes floats as a vector (the GCC / clang vector extension).
typedef float LaneVector __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t LaneIndex __attribute__((vector_size(kLanes * sizeof(int32_t))));

// Lanes of two vectors picked by constant indices (< kLanes: the first, else the second).
#if defined(__clang__)
#define CURIOSITY_SHUFFLE(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else  // GCC (its __builtin_shufflevector only from GCC 12)
#define CURIOSITY_SHUFFLE(a, b, ...) __builtin_shuffle(a, b, LaneIndex{__VA_ARGS__})
#endif

// The kLanes row reductions of a [kLanes, kLanes] block (rows contiguous): out[r] = op
// over the lanes of row r. A transposition tree: four levels, each combining two vectors
// into one by two shuffles and one op, so the 16 rows cost 15 vector ops where 16
// horizontal reductions (one per row) cost four dependent shuffle-and-op steps each.
// Level k leaves 16 / 2^k partial results of each of 2^k rows in every vector; the rows
// end in bit-reversed order, which the last shuffle undoes.
template <typename Op>
inline LaneVector ReduceRows(const float* __restrict rows, Op op) {
  static_assert(kLanes == 16, "ReduceRows's shuffles are written for 16 lanes");
  LaneVector v[kLanes];
  for (int r = 0; r < kLanes; ++r) std::memcpy(&v[r], rows + r * kLanes, sizeof(LaneVector));
  for (int i = 0; i < 8; ++i) {
    const LaneVector a = v[2 * i], b = v[2 * i + 1];
    v[i] = op(CURIOSITY_SHUFFLE(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
              CURIOSITY_SHUFFLE(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30,
                                31));
  }
  for (int i = 0; i < 4; ++i) {
    const LaneVector a = v[2 * i], b = v[2 * i + 1];
    v[i] = op(CURIOSITY_SHUFFLE(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27),
              CURIOSITY_SHUFFLE(a, b, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30,
                                31));
  }
  for (int i = 0; i < 2; ++i) {
    const LaneVector a = v[2 * i], b = v[2 * i + 1];
    v[i] = op(CURIOSITY_SHUFFLE(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
              CURIOSITY_SHUFFLE(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30,
                                31));
  }
  const LaneVector a = v[0], b = v[1];
  const LaneVector last =
      op(CURIOSITY_SHUFFLE(a, b, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30),
         CURIOSITY_SHUFFLE(a, b, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31));
  return CURIOSITY_SHUFFLE(last, last, 0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15);
}
#undef CURIOSITY_SHUFFLE

// A lane's CDF power of two gains kZeroPower for a zero CDF: a sub-node whose summed
// power is below kZeroPowerBelow has a zero CDF in some arm (the powers of nonzero CDFs
// sum to more than -150 per arm, far above it), so one reduction counts both.
constexpr float kZeroPower = -16777216.0f;      // -2^24
constexpr float kZeroPowerBelow = -8388608.0f;  // -2^23

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
// arm and node and no underflow; a zero CDF adds kZeroPower); ratio ([blocks, S,
// kLanes]): sub-node mass / CDF. node_weight, powers and the lanes' products hold
// Padded(S) sub-nodes (whole blocks for ReduceRows; the padding's CDFs are 1).
struct Workspace {
  std::vector<float> edges, nodes, weights, softplus, node_weight, powers;
  std::vector<float> alpha, beta, mask, log_norm, upper, log_lower;
  std::vector<float> sub_mass, mantissa_lanes, power_lanes, ratio;
  std::vector<float> packed_conc, packed_out;  // Row's valid arms, packed ([2 A], [A])
  std::vector<int> packed_arm;                 // their places in the row ([A])
  std::unique_ptr<bool[]> packed_valid;        // all true ([A])
  void Resize(int arms, int grid_size) {
    const int subnodes = 3 * (grid_size - 1) + 1;
    const int arm_slots = Padded(arms);
    for (auto* v : {&nodes, &weights, &softplus}) v->assign(subnodes, 0.0f);
    for (auto* v : {&node_weight, &powers}) v->assign(Padded(subnodes), 0.0f);
    for (auto* v : {&alpha, &beta, &mask, &log_norm, &upper, &log_lower}) {
      v->assign(arm_slots, 0.0f);
    }
    sub_mass.assign(subnodes * kLanes, 0.0f);
    for (auto* v : {&mantissa_lanes, &power_lanes}) v->assign(Padded(subnodes) * kLanes, 0.0f);
    edges.assign(grid_size, 0.0f);
    ratio.assign(static_cast<size_t>(arm_slots) * subnodes, 0.0f);
    packed_conc.assign(2 * arms, 0.0f);
    packed_out.assign(arms, 0.0f);
    packed_arm.assign(arms, 0);
    packed_valid.reset(new bool[arms > 0 ? arms : 1]);
    for (int a = 0; a < arms; ++a) packed_valid[a] = true;
  }
};

// best_arm._fast_edges's snapped grid ends for one row, in grid steps: (t_low, t_high)
// / kGridStep, whole numbers, from the arms' alpha, beta and mask ([arm_slots], (1, 1)
// and mask 0 for invalid arms and the padding).
void GridSteps(const float* __restrict alpha, const float* __restrict beta,
               const float* __restrict mask, int arm_slots, float* step_low,
               float* step_high) {
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
  high = Max(high, kTail);
  low = Min(low, high - 1.0f);
  *step_low = std::floor(std::asinh(low / kInner) / kGridStep);
  *step_high = std::ceil(std::asinh(high / kInner) / kGridStep);
}

// The grid step of an edge placed on one (the inverse of RowEdges's sinh, rounded): a
// grid stored by the array program compares with GridSteps's without relying on the
// two implementations' sinh agreeing to the last bit.
inline float EdgeStep(float edge) {
  return std::nearbyint(std::asinh(edge / kInner) / kGridStep);
}

// best_arm._fast_edges for one row (arrays as GridSteps's).
void RowEdges(const float* __restrict alpha, const float* __restrict beta,
              const float* __restrict mask, int arm_slots, int grid_size, float* edges) {
  float step_low, step_high;
  GridSteps(alpha, beta, mask, arm_slots, &step_low, &step_high);
  const float t_low = step_low * kGridStep, t_high = step_high * kGridStep;
  const float step = 1.0f / static_cast<float>(grid_size - 1);
  for (int g = 0; g < grid_size; ++g) {
    const float fraction = g == grid_size - 1 ? 1.0f : static_cast<float>(g) * step;
    edges[g] = kInner * Sinh(t_low + (t_high - t_low) * fraction);
  }
}

// The sub-nodes of the grid `edges` [G] (best_arm._fast_terms's order: 3 Gauss nodes
// per cell, Gauss-point-major, then the upper tail at the last edge): their places
// nodes [S], quadrature weights weights [S] (0 for the tail) and log1p(e^-|z|)
// softplus [S].
inline void SubNodes(const float* edges, int grid_size, float* __restrict nodes,
                     float* __restrict weights, float* __restrict softplus) {
  const int cells = grid_size - 1;
  const int upper_node = 3 * cells;
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
  for (int s = 0; s <= upper_node; ++s) {
    // log1p(e^-|z|): log(1 + e) loses e's relative precision below ~1e-4, where the
    // series e - e^2 / 2 is exact to float32.
    const float e = Exp(-std::fabs(nodes[s]));
    softplus[s] = e < 1e-4f ? e - 0.5f * e * e : Log(1.0f + e);
  }
}

// best_arm._fast_core_array for one row: out[a] = unnormalized P(a is best), valid or
// not (Row packs the valid ones first).
void MaskedRow(const float* conc, const bool* __restrict valid, int arms, int grid_size,
               Workspace& w, float* __restrict out) {
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
  SubNodes(edges, grid_size, nodes, weights, softplus);
  for (int i = 0; i < Padded(subnodes) * kLanes; ++i) {
    mantissa_lanes[i] = 1.0f;
    power_lanes[i] = 0.0f;
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
        powers[l] += static_cast<float>(((bits >> 23) & 0xff) - 127) -
                     (subnormal ? 23.0f : 0.0f) + (zero ? kZeroPower : 0.0f);
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
  // prod_b F_b at every sub-node (16 mantissas < 2^16: no overflow), scaled by its
  // peak; then the mixture.
  float* __restrict powers = w.powers.data();
  for (int s = 0; s < subnodes; s += kLanes) {
    const LaneVector product =
        ReduceRows(mantissa_lanes + s * kLanes, [](LaneVector x, LaneVector y) { return x * y; });
    const LaneVector power =
        ReduceRows(power_lanes + s * kLanes, [](LaneVector x, LaneVector y) { return x + y; });
    std::memcpy(node_weight + s, &product, sizeof(product));
    std::memcpy(powers + s, &power, sizeof(power));
  }
  float peak = -INFINITY;
#pragma omp simd reduction(max : peak)
  for (int s = 0; s < subnodes; ++s) {
    const float total = Log(node_weight[s]) + 0.693147180559945309f * powers[s];
    node_weight[s] = powers[s] < kZeroPowerBelow ? -INFINITY : total;
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
  const float share_scale = Exp(lower_log_sum - peak) / Max(rate_sum, 1e-30f);
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

// best_arm._fast_core_array for one row: out[a] = unnormalized P(a is best), 0 for an
// invalid arm. An invalid arm contributes nothing to the row (F = 1, no mass, no tail
// rate, no say in the grid), so the valid arms are packed first and only their blocks
// of kLanes computed: a row with 17 of 25 arms legal takes two blocks, with 16 one.
void Row(const float* conc, const bool* __restrict valid, int arms, int grid_size,
         Workspace& w, float* __restrict out) {
  int count = 0;
  for (int a = 0; a < arms; ++a) {
    out[a] = 0.0f;
    if (!valid[a]) continue;
    w.packed_conc[2 * count] = conc[2 * a];
    w.packed_conc[2 * count + 1] = conc[2 * a + 1];
    w.packed_arm[count++] = a;
  }
  if (count == 0) return;
  MaskedRow(w.packed_conc.data(), w.packed_valid.get(), count, grid_size, w,
            w.packed_out.data());
  for (int i = 0; i < count; ++i) out[w.packed_arm[i]] = w.packed_out[i];
}

// The fast kernel as aggregates updated one arm at a time (best_arm.FastAggregates, K =
// 2), for the native root update (backup_cpu.cc). S = 3 (G - 1) + 1 sub-nodes, W = S + 1
// stored terms per arm.

// best_arm.fast_arm_terms for one arm (best_arm._fast_terms, step for step): its terms
// on a grid, given as SubNodes's nodes, weights and softplus [S], from its raw
// concentrations (c0, c1): table [W] (ratio_a(s), then rate_a) and logs [W] (log
// F_a(s), -inf where F_a = 0, then log lower_a); an invalid arm's are 0 (no mass, F = 1).
inline void ArmTerms(float c0, float c1, bool valid, const float* __restrict nodes,
                     const float* __restrict weights, const float* __restrict softplus,
                     int grid_size, float* __restrict table, float* __restrict logs) {
  const float alpha = valid ? Max(c0, kConcentrationFloor) : 1.0f;
  const float beta = valid ? Max(c1, kConcentrationFloor) : 1.0f;
  const float n = alpha + beta;
  const float log_norm = LogGamma(alpha) + LogGamma(beta) - LogGamma(n);
  const int cells = grid_size - 1;
  const int upper_node = 3 * cells;
  // Three passes, the first and last vectorized over the sub-nodes: the masses (in
  // table), the CDF at each sub-node's middle (in logs: a running sum), then the ratio
  // and log of each. best_arm._log_density at the sub-nodes.
  auto log_density = [&](int s) {
    const float z = nodes[s];
    return (z > 0.0f ? -beta * z : alpha * z) - n * softplus[s] - log_norm;
  };
  const float mass = valid ? 1.0f : 0.0f;  // a factor, not a branch: the loop vectorizes
#pragma omp simd
  for (int s = 0; s < upper_node; ++s) table[s] = Exp(log_density(s)) * weights[s] * mass;
  const float tail = Exp(log_density(upper_node)) / beta;
  const float upper = valid ? Min(tail, 1.0f) : 0.0f;
  float grid_mass = 0.0f;
  for (int c = 0; c < cells; ++c) {
    grid_mass += table[c] + table[cells + c] + table[2 * cells + c];
  }
  float lower = 1.0f - grid_mass - upper;
  lower = lower < 0.0f ? 0.0f : (lower > 1.0f ? 1.0f : lower);
  table[upper_node] = upper;
  float start = lower;
  for (int c = 0; c < cells; ++c) {
    const float first = table[c], second = table[cells + c], third = table[2 * cells + c];
    logs[c] = start + 0.5f * first;
    logs[cells + c] = start + first + 0.5f * second;
    logs[2 * cells + c] = start + first + second + 0.5f * third;
    start += first + second + third;
  }
  logs[upper_node] = 1.0f - 0.5f * upper;
#pragma omp simd
  for (int s = 0; s <= upper_node; ++s) {
    float middle = logs[s];
    middle = valid ? (middle < 0.0f ? 0.0f : (middle > 1.0f ? 1.0f : middle)) : 1.0f;
    const bool zero = middle <= 0.0f;
    table[s] = zero ? 0.0f : table[s] / (zero ? 1.0f : middle);
    logs[s] = zero ? -INFINITY : Log(zero ? 1.0f : middle);
  }
  table[upper_node + 1] = valid ? alpha : 0.0f;
  logs[upper_node + 1] = valid ? Log(lower > 1e-37f ? lower : 1e-37f) : 0.0f;
}

// One row's best_arm.FastAggregates (pointers into the [B, ...] arrays).
struct Aggregates {
  float* edges;        // [G]
  float* log_total;    // [S]
  float* zeros;        // [S]
  float* ratio_sum;    // [S]
  float* vector_sum;   // [S, 2]
  float* lower_log;    // []
  float* rate_sum;     // []
  float* rate_vector;  // [2]
};

// best_arm.update_fast_aggregates for one row: the arm's old terms (table, logs [W])
// and belief vector taken out, its new ones put in (vectors 0 for an invalid arm).
inline void UpdateAggregates(const Aggregates& g, int subnodes, const float* old_table,
                      const float* old_logs, const float* old_vector, const float* new_table,
                      const float* new_logs, const float* new_vector) {
  auto finite = [](float log) { return std::isinf(log) ? 0.0f : log; };
  auto zero = [](float log) { return std::isinf(log) ? 1.0f : 0.0f; };
  // Distinct arrays (restrict, so the loop vectorizes).
  float* __restrict log_total = g.log_total;
  float* __restrict zeros = g.zeros;
  float* __restrict ratio_sum = g.ratio_sum;
  float* __restrict vector_sum = g.vector_sum;
  const float* __restrict old_ratio = old_table;
  const float* __restrict old_log = old_logs;
  const float* __restrict new_ratio = new_table;
  const float* __restrict new_log = new_logs;
  const float old0 = old_vector[0], old1 = old_vector[1];
  const float new0 = new_vector[0], new1 = new_vector[1];
#pragma omp simd
  for (int s = 0; s < subnodes; ++s) {
    log_total[s] = log_total[s] - finite(old_log[s]) + finite(new_log[s]);
    zeros[s] = zeros[s] - zero(old_log[s]) + zero(new_log[s]);
    ratio_sum[s] = ratio_sum[s] - old_ratio[s] + new_ratio[s];
    vector_sum[2 * s] = vector_sum[2 * s] - old_ratio[s] * old0 + new_ratio[s] * new0;
    vector_sum[2 * s + 1] = vector_sum[2 * s + 1] - old_ratio[s] * old1 + new_ratio[s] * new1;
  }
  *g.lower_log = *g.lower_log - old_logs[subnodes] + new_logs[subnodes];
  *g.rate_sum = *g.rate_sum - old_table[subnodes] + new_table[subnodes];
  for (int k = 0; k < 2; ++k) {
    g.rate_vector[k] = g.rate_vector[k] - old_table[subnodes] * old_vector[k] +
                       new_table[subnodes] * new_vector[k];
  }
}

// best_arm.fast_selection (the stage weights, [S + 1]) and best_arm.fast_mixture (the
// P(best)-weighted average of the arms' beliefs, [2]) from one row's aggregates, through
// best_arm._node_weights. `node` [S]: scratch.
inline void SelectionAndMixture(const Aggregates& g, int subnodes, float* __restrict node,
                         float* __restrict weights, float* __restrict mixture) {
  float peak = *g.lower_log;
#pragma omp simd reduction(max : peak)
  for (int s = 0; s < subnodes; ++s) {
    node[s] = g.zeros[s] > 0.5f ? -INFINITY : g.log_total[s];
    peak = peak > node[s] ? peak : node[s];
  }
  if (!std::isfinite(peak)) peak = 0.0f;
  for (int s = 0; s < subnodes; ++s) node[s] = Exp(node[s] - peak);
  const float lower = Exp(*g.lower_log - peak);
  float numerator0 = 0.0f, numerator1 = 0.0f, denominator = 0.0f;
  for (int s = 0; s < subnodes; ++s) {
    weights[s] = node[s] * Max(g.ratio_sum[s], 0.0f);
    numerator0 += node[s] * g.vector_sum[2 * s];
    numerator1 += node[s] * g.vector_sum[2 * s + 1];
    denominator += node[s] * g.ratio_sum[s];
  }
  weights[subnodes] = lower;
  const float share = lower / Max(*g.rate_sum, 1e-30f);
  numerator0 += share * g.rate_vector[0];
  numerator1 += share * g.rate_vector[1];
  denominator += lower;
  mixture[0] = denominator > 0.0f ? numerator0 / denominator : 0.0f;
  mixture[1] = denominator > 0.0f ? numerator1 / denominator : 0.0f;
}

// best_arm.fast_aggregates for one row: the grid (best_arm._fast_edges), every arm's
// terms on it (best_arm.fast_arm_terms, ArmTerms's numbers, computed as MaskedRow
// computes its row: arms in blocks of kLanes, one per vector lane) and their sums,
// from the arms' raw concentrations conc [A, 2] and valid [A]. Writes the aggregates
// g (edges included) and table, logs [A, W], W = 3 (G - 1) + 2.
inline void AggregatesRow(const float* conc, const bool* valid, int arms, int grid_size,
                          Workspace& w, const Aggregates& g, float* __restrict table,
                          float* __restrict logs) {
  const int cells = grid_size - 1;
  const int upper_node = 3 * cells;
  const int subnodes = upper_node + 1;
  const int stages = subnodes + 1;
  const int arm_slots = Padded(arms);
  float* __restrict alpha = w.alpha.data();
  float* __restrict beta = w.beta.data();
  float* __restrict mask = w.mask.data();
  float* __restrict nodes = w.nodes.data();
  float* __restrict weights = w.weights.data();
  float* __restrict softplus = w.softplus.data();
  float* __restrict sub_mass = w.sub_mass.data();
  for (int a = 0; a < arm_slots; ++a) {
    const bool in_row = a < arms && valid[a];
    alpha[a] = in_row ? Max(conc[2 * a], kConcentrationFloor) : 1.0f;
    beta[a] = in_row ? Max(conc[2 * a + 1], kConcentrationFloor) : 1.0f;
    mask[a] = in_row ? 1.0f : 0.0f;
  }
  RowEdges(alpha, beta, mask, arm_slots, grid_size, g.edges);
  SubNodes(g.edges, grid_size, nodes, weights, softplus);
  for (int s = 0; s < subnodes; ++s) {
    g.log_total[s] = g.zeros[s] = g.ratio_sum[s] = 0.0f;
    g.vector_sum[2 * s] = g.vector_sum[2 * s + 1] = 0.0f;
  }
  *g.lower_log = *g.rate_sum = 0.0f;
  g.rate_vector[0] = g.rate_vector[1] = 0.0f;
  for (int block = 0; block < arm_slots; block += kLanes) {
    const float* __restrict a_ = alpha + block;
    const float* __restrict b_ = beta + block;
    const float* __restrict m_ = mask + block;
    float n[kLanes], norm[kLanes], vector0[kLanes], vector1[kLanes], grid_mass[kLanes];
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) {
      n[l] = a_[l] + b_[l];
      norm[l] = LogGamma(a_[l]) + LogGamma(b_[l]) - LogGamma(n[l]);
      grid_mass[l] = 0.0f;
    }
    for (int l = 0; l < kLanes; ++l) {  // the belief vectors the mixture sums
      const int a = block + l;
      vector0[l] = m_[l] > 0.0f ? conc[2 * a] : 0.0f;
      vector1[l] = m_[l] > 0.0f ? conc[2 * a + 1] : 0.0f;
    }
    for (int c = 0; c < cells; ++c) {
      float cell[kLanes] = {};
      for (int t = 0; t < 3; ++t) {
        const int s = t * cells + c;
        const float z = nodes[s], sp = softplus[s], weight = weights[s];
        float* __restrict mass = sub_mass + s * kLanes;
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) {
          const float linear = z > 0.0f ? -b_[l] * z : a_[l] * z;
          const float m = Exp(linear - n[l] * sp - norm[l]) * weight;
          mass[l] = m_[l] > 0.0f ? m : 0.0f;
          cell[l] += mass[l];
        }
      }
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) grid_mass[l] += cell[l];
    }
    float upper[kLanes], lower[kLanes], start[kLanes];
    const float top = nodes[upper_node], top_softplus = softplus[upper_node];
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) {
      const float linear = top > 0.0f ? -b_[l] * top : a_[l] * top;
      const float tail = Exp(linear - n[l] * top_softplus - norm[l]) / b_[l];
      upper[l] = m_[l] > 0.0f ? (tail < 1.0f ? tail : 1.0f) : 0.0f;
      float below = 1.0f - grid_mass[l] - upper[l];
      lower[l] = below < 0.0f ? 0.0f : (below > 1.0f ? 1.0f : below);
      start[l] = lower[l];
    }
    // One sub-node's terms from the CDF at its middle, written and summed.
    auto store = [&](int s, const float* __restrict mass, const float* __restrict middle) {
      float ratio[kLanes], log_cdf[kLanes], zero[kLanes];
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) {
        float m = m_[l] > 0.0f ? (middle[l] < 0.0f ? 0.0f : (middle[l] > 1.0f ? 1.0f : middle[l]))
                               : 1.0f;
        const bool is_zero = m <= 0.0f;
        ratio[l] = is_zero ? 0.0f : mass[l] / (is_zero ? 1.0f : m);
        log_cdf[l] = Log(is_zero ? 1.0f : m);
        zero[l] = is_zero ? 1.0f : 0.0f;
      }
      float log_sum = 0.0f, zeros = 0.0f, ratio_sum = 0.0f, sum0 = 0.0f, sum1 = 0.0f;
#pragma omp simd reduction(+ : log_sum, zeros, ratio_sum, sum0, sum1)
      for (int l = 0; l < kLanes; ++l) {
        log_sum += log_cdf[l];
        zeros += zero[l];
        ratio_sum += ratio[l];
        sum0 += ratio[l] * vector0[l];
        sum1 += ratio[l] * vector1[l];
      }
      g.log_total[s] += log_sum;
      g.zeros[s] += zeros;
      g.ratio_sum[s] += ratio_sum;
      g.vector_sum[2 * s] += sum0;
      g.vector_sum[2 * s + 1] += sum1;
      for (int l = 0; l < kLanes && block + l < arms; ++l) {
        const int64_t at = static_cast<int64_t>(block + l) * stages + s;
        table[at] = ratio[l];
        logs[at] = zero[l] > 0.0f ? -INFINITY : log_cdf[l];
      }
    };
    for (int c = 0; c < cells; ++c) {
      const float* __restrict first = sub_mass + c * kLanes;
      const float* __restrict second = sub_mass + (cells + c) * kLanes;
      const float* __restrict third = sub_mass + (2 * cells + c) * kLanes;
      float middle[3][kLanes];
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) {
        middle[0][l] = start[l] + 0.5f * first[l];
        middle[1][l] = start[l] + first[l] + 0.5f * second[l];
        middle[2][l] = start[l] + first[l] + second[l] + 0.5f * third[l];
        start[l] += first[l] + second[l] + third[l];
      }
      store(c, first, middle[0]);
      store(cells + c, second, middle[1]);
      store(2 * cells + c, third, middle[2]);
    }
    float tail_middle[kLanes];
    for (int l = 0; l < kLanes; ++l) tail_middle[l] = 1.0f - 0.5f * upper[l];
    store(upper_node, upper, tail_middle);
    for (int l = 0; l < kLanes && block + l < arms; ++l) {
      const float rate = m_[l] > 0.0f ? a_[l] : 0.0f;
      const float lower_log = m_[l] > 0.0f ? Log(lower[l] > 1e-37f ? lower[l] : 1e-37f) : 0.0f;
      const int64_t at = static_cast<int64_t>(block + l) * stages + subnodes;
      table[at] = rate;
      logs[at] = lower_log;
      *g.lower_log += lower_log;
      *g.rate_sum += rate;
      g.rate_vector[0] += rate * vector0[l];
      g.rate_vector[1] += rate * vector1[l];
    }
  }
}

}  // namespace

#endif  // CURIOSITY_SEARCH_FAST_PBEST_CPU_H_
