// K = 3's score distribution as native passes for XLA:CPU: each arm's score CDF and
// density on the score axis at a row's edges (score_cdf.score_cdf_and_density_dirichlet)
// and its grid candidates (score_cdf.score_sample). Step for step: read those functions
// and their helpers first, this file is their transcription.
//
// The accurate P(best) at K = 3 (tic-tac-toe's Dirichlet beliefs) evaluates each arm's
// score CDF at ~46 edges per row, each an 8-node Gauss-Legendre sum of Hermite lookups
// in two per-arm tables. XLA:CPU runs that array program as gathers and fusions that
// move [rows, arms, edges, 8] arrays through memory: ~290 us a row of 9 arms at 25
// edges, most of a tic-tac-toe iteration (results/bench/README.md, "K = 3's score
// distribution as native passes"). Here each arm's tables are built once into a buffer
// that stays in cache, and the (edge, Gauss node) pairs run in vector lanes.
//
// The numbers are the array programs' to float32 rounding: the same tables, nodes,
// branches and clamps; the derivative that jax.jvp takes of the conditional CDF's
// argument is written out. exp and log are fast_pbest_cpu.h's polynomials with IEEE
// ends (0, inf) restored; log1p and expm1 are built on them by the usual correction
// terms (Goldberg's and Kahan's), as accurate as the array program's near 0.
//
// Shapes: CDF pass: concentrations [R, A, 3] f32 (win, draw, loss), edges [R, E] f32
// (score axis) -> cdf [R, A, E], density [R, A, E] f32. Sample pass: concentrations
// [..., 3] -> sample [..., 100] f32.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "custom_call_cpu.h"
#include "fast_pbest_cpu.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Every helper is inlined into the loops that call it, and each function that holds
// such loops is flattened (fast_pbest_cpu.h's Exp and Log included): GCC's inlining
// budget runs out otherwise, and a call keeps a loop scalar.
#define SCORE_CDF_INLINE inline __attribute__((always_inline))
#define SCORE_CDF_LOOPS __attribute__((flatten))

constexpr int kNodes = 65;               // score_cdf._TABLE_NODES
constexpr float kHalfWidth = 10.0f;      // score_cdf._TABLE_HALF_WIDTH
constexpr int kLevels = 33;              // len(score_cdf._QUANTILE_LOGITS): -16..16
constexpr float kLowestLogit = -16.0f;
constexpr int kNewtonSteps = 3;          // score_cdf._QUANTILE_NEWTON_STEPS
constexpr float kTiny = 1e-30f;          // score_cdf._TINY
constexpr float kAxisPower = 128.0f;     // score_cdf.SCORE_AXIS_POWER
constexpr float kLog2 = 0.693147180559945309f;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kMinRowsPerChunk = 4;
// score_cdf._GAUSS_LEGENDRE: 8-point Gauss-Legendre on [0, 1] (numpy's leggauss,
// mapped, in float32).
constexpr int kGauss = 8;
constexpr float kGaussNode[kGauss] = {
    0.019855070859193802f, 0.10166676342487335f, 0.23723378777503967f, 0.40828266739845276f,
    0.5917173027992249f,   0.7627661824226379f,  0.8983332514762878f,  0.9801449179649353f};
constexpr float kGaussWeight[kGauss] = {
    0.05061426758766174f, 0.11119052022695541f, 0.1568533182144165f, 0.18134188652038574f,
    0.18134188652038574f, 0.1568533182144165f,  0.11119052022695541f, 0.05061426758766174f};

// exp, log, log1p, expm1 and the helpers score_cdf.py builds from them, with jnp's
// values at 0 and +-inf. All branch-free: one select after another (GCC vectorizes
// those; nested selects on different conditions, or && and || between comparisons,
// often keep its loops scalar), so the loops over table nodes, levels and Gauss nodes
// below vectorize.
SCORE_CDF_INLINE float ExpF(float x) { return x > 88.7f ? kInf : Exp(x); }
SCORE_CDF_INLINE float LogF(float x) {
  float result = Log(x);
  result = x == kInf ? kInf : result;
  result = x == 0.0f ? -kInf : result;
  return x < 0.0f ? std::numeric_limits<float>::quiet_NaN() : result;
}
SCORE_CDF_INLINE float Log1pF(float x) {  // Goldberg: log(u) * x / (u - 1), u = fl(1 + x)
  const float u = 1.0f + x;
  const float d = u - 1.0f;
  float result = LogF(u) * (x / (d == 0.0f ? 1.0f : d));
  result = u == kInf ? kInf : result;
  return d == 0.0f ? x : result;
}
SCORE_CDF_INLINE float Expm1F(float x) {  // Kahan: (u - 1) * x / log(u), u = fl(e^x)
  const float u = ExpF(x);
  float denominator = LogF(u);
  denominator = u == 1.0f ? 1.0f : denominator;
  denominator = u == 0.0f ? 1.0f : denominator;
  float result = (u - 1.0f) * x / denominator;
  result = u == kInf ? kInf : result;
  result = u == 0.0f ? -1.0f : result;
  return u == 1.0f ? x : result;
}
SCORE_CDF_INLINE float Clip(float x, float low, float high) { return Min(Max(x, low), high); }
SCORE_CDF_INLINE float Sign(float x) {
  const float positive = x > 0.0f ? 1.0f : 0.0f;
  return x < 0.0f ? -1.0f : positive;
}
SCORE_CDF_INLINE float Softplus(float x) { return Max(x, 0.0f) + Log1pF(ExpF(-std::fabs(x))); }
SCORE_CDF_INLINE float Sigmoid(float x) {  // from e^-|x|: no overflow
  const float e = ExpF(-std::fabs(x));
  return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}
