// The curiosity backup's levels (backup._level / backup._full_update) as one native pass
// per tree, for XLA:CPU, in the layout they serve: K = 2, the fast P(best), the
// "average" mixture, selection from a cached table; and the in-place update of a root
// that keeps the incremental layout (backup._root_in_place, CuriosityRootUpdate at the
// end of this file).
//
// The batched backup (backup.py) walks every tree's path one level per iteration of a
// while_loop, each level a few dozen small XLA ops on compacted slots; on the CPU most
// of its time is dispatch and memory traffic, not arithmetic. Here each tree's path is
// walked leaf to root in one loop (the per-tree walk the batched one reproduces: each
// ancestor sees its children's already updated beliefs), trees shared out between
// threads. Read backup._full_update, backup._settle, backup._fresh_mixture,
// best_arm._prepared_rows / _combine and nodes.prove first: this file transcribes them
// for that layout, and a change there needs the same change here
// (tests/test_backup_cpu.py compares the two).
//
// A node whose P(best) the fast kernel cannot serve (an uncertain child outside its
// envelope, or a proven child with a fractional score) needs the accurate method: its
// tree is left untouched (every write undone) and flagged, and backup.py runs the
// batched XLA backup on the flagged trees.
//
// Shapes of the levels' pass (B trees, N nodes, A actions; every array as the Tree and
// CuriosityExtras hold it; the root update's are at its handler): leaf [B] int32, parents [B, N] int32, children [B, N, A] int32, invalid [B, N, A]
// bool, value_belief [B, N, 2], action_beliefs [B, N, A, 2], kappa [] f32; updated in
// place (aliased): belief [B, N, 2] f32, visits [B, N] int32, proven [B, N] bool,
// score [B, N] f32, length [B, N] int32, stage weights [B, N, 1] f32, table [B, N, A, 1]
// f32; results: top_child [B] int32 (the path's node whose parent is the root; the root
// for a skipped simulation), fallback [B] bool.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "fast_pbest_cpu.h"
#include "custom_call_cpu.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int32_t kRoot = 0;                // search.tree.ROOT_INDEX
constexpr int32_t kUnvisited = -1;          // search.tree.UNVISITED
constexpr int32_t kNoProofLength = -1;      // nodes.NO_PROOF_LENGTH

struct Arrays {
  int64_t nodes, actions, grid_size;
  bool two_player, root_apart;
  bool check_envelope;  // false: every belief is inside the fast envelope (bounded_beliefs)
  float kappa;
  const int32_t* parents;
  const int32_t* children;
  const bool* invalid;
  const float* value_belief;
  const float* action_beliefs;
  float* belief;
  int32_t* visits;
  bool* proven;
  float* score;
  int32_t* length;
  float* weights;
  float* table;
};

// One node's state before the pass wrote it, to undo the tree's writes.
struct Saved {
  int64_t node;
  float belief[2];
  int32_t visits;
  bool proven;
  float score;
  int32_t length;
  float weight;
};

struct Scratch {
  Workspace workspace;
  std::vector<float> conc, vectors, probability, child_score;
  std::vector<int32_t> child_length;
  std::unique_ptr<bool[]> uncertain, exact, child_proven;
  std::vector<Saved> saved;
  std::vector<float> saved_tables;  // [depth, A]
  Scratch(int actions, int grid_size)
      : conc(2 * actions), vectors(2 * actions), probability(actions), child_score(actions),
        child_length(actions), uncertain(new bool[actions]), exact(new bool[actions]),
        child_proven(new bool[actions]) {
    workspace.Resize(actions, grid_size);
  }
};

// A node's children from its mover's view (backup._children and best_arm._prepared_rows),
// into the scratch: their parameter vectors, proofs, scores, lengths, which are exact
// (proven) or uncertain (legal, unproven), the kernel's floored concentrations.
struct Children {
  int32_t evidence = 0;      // the expanded children's visits
  float best_exact = -INFINITY;
  bool inside = true;        // every uncertain child in the fast envelope
  bool has_uncertain = false;
};

