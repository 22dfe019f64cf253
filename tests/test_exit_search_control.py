"""ExIt options and search control in the compiled loop: TPT vs CAT, BCE value loss,
batch vs online datasets, restarts that are legal continuations, tiny runs per config."""

from __future__ import annotations

import math
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_fixtures import play_tictactoe_with_restarts, tiny_trainer

from curiosity_search.config import load_config
from curiosity_search.nets import NetworkOutput
from curiosity_search.train import replay as replay_lib
from curiosity_search.train.losses import bce_value_loss, compute_losses
from curiosity_search.train.restarts import GoExploit, RegretGuided
from curiosity_search.train.search_fns import SearchResult
from curiosity_search.train.targets import policy_target

SLOW = pytest.mark.slow
CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def _positions(policy, value, regret=None) -> replay_lib.Positions:
    policy = jnp.asarray(policy, jnp.float32)
    n = policy.shape[0]
    return replay_lib.Positions(
        observation=jnp.zeros((n, 1)),
        legal_action_mask=jnp.ones(policy.shape, bool),
        policy_target=policy,
        value_target=jnp.asarray(value, jnp.float32),
        belief_target=None,
        action_belief_target=None,
        action_belief_mask=None,
        player=jnp.zeros((n,), jnp.int32),
        valid=jnp.ones((n,), bool),
        regret_target=None if regret is None else jnp.asarray(regret, jnp.float32),
    )


def test_tpt_and_cat_losses_by_hand():
    # Root visits (2, 1, 1) of 4; the move played is action 1.
    visits = jnp.array([[0.5, 0.25, 0.25]])
    result = SearchResult(
        action=jnp.array([0]),
        action_weights=visits,
        root_value=jnp.zeros(1),
        network_value=jnp.zeros(1),
        visit_distribution=visits,
    )
    played = jnp.array([1])
    tpt = policy_target("visits", result, played)
    cat = policy_target("chosen_action", result, played)
    logits = jnp.log(jnp.array([[0.25, 0.5, 0.25]]))  # pi = (1/4, 1/2, 1/4)
    output = NetworkOutput(policy_logits=logits, value=jnp.zeros(1), value_belief=None)
    weights = dict(policy_weight=1.0, value_weight=0.0, action_value_weight=0.0)
    _, tpt_metrics = compute_losses(output, _positions(tpt, [0.0]), **weights)
    _, cat_metrics = compute_losses(output, _positions(cat, [0.0]), **weights)
    # TPT = -sum_a n(a)/n log pi(a); CAT = -log pi(a*).
    expected_tpt = -(0.5 * math.log(0.25) + 0.25 * math.log(0.5) + 0.25 * math.log(0.25))
    np.testing.assert_allclose(tpt_metrics["policy_loss"], expected_tpt, rtol=1e-6)
    np.testing.assert_allclose(cat_metrics["policy_loss"], math.log(2), rtol=1e-6)


def test_bce_value_loss_by_hand():
    value = jnp.array([0.0, 0.5, -0.5, 1.0])
    z = jnp.array([1.0, -1.0, 0.0, 1.0])
    expected = [math.log(2), -math.log(0.25), -(0.5 * math.log(0.25) + 0.5 * math.log(0.75)), 0]
    np.testing.assert_allclose(bce_value_loss(value, z), expected, rtol=1e-5, atol=1e-5)
    # Saturated wrong predictions stay finite (clipped), and the gradient too.
    grad = jax.grad(lambda v: bce_value_loss(v, -z).sum())(jnp.array([1.0, -1.0, 1.0, 1.0]))
    assert np.isfinite(bce_value_loss(jnp.array([1.0]), jnp.array([-1.0]))).all()
    assert np.isfinite(grad).all()
    output = NetworkOutput(policy_logits=jnp.zeros((4, 2)), value=value, value_belief=None)
    _, metrics = compute_losses(
        output,
        _positions(jnp.full((4, 2), 0.5), z),
        policy_weight=1.0,
        value_weight=1.0,
        action_value_weight=0.0,
        value_loss_fn=bce_value_loss,
    )
    np.testing.assert_allclose(metrics["value_loss"], np.mean(expected), rtol=1e-5)
    np.testing.assert_allclose(metrics["value_mse"], np.mean((value - z) ** 2), rtol=1e-6)