SCORE_CDF_INLINE float LogAddExp(float a, float b) {
  const float high = Max(a, b);
  const float sum = high + Log1pF(ExpF(-std::fabs(a - b)));
  return high == -kInf ? -kInf : sum;
}
SCORE_CDF_INLINE float Asinh(float x) {
  const float a = std::fabs(x);
  const float bounded = Min(a, 1e18f);
  const float square = bounded * bounded;
  float magnitude = Log1pF(bounded + square / (1.0f + std::sqrt(1.0f + square)));
  magnitude = a > 1e18f ? LogF(a) + kLog2 : magnitude;
  return x < 0.0f ? -magnitude : magnitude;
}
SCORE_CDF_INLINE float SinhF(float x) {  // fast_pbest_cpu.h's Sinh saturates at e^88
  const float e = Expm1F(std::fabs(x));
  float magnitude = 0.5f * (e + e / (e + 1.0f));
  magnitude = e == kInf ? kInf : magnitude;
  return x < 0.0f ? -magnitude : magnitude;
}
// score_cdf._log_two_cosh: log(2 cosh(a)).
SCORE_CDF_INLINE float LogTwoCosh(float a) {
  const float m = std::fabs(a);
  return m + Log1pF(ExpF(-2.0f * m));
}
// polygamma(1, x) for x > 0: the recurrence up to x >= 6, then the asymptotic series.
SCORE_CDF_INLINE float Trigamma(float x) {
  double value = 0.0, y = x;
  while (y < 6.0) {
    value += 1.0 / (y * y);
    y += 1.0;
  }
  const double inv = 1.0 / y, inv2 = inv * inv;
  value += inv + 0.5 * inv2 +
           inv * inv2 * (1.0 / 6.0 - inv2 * (1.0 / 30.0 - inv2 * (1.0 / 42.0 - inv2 / 30.0)));
  return static_cast<float>(value);
}

// score_cdf._log_tanh_half and its derivative in log |z| (d/dL log tanh(e^L / 2) =
// a / sinh(a), a = e^L; the series' own derivative below L = -6).
SCORE_CDF_INLINE float LogTanhHalf(float log_abs_z) {
  const float a = ExpF(Min(log_abs_z, 80.0f));
  const float direct = LogF(-Expm1F(-Max(a, 1e-3f))) - Log1pF(ExpF(-a));
  const float series = log_abs_z - kLog2 - ExpF(2.0f * Min(log_abs_z, 0.0f)) / 12.0f;
  return log_abs_z < -6.0f ? series : direct;
}
SCORE_CDF_INLINE float LogTanhHalfSlope(float log_abs_z) {
  const float series = 1.0f - ExpF(2.0f * Min(log_abs_z, 0.0f)) / 6.0f;
  const float a = ExpF(Min(log_abs_z, 80.0f));
  float direct = a / SinhF(a);
  direct = log_abs_z >= 80.0f ? 0.0f : direct;
  return log_abs_z < -6.0f ? series : direct;
}

SCORE_CDF_INLINE float Hermite(float tau, float c0, float d0, float c1, float d1) {
  const float tau2 = tau * tau, tau3 = tau2 * tau;
  return (2 * tau3 - 3 * tau2 + 1) * c0 + (tau3 - 2 * tau2 + tau) * d0 +
         (-2 * tau3 + 3 * tau2) * c1 + (tau3 - tau2) * d1;
}
SCORE_CDF_INLINE float HermiteSlope(float tau, float c0, float d0, float c1, float d1) {
  const float tau2 = tau * tau;
  return (6 * tau2 - 6 * tau) * c0 + (3 * tau2 - 4 * tau + 1) * d0 +
         (-6 * tau2 + 6 * tau) * c1 + (3 * tau2 - 2 * tau) * d1;
}
// The cell [floor(x), floor(x) + 1) of a table with `cells` cells that holds x,
// clamped to the table (NaN: the first); floor and clamp in float (GCC vectorizes the
// loops around it only so).
SCORE_CDF_INLINE float Cell(float x, int cells) {
  return Clip(std::floor(x), 0.0f, static_cast<float>(cells - 1));
}

// score_cdf._LogitBetaTable, with the node offsets z_k - mode stored.
struct Table {
  float mode, inner[2], stretch[2];
  float offset[kNodes], cdf[kNodes], density[kNodes];
};

// score_cdf._logit_beta_log_density: (log f(z) - log f(mode), d log f / dz) at
// delta = z - mode, evaluated on the side where the smaller parameter `a` leads (`flip`
// = -1 where alpha > beta: mirrored). LogitBetaTerms holds the terms that do not depend
// on delta, computed once outside the loop over the nodes (GCC keeps a loop scalar
// that selects on a loop-invariant comparison).
struct LogitBetaTerms {
  float a, flip, total, r, log_r, log1p_minus_r, rate;
  LogitBetaTerms(float alpha, float beta)
      : a(Min(alpha, beta)), flip(alpha > beta ? -1.0f : 1.0f), total(alpha + beta) {
    const float b = Max(alpha, beta);
    r = a / total;
    log_r = LogF(a) - LogF(total);
    log1p_minus_r = Log1pF(-r);
    rate = a * b / total;
  }
};