// Child `a` of the node at flat index `node` (in tree `tree`), whose node index is
// `index` (kUnvisited if not expanded): its parameter vector from the node's mover's
// view, the search belief if expanded, else the node's prior Q_a (backup._children).
inline void ChildVector(const Arrays& t, int64_t tree, int64_t node, int64_t a, int32_t index,
                        float* c0, float* c1) {
  if (index != kUnvisited) {
    const float* searched = t.belief + (tree * t.nodes + index) * 2;
    *c0 = t.two_player ? searched[1] : searched[0];
    *c1 = t.two_player ? searched[0] : searched[1];
  } else {
    const float* prior = t.action_beliefs + (node * t.actions + a) * 2;
    *c0 = prior[0];
    *c1 = prior[1];
  }
}

Children GatherChildren(const Arrays& t, int64_t tree, int64_t parent, Scratch& s) {
  const int64_t A = t.actions;
  const int64_t node = tree * t.nodes + parent;
  const int32_t* children = t.children + node * A;
  const bool* invalid = t.invalid + node * A;
  Children kids;
  for (int64_t a = 0; a < A; ++a) {
    const int32_t index = children[a];
    const bool expanded = index != kUnvisited;
    const int64_t child = tree * t.nodes + (expanded ? index : 0);
    float c0, c1;
    ChildVector(t, tree, node, a, index, &c0, &c1);
    if (expanded) kids.evidence += t.visits[child];
    const bool legal = !invalid[a];
    const bool proven = expanded && t.proven[child] && legal;
    const float score = t.two_player ? 1.0f - t.score[child] : t.score[child];
    s.child_proven[a] = proven;
    s.child_score[a] = score;
    s.child_length[a] = t.length[child];
    s.vectors[2 * a] = c0;
    s.vectors[2 * a + 1] = c1;
    const bool exact = proven;  // legal & proven
    const bool uncertain = legal && !exact;
    s.exact[a] = exact;
    s.uncertain[a] = uncertain;
    kids.has_uncertain = kids.has_uncertain || uncertain;
    if (exact) kids.best_exact = Max(kids.best_exact, score);
    const float k0 = uncertain ? Max(c0, kConcentrationFloor) : 1.0f;
    const float k1 = uncertain ? Max(c1, kConcentrationFloor) : 1.0f;
    s.conc[2 * a] = k0;
    s.conc[2 * a + 1] = k1;
    kids.inside = kids.inside && (!uncertain || !t.check_envelope || InFastEnvelope(k0, k1));
  }
  return kids;
}

// A node's proof from its children's (nodes.prove).
struct Proof {
  bool proven;
  float score;
  int32_t length;
};

Proof Prove(const Arrays& t, const bool* invalid, const Scratch& s) {
  const int64_t A = t.actions;
  bool any_win = false, all_proven = true, any_legal = false;
  float best = -1.0f;
  for (int64_t a = 0; a < A; ++a) {
    const bool proven = s.child_proven[a];
    any_win = any_win || (proven && s.child_score[a] >= 1.0f);
    all_proven = all_proven && (proven || invalid[a]);
    any_legal = any_legal || !invalid[a];
    if (proven) best = Max(best, s.child_score[a]);
  }
  all_proven = all_proven && any_legal;
  int32_t shortest = std::numeric_limits<int32_t>::max(), longest = -1;
  for (int64_t a = 0; a < A; ++a) {
    if (s.child_proven[a] && s.child_score[a] >= best) {
      shortest = std::min(shortest, s.child_length[a]);
      longest = std::max(longest, s.child_length[a]);
    }
  }
  Proof proof;
  proof.proven = any_win || all_proven;
  proof.score = proof.proven ? (any_win ? 1.0f : best) : 0.0f;
  proof.length = proof.proven ? 1 + (best <= 0.0f ? longest : shortest) : kNoProofLength;
  return proof;
}

// backup._settle: the node's C = (1 - gamma) V + gamma Qbar from its children's
// mixture, or the exact belief of a proof; a node proven before keeps its state.
void Settle(const Arrays& t, int64_t node, float mixture0, float mixture1, int32_t evidence,
            const Proof& proof) {
  if (t.proven[node]) return;
  const float n = static_cast<float>(evidence);
  const float denominator = t.kappa + n;
  const float gamma = denominator > 0.0f ? n / denominator : 0.0f;
  const float* value = t.value_belief + node * 2;
  const float b0 = (1.0f - gamma) * value[0] + gamma * mixture0;
  const float b1 = (1.0f - gamma) * value[1] + gamma * mixture1;
  if (proof.proven) {
    const float node_total = b0 + b1;
    t.belief[node * 2] = node_total * proof.score;
    t.belief[node * 2 + 1] = node_total * (1.0f - proof.score);
  } else {
    t.belief[node * 2] = b0;
    t.belief[node * 2 + 1] = b1;
  }
  t.proven[node] = proof.proven;
  t.score[node] = proof.score;
  t.length[node] = proof.length;
}

