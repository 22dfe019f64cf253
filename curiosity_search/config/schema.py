"""The config schema: one frozen dataclass per YAML section.

Fields left ``None`` where the comment says "bundle" are filled from the algorithm
bundle (``resolve_algorithm_defaults``); every other default is the value used when the
key is absent. ``configs/base.yaml`` spells the same defaults out.

To add a field, add one line to its section, e.g.
``temperature: float = positive(1.0, "move sampling temperature")``; the type gives the
type check, the helper the range, ``Literal[...]`` the allowed names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from curiosity_search.config.fields import (
    bounded,
    choice,
    doc,
    non_negative,
    positive,
    probability,
    registered,
    section,
)
from curiosity_search.rules import RULES

Algorithm = Literal["alphazero", "gumbel", "curiosity", "exit", "reinforce"]
# Two-player, perfect-information pgx games (extend when ``envs.make`` learns more).
EnvName = Literal[
    "hex",
    "tic_tac_toe",
    "connect_four",
    "othello",
    "go_9x9",
    "go_19x19",
    "chess",
    "gardner_chess",
    "shogi",
    "animal_shogi",
]
ValueHead = Literal["scalar", "beta", "dirichlet"]
PolicyTarget = Literal["visits", "chosen_action", "improved", "pbest"]
ValueTarget = Literal["outcome", "search_value", "search_belief"]


@dataclass(frozen=True)
class EnvConfig:
    """The game: any pgx id in ``EnvName``; ``size`` and ``swap`` apply to Hex only."""

    name: EnvName = "hex"
    size: int | None = positive(None, "hex board size, 3..19; null means 4 for hex")
    swap: bool = doc(False, "offer pgx Hex's swap move at ply 1")


@dataclass(frozen=True)
class NetworkConfig:
    """The network trunk and heads."""

    trunk: Literal["mlp", "resnet"] = "mlp"
    blocks: int = positive(2, "residual blocks")
    width: int = positive(128, "mlp hidden width / resnet channels")
    value_head: ValueHead | None = doc(None, "bundle: scalar, or beta for curiosity")
    action_values: bool | None = doc(None, "bundle: per-action value beliefs (curiosity)")
    regret_heads: bool | None = doc(None, "ranking + regret heads; null means on for rgsc")
    compute_dtype: Literal["float32", "bfloat16"] = "float32"
    conv_gradient: Literal["auto", "xla", "explicit"] = doc(
        "auto", "resnet conv gradients: explicit on CPU (fast inside loops), xla elsewhere"
    )
    belief_floor: float = positive(1.0, "belief heads: smallest total concentration")
    belief_cap: float = positive(16.0, "belief heads: largest total concentration")
    belief_init: float | None = positive(
        None, "belief heads: a fresh head's total concentration; null means K (uniform)"
    )


@dataclass(frozen=True)
class SearchConfig:
    """Tree search: the selection rule and its constants."""

    rule: str | None = registered(
        None, RULES, "bundle: the algorithm's selection rule (a key of rules.RULES)"
    )
    # Range checked with the bundle: >= 1, or exactly 0 for reinforce.
    num_simulations: int | None = doc(None, "bundle: 16, or 0 for reinforce")
    eval_num_simulations: int = non_negative(32, "simulations when evaluating")
    pb_c_init: float = non_negative(1.25, "MuZero PUCT c1")
    pb_c_base: float = positive(19652.0, "MuZero PUCT c2")
    puct_form: Literal["muzero", "alphago"] = "muzero"
    c_puct: float = non_negative(1.0, "AlphaGo-form PUCT constant")
    dirichlet_alpha: float = positive(0.3, "root noise concentration")
    dirichlet_fraction: float = probability(0.25, "root noise weight; 0 turns noise off")
    max_num_considered_actions: int = positive(16, "gumbel: actions kept at the root")
    gumbel_scale: float = non_negative(1.0, "gumbel: scale of the root Gumbel noise")
    c_visit: float = non_negative(50.0, "gumbel: sigma(q) visit offset")
    c_scale: float = non_negative(1.0, "gumbel: sigma(q) scale (mctx's 0.1 is Atari's)")
    uct_c: float = non_negative(1.0, "exit: UCT exploration constant c_b")
    w_a: float = non_negative(100.0, "exit: prior weight w_a")
    kappa: float = positive(4.0, "curiosity: gamma = n / (kappa + n)")
    grid_size: int = bounded(21, 2, None, doc="curiosity: P(best) quadrature points")
    belief_summary: Literal["average", "moment_match"] = "average"
    pbest_method: str = choice("fast", "fast", "accurate",
                               doc="curiosity: P(best) numerics (both within 0.01; fast: "
                                   "a K = 2 kernel, accurate elsewhere)")
    pbest_updates: str = choice("auto", "auto", "incremental", "full",
                                doc="curiosity: backups recompute each node's P(best) "
                                    "(full) or update the root's for the changed child "
                                    "(incremental); auto: incremental on wide boards "
                                    "(curiosity.nodes.AUTO_INCREMENTAL_ACTIONS)")
    selection_draw: str = choice("auto", "auto", "table", "thompson",
                                 doc="curiosity: selection reads P(best) rows cached by the "
                                     "backup (table) or draws one score per child "
                                     "(thompson); auto: thompson at K = 3, table at K = 2")
    pbest_fallback: bool | None = doc(
        None, "curiosity, fast P(best): rows outside the kernel's envelope take the "
              "accurate method (true), or cannot occur (false: nothing of it compiled); "
              "null means false where the network bounds every belief inside it "
              "(config.bundles.beliefs_outside_envelope), else true")
    max_depth: int | None = positive(None, "deepest simulation; null means unbounded")


@dataclass(frozen=True)
class SelfplayConfig:
    """Self-play games: batch, openings, replay."""

    batch_size: int = positive(256, "parallel games")
    moves_per_iteration: int = positive(16, "moves of every game per iteration")
    sampling_moves: int = non_negative(4, "sample by visit counts for the first k moves")
    sampling_temperature: float = positive(
        1.0, "sampled moves are drawn from action_weights ** (1 / T) (Scacchi: T = 1/3)"
    )
    random_opening_moves: int = non_negative(4, "up to this many uniform random openings")
    max_game_length: int | None = positive(None, "truncate games; null means the env's")
    replay_capacity: int = positive(20000, "positions kept in the replay buffer")
    one_position_per_game: bool = doc(False, "store one sampled position per game (ExIt)")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation loop: iterations, batches, targets and loss weights."""

    iterations: int = positive(100, "training iterations")
    batch_size: int = positive(256, "positions per gradient step")
    updates_per_iteration: int = positive(16, "gradient steps per iteration")
    policy_target: PolicyTarget | None = doc(None, "bundle: the algorithm's policy target")
    value_target: ValueTarget | None = doc(None, "bundle: outcome, search_belief (curiosity)")
    policy_loss_weight: float = non_negative(1.0)
    value_loss_weight: float = non_negative(1.0)
    action_value_loss_weight: float = non_negative(1.0)
    outcome_loss_weight: float = non_negative(
        0.0, "belief heads: auxiliary NLL (bits) of the game outcome under the value belief"
    )
    action_outcome_loss_weight: float = non_negative(
        0.0, "curiosity: auxiliary NLL (bits) of the game outcome under the played move's "
        "action belief (Scacchi's q_outcome_weight)"
    )
    concentration_logit_l2: float = non_negative(
        0.0, "belief heads: weight of the mean squared concentration logit (keeps the "
        "bounded heads' sigmoid off its flat tail; departs from the blog's loss)"
    )
    policy_min_root_value: float | None = bounded(
        None, -1.0, 1.0, doc="train the policy only on positions whose root search value "
        "(mover's view, in [-1, 1]) is at least this; null: every position (the blog's)"
    )
    value_loss: Literal["mse", "bce"] = doc("mse", "scalar value loss; bce on (z+1)/2 (ExIt)")
    regret_loss_weight: float = non_negative(1.0, "rgsc: ranking + regret-value head losses")
    dataset: Literal["online", "batch"] = doc(
        "online", "online: the replay aggregates; batch: only this iteration's games"
    )
    warm_start_iterations: int = non_negative(0, "first k iterations: rollout-MCTS expert")
    time_limit_s: float | None = positive(None, "stop after this wall time")