SCORE_CDF_INLINE void LogitBetaLogDensity(float a, float flip, float total, float r,
                                          float log_r, float log1p_minus_r, float rate,
                                          float delta, float* log_density, float* slope) {
  const float d = flip * delta;
  const float expm1 = Expm1F(Min(d, 80.0f));
  const float log_mix = d < 80.0f ? Log1pF(r * expm1) : LogAddExp(log1p_minus_r, log_r + d);
  *log_density = a * d - total * log_mix;
  *slope = flip * (-rate * expm1 / (1.0f + r * expm1));
}

// LogitBetaLogDensity at the table's nodes, [kNodes] each. Its own function: inside
// BuildTable, GCC keeps this loop scalar.
__attribute__((noinline, flatten)) void LogDensities(const LogitBetaTerms& terms,
                                                     const float* offset,
                                                     float* __restrict log_density,
                                                     float* __restrict slope) {
  const float a = terms.a, flip = terms.flip, total = terms.total, r = terms.r;
  const float log_r = terms.log_r, log1p_minus_r = terms.log1p_minus_r, rate = terms.rate;
#pragma omp simd
  for (int k = 0; k < kNodes; ++k) {
    float log_density_k, slope_k;
    LogitBetaLogDensity(a, flip, total, r, log_r, log1p_minus_r, rate, offset[k],
                        &log_density_k, &slope_k);
    log_density[k] = log_density_k;
    slope[k] = slope_k;
  }
}

// score_cdf._logit_beta_table.
SCORE_CDF_LOOPS void BuildTable(float alpha, float beta, Table* table) {
  alpha = Max(alpha, 1e-6f);
  beta = Max(beta, 1e-6f);
  table->mode = LogF(alpha) - LogF(beta);
  const float spread_alpha = Trigamma(alpha), spread_beta = Trigamma(beta);
  const float scale[2] = {std::sqrt(spread_alpha + Min(spread_beta, 1.0f)),
                          std::sqrt(Min(spread_alpha, 1.0f) + spread_beta)};
  for (int side = 0; side < 2; ++side) {
    table->inner[side] = Min(scale[side], 1.0f);
    table->stretch[side] = Asinh(kHalfWidth * scale[side] / table->inner[side]) / kHalfWidth;
  }
  const float inner0 = table->inner[0], inner1 = table->inner[1];
  const float stretch0 = table->stretch[0], stretch1 = table->stretch[1];
  float log_density[kNodes], slope[kNodes], offset[kNodes];
#pragma omp simd
  for (int k = 0; k < kNodes; ++k) {  // u_k = jnp.linspace(-10, 10, 65)[k]
    const float u = -kHalfWidth + static_cast<float>(k) * (2.0f * kHalfWidth / (kNodes - 1));
    const bool below = u < 0.0f;
    offset[k] = (below ? inner0 : inner1) * SinhF((below ? stretch0 : stretch1) * u);
  }
  LogDensities(LogitBetaTerms(alpha, beta), offset, log_density, slope);
  std::memcpy(table->offset, offset, sizeof(offset));
  float peak = -kInf;
  for (int k = 0; k < kNodes; ++k) peak = Max(peak, log_density[k]);
  float density_slope[kNodes];
  float* density = table->density;
#pragma omp simd
  for (int k = 0; k < kNodes; ++k) {
    density[k] = ExpF(log_density[k] - peak);
    density_slope[k] = density[k] * slope[k];
  }
  float* cdf = table->cdf;
  cdf[0] = 0.0f;
  float cumulative = 0.0f;
  for (int k = 0; k + 1 < kNodes; ++k) {
    const float width = offset[k + 1] - offset[k];
    const float segment = 0.5f * width * (density[k] + density[k + 1]) +
                          (width * width / 12.0f) * (density_slope[k] - density_slope[k + 1]);
    cumulative += Max(segment, 0.0f);
    cdf[k + 1] = cumulative;
  }
  const float scale_back = 1.0f / Max(cumulative, kTiny);
  for (int k = 0; k < kNodes; ++k) {
    cdf[k] = cdf[k] * scale_back;
    density[k] = density[k] * scale_back;
  }
}

// score_cdf._table_cdf_and_density's first half: the standardized position u of
// delta = z - mode on a table's sinh-stretched axis (whose cell holds z; +-inf beyond
// the ends), from the table's inner[2] and stretch[2]. Loops pass copies of them in
// locals: GCC keeps a loop scalar that reads them from memory.
SCORE_CDF_INLINE float TablePosition(const float* inner, const float* stretch, float delta) {
  const bool below = delta < 0.0f;
  return Asinh(delta / (below ? inner[0] : inner[1])) / (below ? stretch[0] : stretch[1]);
}