// backup._full_update for node `parent` of the tree whose arrays start at `tree`
// offsets: its new belief, proof and selection row, written in place. False (nothing
// written) where its P(best) needs the accurate method.
bool UpdateNode(const Arrays& t, int64_t tree, int64_t parent, Scratch& s) {
  const int64_t A = t.actions;
  const int64_t node = tree * t.nodes + parent;
  const Children kids = GatherChildren(t, tree, parent, s);
  const float best_exact = kids.best_exact;
  const bool fractional = best_exact > 0.0f && best_exact < 1.0f;
  if (!kids.inside || fractional) return false;  // best_arm.needs_accurate

  // P(best): the fast kernel on the uncertain children, then best_arm._combine's
  // exact-arm rules (K = 2: exact scores are 0 or 1, no exact share).
  Row(s.conc.data(), s.uncertain.get(), static_cast<int>(A), static_cast<int>(t.grid_size),
      s.workspace, s.probability.data());
  int num_tops = 0;
  float total = 0.0f;
  for (int64_t a = 0; a < A; ++a) {
    num_tops += s.exact[a] && s.child_score[a] >= best_exact;
    total += s.uncertain[a] ? s.probability[a] : 0.0f;
  }
  const float tie_weight = 1.0f / static_cast<float>(std::max(num_tops, 1));
  const bool tied = best_exact >= 1.0f || !kids.has_uncertain;
  for (int64_t a = 0; a < A; ++a) {
    const float tie = (s.exact[a] && s.child_score[a] >= best_exact) ? tie_weight : 0.0f;
    const float own = s.uncertain[a] ? s.probability[a] : 0.0f;
    s.probability[a] = tied ? tie : (total > 0.0f ? own / total : 0.0f);
  }

  // backup._fresh_mixture: the "average" of the children's parameter vectors, a proven
  // child as its exact belief (beliefs.exact_belief, K = 2).
  float weight_sum = 0.0f;
  for (int64_t a = 0; a < A; ++a) weight_sum += s.probability[a];
  float mixture0 = 0.0f, mixture1 = 0.0f;
  for (int64_t a = 0; a < A; ++a) {
    const float w = weight_sum > 0.0f ? s.probability[a] / weight_sum
                                      : 1.0f / static_cast<float>(A);
    float v0 = s.vectors[2 * a], v1 = s.vectors[2 * a + 1];
    if (s.child_proven[a]) {
      const float child_total = v0 + v1;
      v0 = child_total * s.child_score[a];
      v1 = child_total * (1.0f - s.child_score[a]);
    }
    mixture0 += w * v0;
    mixture1 += w * v1;
  }
  Settle(t, node, mixture0, mixture1, kids.evidence, Prove(t, t.invalid + node * A, s));
  // selection_cache.from_probability: the full layout's one stage.
  t.weights[node] = 1.0f;
  std::memcpy(t.table + node * A, s.probability.data(), sizeof(float) * A);
  return true;
}

void Save(const Arrays& t, int64_t node, Scratch& s) {
  Saved saved{node, {t.belief[2 * node], t.belief[2 * node + 1]}, t.visits[node],
              t.proven[node], t.score[node], t.length[node], t.weights[node]};
  s.saved.push_back(saved);
  const float* row = t.table + node * t.actions;
  s.saved_tables.insert(s.saved_tables.end(), row, row + t.actions);
}

// Restores the saved nodes, latest first (a node saved twice gets its first state).
void Undo(const Arrays& t, Scratch& s) {
  for (int64_t i = static_cast<int64_t>(s.saved.size()) - 1; i >= 0; --i) {
    const Saved& saved = s.saved[i];
    const int64_t node = saved.node;
    t.belief[2 * node] = saved.belief[0];
    t.belief[2 * node + 1] = saved.belief[1];
    t.visits[node] = saved.visits;
    t.proven[node] = saved.proven;
    t.score[node] = saved.score;
    t.length[node] = saved.length;
    t.weights[node] = saved.weight;
    std::memcpy(t.table + node * t.actions, s.saved_tables.data() + i * t.actions,
                sizeof(float) * t.actions);
  }
}