@dataclass(frozen=True)
class OptimizerConfig:
    """Optimizer and learning-rate schedule."""

    name: Literal["adam", "adamw", "sgd", "muon"] = "adam"
    learning_rate: float = positive(1e-3)
    schedule: Literal["constant", "cosine", "warmup_cosine"] = "constant"
    warmup_steps: int = non_negative(0)
    weight_decay: float = non_negative(0.0)
    grad_clip: float | None = positive(1.0, "global-norm clip; null turns it off")
    momentum: float = bounded(0.9, 0, 1, hi_open=True, doc="sgd momentum")


@dataclass(frozen=True)
class CheckpointConfig:
    """Orbax checkpoints in the run directory."""

    every: int = positive(10, "iterations between checkpoints")
    keep: int = positive(3, "checkpoints kept")


@dataclass(frozen=True)
class EvalConfig:
    """Periodic evaluation during training (``every: 0`` turns it off)."""

    every: int = non_negative(10, "iterations between evaluations")
    num_positions: int = non_negative(512, "positions for the optimal-move rate")
    games: int = non_negative(64, "games against the evaluation opponent")


@dataclass(frozen=True)
class SearchControlConfig:
    """Where self-play games start: the empty board, or restarts from a state buffer."""

    kind: Literal["none", "go_exploit", "rgsc"] = "none"
    restart_prob: float = probability(0.5, "lambda: probability of a restart")
    capacity: int = positive(100, "K: states in the buffer")
    tau: float = positive(0.1, "sampling P ~ R^(1/tau)")
    ema: float = bounded(0.5, 0, 1, lo_open=True, doc="alpha: regret EMA rate")
    tree_candidates: bool | None = doc(
        None, "rgsc: search-tree nodes are restart candidates too; null means on for rgsc"
    )


@dataclass(frozen=True)
class LoggingConfig:
    """Host-side logging."""

    tensorboard: bool = True
    progress: bool = True


@dataclass(frozen=True)
class Config:
    """A whole run. Load with ``load_config``; every field is validated and resolved."""

    algorithm: Algorithm = "gumbel"
    seed: int = non_negative(0)
    name: str | None = doc(None, "run name; null means the config file's stem")
    env: EnvConfig = section(EnvConfig)
    network: NetworkConfig = section(NetworkConfig)
    search: SearchConfig = section(SearchConfig)
    selfplay: SelfplayConfig = section(SelfplayConfig)
    train: TrainConfig = section(TrainConfig)
    optimizer: OptimizerConfig = section(OptimizerConfig)
    checkpoint: CheckpointConfig = section(CheckpointConfig)
    eval: EvalConfig = section(EvalConfig)
    search_control: SearchControlConfig = section(SearchControlConfig)
    logging: LoggingConfig = section(LoggingConfig)