// Its second half: the CDF and its density in z at delta = z - mode, at position u.
SCORE_CDF_INLINE void TableInterpolate(const Table& table, float delta, float u, float* cdf,
                                       float* density) {
  constexpr float du = 2.0f * kHalfWidth / (kNodes - 1);
  const float u_clipped = Clip(u, -kHalfWidth, kHalfWidth);
  const int index = static_cast<int>(Cell((u_clipped + kHalfWidth) / du, kNodes - 1));
  const float left = table.offset[index], right = table.offset[index + 1];
  const float width = right - left;
  const float delta_clipped = Clip(delta, left, right);
  const float tau = Clip((delta_clipped - left) / Max(width, kTiny), 0.0f, 1.0f);
  const float c0 = table.cdf[index], c1 = table.cdf[index + 1];
  const float d0 = table.density[index] * width, d1 = table.density[index + 1] * width;
  float value = Hermite(tau, c0, d0, c1, d1);
  float value_density = HermiteSlope(tau, c0, d0, c1, d1) / Max(width, kTiny);
  // 0 in an empty cell, outside the table and where the CDF is clipped (the array
  // program's masks; a delta a rounding error outside its cell keeps the cell end's).
  value_density = width > kTiny ? value_density : 0.0f;
  value = u > kHalfWidth ? 1.0f : value;
  value = u < -kHalfWidth ? 0.0f : value;
  value_density = value < 0.0f ? 0.0f : value_density;
  value_density = value > 1.0f ? 0.0f : value_density;
  value_density = u > kHalfWidth ? 0.0f : value_density;
  value_density = u < -kHalfWidth ? 0.0f : value_density;
  *cdf = Clip(value, 0.0f, 1.0f);
  *density = value_density;
}

// score_cdf._table_cdf_and_density at z (may be +-inf): the CDF and its density in z.
SCORE_CDF_INLINE void TableCdfAndDensity(const Table& table, float z, float* cdf, float* density) {
  const float delta = z - table.mode;
  TableInterpolate(table, delta, TablePosition(table.inner, table.stretch, delta), cdf,
                   density);
}

// score_cdf._QuantileTable / _quantile_table: a table's quantile function at the
// uniform level logits -16, ..., 16 and its slopes in the level's logit.
struct QuantileTable {
  float value[kLevels], slope[kLevels];
};

// The levels sigmoid(-16), ..., sigmoid(16) of the quantile tables.
struct QuantileLevels {
  float level[kLevels];
  QuantileLevels() {
    for (int m = 0; m < kLevels; ++m) {
      level[m] = 1.0f / (1.0f + ExpF(-(kLowestLogit + static_cast<float>(m))));
    }
  }
};
const QuantileLevels kQuantileLevels;

SCORE_CDF_LOOPS void BuildQuantileTable(const Table& table, QuantileTable* quantiles) {
  // score_cdf._table_quantiles, one level per lane: each level's cell by counting the
  // nodes at or below it, then Newton steps on the cell's cubic. (Loops over the levels
  // only, the table's scalars in locals: GCC vectorizes them so.)
  const float* level = kQuantileLevels.level;
  float count[kLevels] = {};
  for (int k = 0; k < kNodes; ++k) {
    const float at = table.cdf[k];
#pragma omp simd
    for (int m = 0; m < kLevels; ++m) count[m] += at <= level[m] ? 1.0f : 0.0f;
  }
  const float mode = table.mode;
  const float scale[2] = {table.inner[0], table.inner[1]};
  const float stretch[2] = {table.stretch[0], table.stretch[1]};
  float* value = quantiles->value;
  float delta[kLevels], position[kLevels], density[kLevels];
#pragma omp simd
  for (int m = 0; m < kLevels; ++m) {
    const float quantile = level[m];
    const int index = static_cast<int>(Cell(count[m] - 1.0f, kNodes - 1));
    const float left = table.offset[index], width = table.offset[index + 1] - left;
    const float c0 = table.cdf[index], c1 = table.cdf[index + 1];
    const float d0 = table.density[index] * width, d1 = table.density[index + 1] * width;
    float tau = Clip((quantile - c0) / Max(c1 - c0, kTiny), 0.0f, 1.0f);
    for (int step = 0; step < kNewtonSteps; ++step) {
      const float tau2 = tau * tau;
      const float at = Hermite(tau, c0, d0, c1, d1);
      const float slope = (6 * tau2 - 6 * tau) * (c0 - c1) + (3 * tau2 - 4 * tau + 1) * d0 +
                          (3 * tau2 - 2 * tau) * d1;
      const float change = slope > kTiny ? (at - quantile) / Max(slope, kTiny) : 0.0f;
      tau = Clip(tau - change, 0.0f, 1.0f);
    }
    value[m] = mode + left + tau * width;
    // The table's density there (TableCdfAndDensity, in the two loops below).
    delta[m] = value[m] - mode;
    position[m] = TablePosition(scale, stretch, delta[m]);
  }
#pragma omp simd
  for (int m = 0; m < kLevels; ++m) {
    float unused;
    TableInterpolate(table, delta[m], position[m], &unused, &density[m]);
  }
  float peak = 0.0f;
  for (int m = 0; m < kLevels; ++m) peak = Max(peak, density[m]);
  for (int m = 0; m < kLevels; ++m) {
    const float below = m > 0 ? value[m - 1] : 2 * value[0] - value[1];
    const float above =
        m + 1 < kLevels ? value[m + 1] : 2 * value[kLevels - 1] - value[kLevels - 2];
    const float difference = (above - below) / 2.0f;  // spacing 1 in the level's logit
    const float exact = level[m] * (1.0f - level[m]) / Max(density[m], kTiny);
    const float slope = density[m] > 1e-6f * peak
                            ? Min(exact, 10.0f * std::fabs(difference) + 1e-3f)
                            : difference;
    quantiles->slope[m] = Max(slope, 0.0f);
  }
}