// One tree's backup levels (backup._level, per tree): from the leaf's parent up to the
// root (or below it when the root is updated apart). Returns false, the tree untouched,
// where a node needs the accurate P(best).
bool Walk(const Arrays& t, int64_t tree, int32_t leaf, Scratch& s) {
  s.saved.clear();
  s.saved_tables.clear();
  const int32_t* parents = t.parents + tree * t.nodes;
  int32_t child = leaf;
  while (child != kRoot) {
    const int32_t parent = parents[child];
    if (t.root_apart && parent == kRoot) break;
    const int64_t node = tree * t.nodes + parent;
    Save(t, node, s);
    t.visits[node] += 1;
    if (!UpdateNode(t, tree, parent, s)) {
      Undo(t, s);
      return false;
    }
    child = parent;
  }
  return true;
}

// The root's incremental selection cache (selection_cache.SelectionCache, incremental
// layout; nodes.CuriosityExtraData), [B, ...] arrays: W = S + 1 stored terms per arm.
struct RootCache {
  int64_t stages;           // W
  const bool* current;      // [B]
  float* weights;           // [B, W]
  float* table;             // [B, A, W]
  float* logs;              // [B, A, W]
  float* arms;              // [B, A, 2]
  bool* arms_valid;         // [B, A]
  float* edges;             // [B, G]
  float* log_total;         // [B, S]
  float* zeros;             // [B, S]
  float* ratio_sum;         // [B, S]
  float* vector_sum;        // [B, S, 2]
  float* lower_log;         // [B]
  float* rate_sum;          // [B]
  float* rate_vector;       // [B, 2]

  Aggregates Row(int64_t tree, int64_t grid_size) const {
    const int64_t S = stages - 1;
    return Aggregates{edges + tree * grid_size, log_total + tree * S, zeros + tree * S,
                      ratio_sum + tree * S, vector_sum + tree * S * 2, lower_log + tree,
                      rate_sum + tree, rate_vector + tree * 2};
  }
};

// One thread's scratch for the root update: the changed arm's new terms ([W]), the
// sub-node weights ([S]) and the stored grid's sub-nodes (SubNodes: places, quadrature
// weights, softplus [S]).
struct RootScratch {
  std::vector<float> node, new_table, new_logs, places, quadrature, softplus;
  explicit RootScratch(int64_t stages)
      : node(stages - 1), new_table(stages), new_logs(stages), places(stages - 1),
        quadrature(stages - 1), softplus(stages - 1) {}
};

// Whether the grid the fast kernel would place now for the root's children (their
// floored concentrations alpha, beta and mask [slots] in the workspace) is the stored
// one, compared in grid steps (selection_cache.fast_grid_edges, same_fast_grid).
bool SameGrid(Workspace& w, int slots, const Aggregates& stored, int64_t grid_size) {
  float step_low, step_high;
  GridSteps(w.alpha.data(), w.beta.data(), w.mask.data(), slots, &step_low, &step_high);
  return step_low == EdgeStep(stored.edges[0]) &&
         step_high == EdgeStep(stored.edges[grid_size - 1]);
}

// The in-place root update's writes (best_arm.update_fast_aggregates, then the stage
// weights, the mixture and the root's settled belief): the child `arm`'s terms out,
// its new ones (its parameter vector c0, c1, counted where `valid`) in.
void WriteRootInPlace(const Arrays& t, const RootCache& r, int64_t tree, int32_t arm,
                      float c0, float c1, bool valid, int32_t evidence, const Proof& proof,
                      RootScratch& rs) {
  const int64_t A = t.actions, G = t.grid_size, W = r.stages, S = W - 1;
  const int64_t node = tree * t.nodes + kRoot;
  const Aggregates stored = r.Row(tree, G);
  const int64_t slot = tree * A + arm;
  SubNodes(stored.edges, static_cast<int>(G), rs.places.data(), rs.quadrature.data(),
           rs.softplus.data());
  ArmTerms(c0, c1, valid, rs.places.data(), rs.quadrature.data(), rs.softplus.data(),
           static_cast<int>(G), rs.new_table.data(), rs.new_logs.data());
  const float new_vector[2] = {valid ? c0 : 0.0f, valid ? c1 : 0.0f};
  UpdateAggregates(stored, static_cast<int>(S), r.table + slot * W, r.logs + slot * W,
                   r.arms + slot * 2, rs.new_table.data(), rs.new_logs.data(), new_vector);
  float mixture[2];
  SelectionAndMixture(stored, static_cast<int>(S), rs.node.data(), r.weights + tree * W,
                      mixture);
  Settle(t, node, mixture[0], mixture[1], evidence, proof);
  std::copy(rs.new_table.begin(), rs.new_table.end(), r.table + slot * W);
  std::copy(rs.new_logs.begin(), rs.new_logs.end(), r.logs + slot * W);
  r.arms[slot * 2] = c0;
  r.arms[slot * 2 + 1] = c1;
  r.arms_valid[slot] = valid;
}