def test_regret_head_losses_join_the_total():
    regrets = jnp.array([0.0, 1.0, 0.5])
    batch = _positions(jnp.full((3, 2), 0.5), [0.0, 0.0, 0.0], regret=regrets)
    output = NetworkOutput(
        policy_logits=jnp.zeros((3, 2)),
        value=jnp.zeros(3),
        value_belief=None,
        regret_rank=jnp.zeros(3),
        regret_value=jnp.full((3,), 0.5),
    )
    common = dict(policy_weight=0.0, value_weight=0.0, action_value_weight=0.0)
    loss, metrics = compute_losses(output, batch, regret_weight=2.0, **common)
    rank = -math.log(np.mean(np.exp([0.0, 1.0, 0.5])))  # uniform softmax
    np.testing.assert_allclose(metrics["rank_loss"], rank, rtol=1e-6)
    np.testing.assert_allclose(metrics["regret_value_loss"], (0.25 + 0.25) / 3, rtol=1e-6)
    np.testing.assert_allclose(loss, 2.0 * (rank + 0.5 / 3), rtol=1e-6)


def test_batch_dataset_clears_and_online_keeps():
    example = jax.tree.map(lambda x: x[0], _positions([[1.0, 0.0]], [1.0]))
    buffer = replay_lib.init_replay(example, 4)
    buffer = replay_lib.add(buffer, _positions([[1.0, 0.0]] * 3, [1.0] * 3), jnp.ones(3, bool))
    online = replay_lib.DATASET_MODES["online"](buffer)
    assert int(online.size) == 3 and np.asarray(online.data.valid).sum() == 3
    batch = replay_lib.DATASET_MODES["batch"](buffer)
    assert int(batch.size) == 0 and not np.asarray(batch.data.valid).any()
    assert int(batch.total_added) == 3
    assert not np.asarray(replay_lib.sample(jax.random.key(0), batch, 5).valid).any()
    # A fresh dataset fills from slot 0 again.
    batch = replay_lib.add(batch, _positions([[0.0, 1.0]], [-1.0]), jnp.ones(1, bool))
    assert int(batch.size) == 1 and np.asarray(batch.data.valid).tolist() == [1, 0, 0, 0]
    np.testing.assert_array_equal(batch.data.value_target[0], -1.0)


def test_trainer_binds_dataset_mode_and_warm_start():
    online = tiny_trainer("exit")
    batch = tiny_trainer("exit", "train.dataset=batch", "train.warm_start_iterations=2")
    assert online.begin_dataset is replay_lib.keep
    assert batch.begin_dataset is replay_lib.clear
    warm = batch.expert_params({"w": 1}, jnp.int32(1))
    assert bool(warm.use_rollouts) and not bool(
        batch.expert_params({"w": 1}, jnp.int32(2)).use_rollouts
    )


# --- Restarts inside the real self-play loop ------------------------------------------


def _uniform_search(params, key, states) -> SearchResult:
    """A stub search: uniform over legal moves; ranking logit = number of marks."""
    del params, key
    legal = states.legal_action_mask
    weights = legal / jnp.sum(legal, axis=-1, keepdims=True)
    batch = legal.shape[0]
    marks = jnp.sum(states.observation.reshape(batch, -1), axis=-1).astype(jnp.float32)
    return SearchResult(
        action=jnp.argmax(legal, axis=-1).astype(jnp.int32),
        action_weights=weights,
        root_value=jnp.zeros((batch,)),
        network_value=jnp.zeros((batch,)),
        visit_distribution=weights,
        root_qvalues=jnp.full(legal.shape, 0.5),
        regret_rank=marks,
        regret_value=jnp.full((batch,), 0.1),
    )