// score_cdf._quantile_table_lookup at one level's logit: Hermite inside, linear beyond.
SCORE_CDF_INLINE float QuantileLookup(const QuantileTable& table, float logit_u) {
  const float high = kLowestLogit + (kLevels - 1);
  const float position = Clip(logit_u, kLowestLogit, high) - kLowestLogit;
  const float cell = Cell(position, kLevels - 1);
  const int index = static_cast<int>(cell);
  const float tau = position - cell;
  const float inside = Hermite(tau, table.value[index], table.slope[index],
                               table.value[index + 1], table.slope[index + 1]);
  const float below = table.value[0] + table.slope[0] * (logit_u - kLowestLogit);
  const float above =
      table.value[kLevels - 1] + table.slope[kLevels - 1] * (logit_u - high);
  const float result = logit_u > high ? above : inside;
  return logit_u < kLowestLogit ? below : result;
}

// One arm's two tables and its integration variable (score_cdf_and_density_dirichlet's
// opening lines): t = p_d where use_t, else B = p_w / (p_w + p_l).
struct Arm {
  bool use_t;
  Table outer, inner;
  QuantileTable outer_quantiles;
};

void PrepareArm(const float* concentration, Arm* arm) {
  const float win = concentration[0], draw = concentration[1], loss = concentration[2];
  const float total = win + draw + loss;
  const float mean_t = draw / total;
  const float sd_t = std::sqrt(mean_t * (1.0f - mean_t) / (total + 1.0f));
  const float mean_b = win / (win + loss);
  const float sd_b = std::sqrt(mean_b * (1.0f - mean_b) / (win + loss + 1.0f));
  arm->use_t = std::fabs(0.5f - mean_b) * sd_t <= (1.0f - mean_t) * sd_b;
  BuildTable(draw, win + loss, arm->use_t ? &arm->outer : &arm->inner);  // t
  BuildTable(win, loss, arm->use_t ? &arm->inner : &arm->outer);         // B
  BuildQuantileTable(arm->outer, &arm->outer_quantiles);
}

// The edges' terms that no arm changes, [E] each: the edge's sign and L = log |logit|,
// and the parts of `argument` (and its derivative in L) that depend on L alone.
struct EdgeTerms {
  std::vector<float> sign, log_abs_z, z, log_gap, log_gap_slope, cusp_t, log_jacobian;
  std::vector<float> log_two_tail, log_two_tail_slope;  // over t
  std::vector<float> z_slope, log_two_cosh_half_z, tanh_half_z;  // over B
  SCORE_CDF_LOOPS void Compute(const float* y, int num_edges) {
    for (auto* v : {&sign, &log_abs_z, &z, &log_gap, &log_gap_slope, &cusp_t, &log_jacobian,
                    &log_two_tail, &log_two_tail_slope, &z_slope, &log_two_cosh_half_z,
                    &tanh_half_z}) {
      v->resize(num_edges);
    }
    for (int e = 0; e < num_edges; ++e) {
      const float edge = y[e];
      const float l = kAxisPower * LogF(std::fabs(edge));
      const float magnitude = ExpF(Min(l, 80.0f));
      sign[e] = Sign(edge);
      log_abs_z[e] = l;
      z[e] = sign[e] * magnitude;
      log_gap[e] = LogTanhHalf(l);
      log_gap_slope[e] = LogTanhHalfSlope(l);
      cusp_t[e] = kLog2 - Softplus(std::fabs(z[e])) - log_gap[e];
      log_jacobian[e] = LogF(kAxisPower) - LogF(std::fabs(edge));
      log_two_tail[e] = kLog2 - Softplus(magnitude);
      log_two_tail_slope[e] = l < 80.0f ? -Sigmoid(magnitude) * magnitude : 0.0f;
      z_slope[e] = l < 80.0f ? z[e] : 0.0f;
      const float half = 0.5f * z[e], e2 = ExpF(-2.0f * std::fabs(half));
      log_two_cosh_half_z[e] = LogTwoCosh(half);
      tanh_half_z[e] = Sign(half) * (1.0f - e2) / (1.0f + e2);
    }
  }
};

// One arm's per-edge and per-(edge, Gauss node) scratch, [E] and [E * kGauss].
struct ArmScratch {
  std::vector<float> start, length, log_length, upper;  // [E]
  std::vector<float> node, shared, arg, arg_slope, position, conditional, slope;  // [E * kGauss]
  // Each pair's Gauss node xi, log(xi) and log1p(-xi) (read contiguously: GCC keeps a
  // loop that indexes kGaussNode by j % kGauss scalar).
  std::vector<float> xi, log_xi, log1p_minus_xi;
  void Resize(int num_edges) {
    for (auto* v : {&start, &length, &log_length, &upper}) v->resize(num_edges);
    for (auto* v : {&node, &shared, &arg, &arg_slope, &position, &conditional, &slope, &xi, &log_xi,
                    &log1p_minus_xi}) {
      v->resize(num_edges * kGauss);
    }
    for (int j = 0; j < num_edges * kGauss; ++j) {
      xi[j] = kGaussNode[j % kGauss];
      log_xi[j] = LogF(xi[j]);
      log1p_minus_xi[j] = Log1pF(-xi[j]);
    }
  }
};