// The root's update in the usual case, without gathering its children's beliefs and
// proofs: its cache is current, it is unproven, no child is proven and the child `arm`
// is legal and inside the fast envelope. Then every other child is as the cache's
// `arms` (only `arm` changed since the cache was current), inside the envelope (the
// cache is current) and counted (legal, unproven); no child proves the root (none is
// proven); so the grid is placed from the cache's arms, and only the children's visits
// (the evidence) are gathered. Same writes as UpdateRoot's in-place update. False,
// nothing written, where UpdateRoot must decide.
bool UpdateRootUsual(const Arrays& t, const RootCache& r, int64_t tree, int32_t arm,
                     Scratch& s, RootScratch& rs) {
  const int64_t A = t.actions;
  const int64_t node = tree * t.nodes + kRoot;
  if (!r.current[tree] || t.proven[node]) return false;
  const int32_t* children = t.children + node * A;
  const bool* invalid = t.invalid + node * A;
  if (invalid[arm]) return false;
  // Branch-free (which children are expanded follows no pattern).
  const int32_t* visits = t.visits + tree * t.nodes;
  const bool* proven = t.proven + tree * t.nodes;
  int32_t evidence = 0, proven_children = 0;
  for (int64_t a = 0; a < A; ++a) {
    const int32_t index = children[a];
    const bool expanded = index != kUnvisited;
    const int32_t safe = expanded ? index : 0;
    evidence += expanded ? visits[safe] : 0;
    proven_children += expanded && proven[safe];
  }
  if (proven_children > 0) return false;
  float c0, c1;
  ChildVector(t, tree, node, arm, children[arm], &c0, &c1);
  const float k0 = Max(c0, kConcentrationFloor), k1 = Max(c1, kConcentrationFloor);
  if (t.check_envelope && !InFastEnvelope(k0, k1)) return false;
  Workspace& w = s.workspace;
  const int slots = Padded(static_cast<int>(A));
  const float* arms = r.arms + tree * A * 2;
  for (int64_t a = 0; a < slots; ++a) {
    const bool counted = a < A && !invalid[a];
    const bool changed = a == arm;
    const float stored0 = a < A ? arms[2 * a] : 1.0f, stored1 = a < A ? arms[2 * a + 1] : 1.0f;
    w.alpha[a] = changed ? k0 : (counted ? Max(stored0, kConcentrationFloor) : 1.0f);
    w.beta[a] = changed ? k1 : (counted ? Max(stored1, kConcentrationFloor) : 1.0f);
    w.mask[a] = counted ? 1.0f : 0.0f;
  }
  if (!SameGrid(w, slots, r.Row(tree, t.grid_size), t.grid_size)) return false;
  WriteRootInPlace(t, r, tree, arm, c0, c1, true, evidence,
                   Proof{false, 0.0f, kNoProofLength}, rs);
  return true;
}