@pytest.mark.parametrize(
    "control",
    [
        GoExploit(restart_prob=0.8, capacity=8, add_prob=0.5),
        RegretGuided(restart_prob=0.8, capacity=8),
    ],
    ids=["go_exploit", "rgsc"],
)
def test_restarted_games_are_legal_continuations(control):
    replay, per_round = play_tictactoe_with_restarts(
        _uniform_search, control, num_moves=30, random_opening_moves=2, replay_capacity=512)
    assert sum(float(metrics["restart_fraction"]) for metrics, _ in per_round) > 0
    metrics = per_round[-1][0]
    size = int(replay.size)
    data = jax.tree.map(lambda x: np.asarray(x[:size]), replay.data)
    assert not (data.policy_target * ~data.legal_action_mask).any()
    assert (data.regret_target >= 0).all() and np.isfinite(data.regret_target).all()
    if isinstance(control, RegretGuided):
        assert float(metrics["prb_size"]) > 0 and np.isfinite(metrics["prb_mean_regret"])


# --- Tiny runs of each configuration --------------------------------------------------


def _two_iterations(algorithm: str, *overrides: str) -> list[dict]:
    chex.clear_trace_counter()
    trainer = tiny_trainer(algorithm, *overrides)
    iteration = jax.jit(chex.assert_max_traces(trainer.iteration, n=1), donate_argnums=0)
    state = trainer.init(jax.random.key(0))
    history = []
    for i in range(2):
        state, metrics = iteration(state, jax.random.fold_in(jax.random.key(1), i))
        history.append(jax.device_get(metrics))
    for metrics in history:
        for name, value in metrics.items():
            assert np.isfinite(value), name
        assert metrics["illegal_moves"] == 0
    return history


def test_rgsc_runs_two_iterations_with_one_trace():
    history = _two_iterations("gumbel", "search_control.kind=rgsc", "search_control.capacity=4")
    last = history[-1]
    assert last["prb_size"] > 0 and last["restart_fraction"] > 0
    assert "rank_loss" in last and "regret_value_loss" in last


@SLOW
@pytest.mark.parametrize(
    ("algorithm", "overrides"),
    [
        ("exit", ("train.value_loss=bce",)),
        ("exit", ("train.policy_target=chosen_action", "train.dataset=batch")),
        ("exit", ("train.warm_start_iterations=1", "selfplay.one_position_per_game=true")),
        ("reinforce", ("search.num_simulations=0", "train.value_loss=bce")),
        ("alphazero", ("search_control.kind=go_exploit", "search_control.capacity=4")),
        ("alphazero", ("search_control.kind=rgsc",)),
        ("exit", ("search_control.kind=rgsc", "train.warm_start_iterations=1")),
    ],
    ids=["exit_bce", "exit_cat_batch", "exit_warm", "reinforce", "go_exploit", "rgsc", "exit_rgsc"],
)
def test_configuration_runs_two_iterations_with_one_trace(algorithm, overrides):
    _two_iterations(algorithm, *overrides)


@pytest.mark.parametrize(
    "name", ["hex4_exit", "hex4_exit_cat", "hex4_reinforce", "hex4_go_exploit", "hex4_rgsc"]
)
def test_configs_load(name):
    cfg = load_config(CONFIGS / f"{name}.yaml")
    assert cfg.name == name and cfg.env.size == 4
    if name.startswith("hex4_exit"):
        assert cfg.algorithm == "exit" and cfg.search.rule == "uct_p_nn"
        # w_a = 10 at 16 simulations: results/exit_w_a_tuning
        assert cfg.search.w_a == 10.0 and cfg.train.value_loss == "bce"
    if name == "hex4_rgsc":
        assert cfg.network.regret_heads and cfg.search_control.kind == "rgsc"