// One arm's CDF and density at every edge of its row: for each edge, the Gauss nodes
// of the integration variable over its integrated side, the conditional CDF's argument
// and its derivative there (`argument` and its jax.jvp), read through the other
// variable's table. The (edge, node) pairs run as three loops (the nodes, the argument,
// the lookup: GCC if-converts and vectorizes each, not their union), a pair per lane.
template <bool kUseT>
SCORE_CDF_LOOPS void ArmRow(const Arm& arm, const EdgeTerms& g, int num_edges, ArmScratch& w,
            float* cdf_out, float* density_out) {
  for (int e = 0; e < num_edges; ++e) {  // the integrated side [start, start + length]
    float cusp, unused;
    TableCdfAndDensity(arm.outer, kUseT ? g.cusp_t[e] : g.z[e], &cusp, &unused);
    const bool upper_side = !kUseT && g.sign[e] > 0.0f;
    w.upper[e] = upper_side ? 1.0f : 0.0f;
    w.start[e] = upper_side ? cusp : 0.0f;
    w.length[e] = upper_side ? 1.0f - cusp : cusp;
    w.log_length[e] = LogF(Max(w.length[e], kTiny));
  }
  const float* __restrict upper = w.upper.data();
  const float* __restrict start = w.start.data();
  const float* __restrict length = w.length.data();
  const float* __restrict log_length = w.log_length.data();
  const float* __restrict sign = g.sign.data();
  const float* __restrict log_abs_z = g.log_abs_z.data();
  const float* __restrict log_gap = g.log_gap.data();
  const float* __restrict log_gap_slope = g.log_gap_slope.data();
  const float* __restrict log_two_tail = g.log_two_tail.data();
  const float* __restrict log_two_tail_slope = g.log_two_tail_slope.data();
  const float* __restrict z = g.z.data();
  const float* __restrict z_slope = g.z_slope.data();
  const float* __restrict log_two_cosh_half_z = g.log_two_cosh_half_z.data();
  const float* __restrict tanh_half_z = g.tanh_half_z.data();
  const float* __restrict xi_at = w.xi.data();
  const float* __restrict log_xi_at = w.log_xi.data();
  const float* __restrict log1p_minus_xi_at = w.log1p_minus_xi.data();
  float* __restrict node_at = w.node.data();
  float* __restrict shared_at = w.shared.data();
  float* __restrict arg_at = w.arg.data();
  float* __restrict arg_slope_at = w.arg_slope.data();
  float* __restrict conditional_at = w.conditional.data();
  float* __restrict slope_at = w.slope.data();
  const int pairs = num_edges * kGauss;
#pragma omp simd
  for (int j = 0; j < pairs; ++j) {  // the integration variable's logit at the nodes
    const int e = j / kGauss;
    const float xi = xi_at[j];
    const float log_u =
        upper[e] > 0.0f ? LogF(start[e] + length[e] * xi) : log_length[e] + log_xi_at[j];
    const float log_v =
        upper[e] > 0.0f ? log_length[e] + log1p_minus_xi_at[j] : Log1pF(-length[e] * xi);
    const float node = QuantileLookup(arm.outer_quantiles, log_u - log_v);
    node_at[j] = node;
    // softplus(node), log sigmoid(node) and log(2 cosh(node / 2)) share log1p(e^-|node|).
    shared_at[j] = Log1pF(ExpF(-std::fabs(node)));
  }
#pragma omp simd
  for (int j = 0; j < pairs; ++j) {  // the argument and its derivative
    const int e = j / kGauss;
    const float node = node_at[j], shared = shared_at[j];
    const float softplus = Max(node, 0.0f) + shared;
    float value, slope;
    if (kUseT) {
      const float log_sigmoid = node - softplus;
      const float raw_ratio = log_gap[e] + softplus;
      const float log_ratio = Min(raw_ratio, 0.0f);
      const float log_ratio_slope = raw_ratio < 0.0f ? log_gap_slope[e] : 0.0f;
      const float capped = Min(log_ratio, -kTiny);
      const float expm1_capped = Expm1F(capped);
      const float near_half = LogF(-expm1_capped);  // d/dx log(-expm1(x)) = e^x / expm1(x)
      const float near_half_slope =
          log_ratio < -kTiny ? log_ratio_slope * ((expm1_capped + 1.0f) / expm1_capped) : 0.0f;
      const float raw_exponent = log_sigmoid - log_two_tail[e];
      const float ratio = ExpF(Min(raw_exponent, 0.0f));
      const float ratio_slope = raw_exponent < 0.0f ? -ratio * log_two_tail_slope[e] : 0.0f;
      constexpr float kBelowOne = 1.0f - 1e-7f;
      const float in_tail = log_two_tail[e] + Log1pF(-Min(ratio, kBelowOne)) + softplus;
      const float in_tail_slope =
          log_two_tail_slope[e] - (ratio < kBelowOne ? ratio_slope / (1.0f - ratio) : 0.0f);
      const float exp_log_ratio = ExpF(log_ratio);
      const float log_complement = log_abs_z[e] > 0.0f ? in_tail : near_half;
      const float log_complement_slope = log_abs_z[e] > 0.0f ? in_tail_slope : near_half_slope;
      value = sign[e] * (Log1pF(exp_log_ratio) - log_complement);
      slope = sign[e] * (exp_log_ratio / (1.0f + exp_log_ratio) * log_ratio_slope -
                         log_complement_slope);
    } else {
      const float log_two_cosh_node = 0.5f * std::fabs(node) + shared;
      const float gap = 0.5f * std::fabs(node - z[e]);
      const float gap_slope = 0.5f * Sign(z[e] - node) * z_slope[e];
      const float expm1_minus = Expm1F(-2.0f * Max(gap, kTiny));
      // d/dg log(-expm1(-2g)) = 2 e^-2g / -expm1(-2g)
      const float log_two_sinh = gap + LogF(-expm1_minus);
      const float log_two_sinh_slope =
          gap_slope +
          (gap > kTiny ? gap_slope * 2.0f * (expm1_minus + 1.0f) / -expm1_minus : 0.0f);
      const float log_node_gap = log_two_sinh - log_two_cosh_node - log_two_cosh_half_z[e];
      const float log_node_gap_slope = log_two_sinh_slope - 0.5f * tanh_half_z[e] * z_slope[e];
      value = log_node_gap - (log_gap[e] - kLog2);
      slope = log_node_gap_slope - log_gap_slope[e];
    }
    arg_at[j] = value != value ? 0.0f : value;
    arg_slope_at[j] = value != value ? 0.0f : slope;
  }
  // The conditional CDF and its slope in log |z| (TableCdfAndDensity in two loops:
  // GCC vectorizes each, not the one).
  float* __restrict position_at = w.position.data();
  const float inner_mode = arm.inner.mode;
  const float inner_scale[2] = {arm.inner.inner[0], arm.inner.inner[1]};
  const float inner_stretch[2] = {arm.inner.stretch[0], arm.inner.stretch[1]};
#pragma omp simd
  for (int j = 0; j < pairs; ++j) {
    position_at[j] = TablePosition(inner_scale, inner_stretch, arg_at[j] - inner_mode);
  }
#pragma omp simd
  for (int j = 0; j < pairs; ++j) {
    const float node = node_at[j], arg = arg_at[j], arg_slope = arg_slope_at[j];
    float conditional, density;
    TableInterpolate(arm.inner, arg - inner_mode, position_at[j], &conditional, &density);
    if (!kUseT) {  // over B: 1 - F where the node is positive
      conditional = node > 0.0f ? 1.0f - conditional : conditional;
      density = node > 0.0f ? -density : density;
    }
    float weighted_slope = density * arg_slope;  // 0 where arg or its slope is infinite
    weighted_slope = std::fabs(arg) < kInf ? weighted_slope : 0.0f;
    weighted_slope = std::fabs(arg_slope) < kInf ? weighted_slope : 0.0f;
    conditional_at[j] = conditional;
    slope_at[j] = weighted_slope;
  }
  for (int e = 0; e < num_edges; ++e) {
    float cdf_sum = 0.0f, slope_sum = 0.0f;
    for (int n = 0; n < kGauss; ++n) {
      cdf_sum += conditional_at[e * kGauss + n] * kGaussWeight[n];
      slope_sum += slope_at[e * kGauss + n] * kGaussWeight[n];
    }
    const float constant = sign[e] > 0.0f ? 1.0f - length[e] : 0.0f;
    cdf_out[e] = Clip(constant + length[e] * cdf_sum, 0.0f, 1.0f);
    const float log_density = LogF(Max(sign[e] * length[e] * slope_sum, 0.0f));
    density_out[e] =
        sign[e] != 0.0f ? ExpF(Min(log_density + g.log_jacobian[e], 80.0f)) : 0.0f;
  }
}