// backup._root_update's in-place part for one tree whose path reached the root's
// child `arm` (backup._incremental_update, selection_cache.update_incremental): the
// root's visit counted, its aggregates updated for that one child, its belief settled.
// Returns true where the root must be rebuilt instead (its cache was not current, its
// grid moved, a child left the fast envelope, or this update proves it): then only the
// visit is written, and backup.py rebuilds it.
bool UpdateRoot(const Arrays& t, const RootCache& r, int64_t tree, int32_t arm, Scratch& s,
                RootScratch& rs) {
  const int64_t A = t.actions;
  const int64_t node = tree * t.nodes + kRoot;
  t.visits[node] += 1;
  if (UpdateRootUsual(t, r, tree, arm, s, rs)) return false;
  const Children kids = GatherChildren(t, tree, kRoot, s);
  Workspace& w = s.workspace;
  const int slots = Padded(static_cast<int>(A));
  for (int64_t a = 0; a < slots; ++a) {
    const bool in_row = a < A;
    w.alpha[a] = in_row ? s.conc[2 * a] : 1.0f;
    w.beta[a] = in_row ? s.conc[2 * a + 1] : 1.0f;
    w.mask[a] = in_row && s.uncertain[a] ? 1.0f : 0.0f;
  }
  const bool same_grid = SameGrid(w, slots, r.Row(tree, t.grid_size), t.grid_size);
  const bool ok = r.current[tree] && kids.inside && same_grid;

  // In place unless it must be rebuilt: where not ok, or where this update proves it
  // (a root proven before keeps its belief, and its aggregates follow its children).
  const bool already = t.proven[node];
  if (!ok && !already) return true;
  const Proof proof = Prove(t, t.invalid + node * A, s);
  if (proof.proven && !already) return true;
  WriteRootInPlace(t, r, tree, arm, s.vectors[2 * arm], s.vectors[2 * arm + 1],
                   s.uncertain[arm], kids.evidence, proof, rs);
  return false;
}

constexpr int64_t kMinTreesPerChunk = 16;

}  // namespace