// score_cdf.score_sample for one arm: its score on the score axis at the pairs of the
// _PRODUCT_LEVELS stratified quantiles of t = p_d and of B = p_w / (p_w + p_l),
// [kProductLevels^2], t's level major.
constexpr int kProductLevels = 10;  // score_cdf._PRODUCT_LEVELS

SCORE_CDF_LOOPS void ArmSample(const float* concentration, Table* table, QuantileTable* quantiles,
               float* out) {
  const float win = concentration[0], draw = concentration[1], loss = concentration[2];
  float draw_logit[kProductLevels], ratio_logit[kProductLevels];
  for (int which = 0; which < 2; ++which) {
    BuildTable(which == 0 ? draw : win, which == 0 ? win + loss : loss, table);
    BuildQuantileTable(*table, quantiles);
    float* logits = which == 0 ? draw_logit : ratio_logit;
    for (int i = 0; i < kProductLevels; ++i) {
      const float level = (static_cast<float>(i) + 0.5f) / kProductLevels;
      logits[i] = QuantileLookup(*quantiles, LogF(level) - Log1pF(-level));
    }
  }
  for (int i = 0; i < kProductLevels; ++i) {
    const float log_t = -Softplus(-draw_logit[i]);  // log sigmoid
    const float log_one_minus_t = -Softplus(draw_logit[i]);
#pragma omp simd
    for (int j = 0; j < kProductLevels; ++j) {
      const float ratio = ratio_logit[j];
      // log |2 s - 1| and log(1 - |2 s - 1|), s = 1/2 + (1 - t)(B - 1/2).
      const float log_gap = log_one_minus_t + LogTanhHalf(LogF(std::fabs(ratio)));
      const float log_rest =
          LogAddExp(log_t, log_one_minus_t + kLog2 - Softplus(std::fabs(ratio)));
      const float gap = ExpF(log_gap);
      // |logit(s)| = log(1 + g) - log(1 - g), ~2 g for small g.
      const float log_abs_z = log_gap < -8.0f
                                  ? kLog2 + log_gap
                                  : LogF(Max(Log1pF(gap) - log_rest, kTiny));
      out[i * kProductLevels + j] = Sign(ratio) * ExpF(log_abs_z / kAxisPower);
    }
  }
}

}  // namespace