static ffi::Error BackupImpl(
    ffi::ThreadPool pool, ffi::Buffer<ffi::S32> leaf, ffi::Buffer<ffi::S32> parents,
    ffi::Buffer<ffi::S32> children, ffi::Buffer<ffi::PRED> invalid,
    ffi::Buffer<ffi::F32> value_belief, ffi::Buffer<ffi::F32> action_beliefs,
    ffi::Buffer<ffi::F32> kappa, ffi::AnyBuffer belief_in, ffi::AnyBuffer visits_in,
    ffi::AnyBuffer proven_in, ffi::AnyBuffer score_in, ffi::AnyBuffer length_in,
    ffi::AnyBuffer weights_in, ffi::AnyBuffer table_in, ffi::ResultBuffer<ffi::F32> belief,
    ffi::ResultBuffer<ffi::S32> visits, ffi::ResultBuffer<ffi::PRED> proven,
    ffi::ResultBuffer<ffi::F32> score, ffi::ResultBuffer<ffi::S32> length,
    ffi::ResultBuffer<ffi::F32> weights, ffi::ResultBuffer<ffi::F32> table,
    ffi::ResultBuffer<ffi::S32> top_child, ffi::ResultBuffer<ffi::PRED> fallback,
    int64_t grid_size, bool two_player, bool root_apart, bool check_envelope) {
  const auto dims = children.dimensions();
  if (dims.size() != 3) return ffi::Error::InvalidArgument("children must be [B, N, A]");
  if (grid_size < 2) return ffi::Error::InvalidArgument("grid_size must be >= 2");
  if (belief_in.size_bytes() != static_cast<size_t>(dims[0] * dims[1] * 2 * sizeof(float))) {
    return ffi::Error::InvalidArgument("belief must be [B, N, 2]");
  }
  // The updated arrays alias their inputs; copy where XLA gave a separate buffer.
  CopyIfApart(belief_in, belief->typed_data());
  CopyIfApart(visits_in, visits->typed_data());
  CopyIfApart(proven_in, proven->typed_data());
  CopyIfApart(score_in, score->typed_data());
  CopyIfApart(length_in, length->typed_data());
  CopyIfApart(weights_in, weights->typed_data());
  CopyIfApart(table_in, table->typed_data());
  Arrays t;
  t.nodes = dims[1];
  t.actions = dims[2];
  t.grid_size = grid_size;
  t.two_player = two_player;
  t.root_apart = root_apart;
  t.check_envelope = check_envelope;
  t.kappa = kappa.typed_data()[0];
  t.parents = parents.typed_data();
  t.children = children.typed_data();
  t.invalid = invalid.typed_data();
  t.value_belief = value_belief.typed_data();
  t.action_beliefs = action_beliefs.typed_data();
  t.belief = belief->typed_data();
  t.visits = visits->typed_data();
  t.proven = proven->typed_data();
  t.score = score->typed_data();
  t.length = length->typed_data();
  t.weights = weights->typed_data();
  t.table = table->typed_data();
  const int32_t* leaves = leaf.typed_data();
  int32_t* tops = top_child->typed_data();
  bool* flags = fallback->typed_data();
  ParallelChunks(pool, dims[0], kMinTreesPerChunk, [&t, leaves, tops, flags](int64_t begin,
                                                                             int64_t end) {
    Scratch scratch(static_cast<int>(t.actions), static_cast<int>(t.grid_size));
    for (int64_t tree = begin; tree < end; ++tree) {
      const int32_t* tree_parents = t.parents + tree * t.nodes;
      int32_t top = leaves[tree];
      while (top != kRoot && tree_parents[top] != kRoot) top = tree_parents[top];
      tops[tree] = top;
      flags[tree] = !Walk(t, tree, leaves[tree], scratch);
    }
  });
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(CuriosityBackup, BackupImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::S32>>()    // leaf
                                  .Arg<ffi::Buffer<ffi::S32>>()    // parents
                                  .Arg<ffi::Buffer<ffi::S32>>()    // children
                                  .Arg<ffi::Buffer<ffi::PRED>>()   // invalid
                                  .Arg<ffi::Buffer<ffi::F32>>()    // value_belief
                                  .Arg<ffi::Buffer<ffi::F32>>()    // action_beliefs
                                  .Arg<ffi::Buffer<ffi::F32>>()    // kappa
                                  .Arg<ffi::AnyBuffer>()           // belief
                                  .Arg<ffi::AnyBuffer>()           // visits
                                  .Arg<ffi::AnyBuffer>()           // proven
                                  .Arg<ffi::AnyBuffer>()           // score
                                  .Arg<ffi::AnyBuffer>()           // length
                                  .Arg<ffi::AnyBuffer>()           // weights
                                  .Arg<ffi::AnyBuffer>()           // table
                                  .Ret<ffi::Buffer<ffi::F32>>()    // belief
                                  .Ret<ffi::Buffer<ffi::S32>>()    // visits
                                  .Ret<ffi::Buffer<ffi::PRED>>()   // proven
                                  .Ret<ffi::Buffer<ffi::F32>>()    // score
                                  .Ret<ffi::Buffer<ffi::S32>>()    // length
                                  .Ret<ffi::Buffer<ffi::F32>>()    // weights
                                  .Ret<ffi::Buffer<ffi::F32>>()    // table
                                  .Ret<ffi::Buffer<ffi::S32>>()    // top_child
                                  .Ret<ffi::Buffer<ffi::PRED>>()   // fallback
                                  .Attr<int64_t>("grid_size")
                                  .Attr<bool>("two_player")
                                  .Attr<bool>("root_apart")
                                  .Attr<bool>("check_envelope"));

// backup._root_in_place for every tree (UpdateRoot). Shapes: top_child [B] int32 (the
// path's node whose parent is the root; the root for a skipped simulation),
// action_from_parent [B, N] int32, current [B] bool (the root cache's), children,
// invalid, value_belief, action_beliefs and kappa as the levels' pass; updated in place
// (aliased), in this order: belief, visits, proven, score, length as the levels' pass,
// the root cache's weights [B, W], table, logs [B, A, W], arms [B, A, 2], arms_valid
// [B, A], edges [B, G], log_total, zeros, ratio_sum [B, S], vector_sum [B, S, 2],
// lower_log, rate_sum [B], rate_vector [B, 2]; result: rebuild [B] bool.
static ffi::Error RootUpdateImpl(
    ffi::ThreadPool pool, ffi::Buffer<ffi::S32> top_child,
    ffi::Buffer<ffi::S32> action_from_parent, ffi::Buffer<ffi::PRED> current,
    ffi::Buffer<ffi::S32> children, ffi::Buffer<ffi::PRED> invalid,
    ffi::Buffer<ffi::F32> value_belief, ffi::Buffer<ffi::F32> action_beliefs,
    ffi::Buffer<ffi::F32> kappa, ffi::RemainingArgs updated_in, ffi::RemainingRets updated,
    int64_t grid_size, bool two_player, bool check_envelope) {
  const auto dims = children.dimensions();
  if (dims.size() != 3) return ffi::Error::InvalidArgument("children must be [B, N, A]");
  constexpr size_t kUpdated = 18;  // belief, visits, proven, score, length, the cache's 13
  if (updated_in.size() != kUpdated || updated.size() != kUpdated + 1) {
    return ffi::Error::InvalidArgument("root update: 18 updated arrays and the rebuild flags");
  }
  void* out[kUpdated + 1];
  for (size_t i = 0; i <= kUpdated; ++i) {
    auto ret = updated.get<ffi::AnyBuffer>(i);
    if (ret.has_error()) return ret.error();
    out[i] = (*ret)->untyped_data();
    if (i == kUpdated) break;
    auto arg = updated_in.get<ffi::AnyBuffer>(i);
    if (arg.has_error()) return arg.error();
    if ((*arg).size_bytes() != (*ret)->size_bytes()) {
      return ffi::Error::InvalidArgument("root update: an updated array changed size");
    }
    // The updated arrays alias their inputs; copy where XLA gave a separate buffer.
    CopyIfApart(*arg, static_cast<char*>(out[i]));
  }
  const int64_t B = dims[0], A = dims[2];
  auto weights_arg = updated_in.get<ffi::AnyBuffer>(5);
  if (weights_arg.has_error()) return weights_arg.error();
  const int64_t stages = static_cast<int64_t>((*weights_arg).size_bytes() / sizeof(float)) / B;
  if (stages != 3 * (grid_size - 1) + 2) {
    return ffi::Error::InvalidArgument("root update: weights must be [B, 3 (G - 1) + 2]");
  }
  Arrays t{};
  t.nodes = dims[1];
  t.actions = A;
  t.grid_size = grid_size;
  t.two_player = two_player;
  t.root_apart = true;
  t.check_envelope = check_envelope;
  t.kappa = kappa.typed_data()[0];
  t.children = children.typed_data();
  t.invalid = invalid.typed_data();
  t.value_belief = value_belief.typed_data();
  t.action_beliefs = action_beliefs.typed_data();
  t.belief = static_cast<float*>(out[0]);
  t.visits = static_cast<int32_t*>(out[1]);
  t.proven = static_cast<bool*>(out[2]);
  t.score = static_cast<float*>(out[3]);
  t.length = static_cast<int32_t*>(out[4]);
  RootCache r{stages,
              current.typed_data(),
              static_cast<float*>(out[5]),
              static_cast<float*>(out[6]),
              static_cast<float*>(out[7]),
              static_cast<float*>(out[8]),
              static_cast<bool*>(out[9]),
              static_cast<float*>(out[10]),
              static_cast<float*>(out[11]),
              static_cast<float*>(out[12]),
              static_cast<float*>(out[13]),
              static_cast<float*>(out[14]),
              static_cast<float*>(out[15]),
              static_cast<float*>(out[16]),
              static_cast<float*>(out[17])};
  const int32_t* tops = top_child.typed_data();
  const int32_t* actions = action_from_parent.typed_data();
  bool* rebuild = static_cast<bool*>(out[kUpdated]);
  ParallelChunks(pool, B, kMinTreesPerChunk, [&t, &r, tops, actions, rebuild](int64_t begin,
                                                                             int64_t end) {
    Scratch scratch(static_cast<int>(t.actions), static_cast<int>(t.grid_size));
    RootScratch root_scratch(r.stages);
    for (int64_t tree = begin; tree < end; ++tree) {
      const int32_t child = tops[tree];
      if (child == kRoot) {  // a skipped simulation: nothing to update
        rebuild[tree] = false;
        continue;
      }
      const int32_t arm = std::max(actions[tree * t.nodes + child], 0);
      rebuild[tree] = UpdateRoot(t, r, tree, arm, scratch, root_scratch);
    }
  });
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(CuriosityRootUpdate, RootUpdateImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::S32>>()    // top_child
                                  .Arg<ffi::Buffer<ffi::S32>>()    // action_from_parent
                                  .Arg<ffi::Buffer<ffi::PRED>>()   // current
                                  .Arg<ffi::Buffer<ffi::S32>>()    // children
                                  .Arg<ffi::Buffer<ffi::PRED>>()   // invalid
                                  .Arg<ffi::Buffer<ffi::F32>>()    // value_belief
                                  .Arg<ffi::Buffer<ffi::F32>>()    // action_beliefs
                                  .Arg<ffi::Buffer<ffi::F32>>()    // kappa
                                  .RemainingArgs()                 // the 18 updated arrays
                                  .RemainingRets()                 // them, then rebuild
                                  .Attr<int64_t>("grid_size")
                                  .Attr<bool>("two_player")
                                  .Attr<bool>("check_envelope"));