static ffi::Error DirichletScoreSampleImpl(ffi::ThreadPool pool,
                                           ffi::Buffer<ffi::F32> concentrations,
                                           ffi::ResultBuffer<ffi::F32> sample) {
  const auto dims = concentrations.dimensions();
  if (dims.size() < 1 || dims[dims.size() - 1] != 3) {
    return ffi::Error::InvalidArgument("concentrations must be [..., 3]");
  }
  const int64_t arms = static_cast<int64_t>(concentrations.element_count()) / 3;
  constexpr int64_t kPoints = kProductLevels * kProductLevels;
  if (static_cast<int64_t>(sample->element_count()) != arms * kPoints) {
    return ffi::Error::InvalidArgument("sample must be [..., 100]: score_cdf._PRODUCT_LEVELS"
                                       " squared, as this file's kProductLevels");
  }
  const float* c = concentrations.typed_data();
  float* out = sample->typed_data();
  ParallelChunks(pool, arms, 4 * kMinRowsPerChunk, [=](int64_t begin, int64_t end) {
    std::unique_ptr<Table> table(new Table);
    std::unique_ptr<QuantileTable> quantiles(new QuantileTable);
    for (int64_t a = begin; a < end; ++a) {
      ArmSample(c + a * 3, table.get(), quantiles.get(), out + a * kPoints);
    }
  });
  return ffi::Error::Success();
}

static ffi::Error DirichletScoreCdfImpl(ffi::ThreadPool pool,
                                        ffi::Buffer<ffi::F32> concentrations,
                                        ffi::Buffer<ffi::F32> edges,
                                        ffi::ResultBuffer<ffi::F32> cdf,
                                        ffi::ResultBuffer<ffi::F32> density) {
  const auto dims = concentrations.dimensions();
  const auto edge_dims = edges.dimensions();
  if (dims.size() < 2 || dims[dims.size() - 1] != 3 || edge_dims.size() < 1) {
    return ffi::Error::InvalidArgument("concentrations must be [..., A, 3], edges [..., E]");
  }
  const int64_t arms = dims[dims.size() - 2];
  const int64_t num_edges = edge_dims[edge_dims.size() - 1];
  const int64_t rows = arms > 0 ? static_cast<int64_t>(concentrations.element_count()) /
                                      (arms * 3)
                                : 0;
  if (num_edges < 1 || static_cast<int64_t>(edges.element_count()) != rows * num_edges) {
    return ffi::Error::InvalidArgument("edges must be [..., E] with the concentrations' "
                                       "leading shape");
  }
  const float* c = concentrations.typed_data();
  const float* y = edges.typed_data();
  float* cdf_out = cdf->typed_data();
  float* density_out = density->typed_data();
  const int edge_count = static_cast<int>(num_edges);
  ParallelChunks(pool, rows, kMinRowsPerChunk, [=](int64_t begin, int64_t end) {
    std::unique_ptr<Arm> arm(new Arm);
    EdgeTerms terms;
    ArmScratch scratch;
    scratch.Resize(edge_count);
    for (int64_t r = begin; r < end; ++r) {
      terms.Compute(y + r * num_edges, edge_count);
      for (int64_t a = 0; a < arms; ++a) {
        const int64_t i = r * arms + a;
        PrepareArm(c + i * 3, arm.get());
        (arm->use_t ? ArmRow<true> : ArmRow<false>)(*arm, terms, edge_count, scratch,
                                                    cdf_out + i * num_edges,
                                                    density_out + i * num_edges);
      }
    }
  });
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(CuriosityDirichletScoreCdf, DirichletScoreCdfImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()   // concentrations
                                  .Arg<ffi::Buffer<ffi::F32>>()   // edges
                                  .Ret<ffi::Buffer<ffi::F32>>()   // cdf
                                  .Ret<ffi::Buffer<ffi::F32>>());  // density

XLA_FFI_DEFINE_HANDLER_SYMBOL(CuriosityDirichletScoreSample, DirichletScoreSampleImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()   // concentrations
                                  .Ret<ffi::Buffer<ffi::F32>>());  // sample
