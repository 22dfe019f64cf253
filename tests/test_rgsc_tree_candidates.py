"""RGSC restart candidates from search-tree nodes (``search_control.tree_candidates``).

A stub network with known regret heads (the ranking logit grows with the stones on the
board, so deep and terminal nodes rank highest) checks that each search reports its
top-ranked valid tree node, that terminal nodes, unexpanded slots and the root are
never candidates, that the tracker keeps such a node with position -1 and its regret
estimate, and that games restarted from one are legal continuations."""

from __future__ import annotations

import functools
import types

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest
from flax import struct
from train_fixtures import play_tictactoe_with_restarts, tiny_trainer

from curiosity_search import envs
from curiosity_search.nets.models import NetworkOutput
from curiosity_search.train import regret as regret_lib
from curiosity_search.train.restarts import RegretGuided, make_search_control
from curiosity_search.train.search_fns import (
    SearchResult,
    make_policy,
    make_recurrent_fn,
    make_search,
    root_from_output,
)
from curiosity_search.train.tree_candidates import TreeCandidate, tree_candidate

NUM_SIMULATIONS = 8
SEARCH_CFG = types.SimpleNamespace(
    rule="puct",
    max_depth=None,
    dirichlet_fraction=0.25,
    dirichlet_alpha=0.3,
    pb_c_init=1.25,
    pb_c_base=19652.0,
    puct_form="muzero",
    c_puct=1.0,
)


class StubNetwork:
    """Uniform policy, value 0; ranking logit ``-100 + 10 * stones + w . obs`` (``w`` in
    [0, 1): distinct logits, stones dominate); regret estimate ``0.01 * stones + 0.5``."""

    def __init__(self, obs_size: int, num_actions: int):
        self.weights = jnp.asarray(np.random.default_rng(0).uniform(0, 1, obs_size), jnp.float32)
        self.num_actions = num_actions

    def apply(self, params, observation):
        del params
        flat = observation.reshape(observation.shape[0], -1).astype(jnp.float32)
        stones = stones_of(observation)
        return NetworkOutput(
            policy_logits=jnp.zeros((flat.shape[0], self.num_actions)),
            value=jnp.zeros((flat.shape[0],)),
            regret_rank=-100.0 + 10.0 * stones + flat @ self.weights,
            regret_value=0.5 + 0.01 * stones,
        )


def stones_of(observation):
    """``[B]`` stones on the board: the first two planes (own, opponent's)."""
    planes = observation[..., :2].astype(jnp.float32)
    return jnp.sum(planes.reshape(planes.shape[0], -1), axis=-1)


def _hex():
    return envs.make("hex", size=3, swap=False)


def _midgame_states(env, batch, plies, key):
    """``[B]`` states after ``plies`` uniformly random moves (kept live)."""
    init_key, play_key = jax.random.split(key)
    states = jax.vmap(env.init)(jax.random.split(init_key, batch))
    for move_key in jax.random.split(play_key, plies):
        logits = jnp.where(states.legal_action_mask, 0.0, -jnp.inf)
        action = jax.random.categorical(move_key, logits, axis=-1)
        stepped = jax.vmap(env.step)(states, action, jax.random.split(move_key, batch))
        states = jax.tree.map(
            lambda new, old, ended=stepped.terminated: jnp.where(
                ended.reshape((-1,) + (1,) * (new.ndim - 1)), old, new
            ),
            stepped,
            states,
        )
    return states


@functools.partial(jax.jit, static_argnums=(0, 1))
def _search_and_tree(env, network, key, states):
    """The tree-candidate search's result, and the same search's tree by hand."""
    search = make_search(
        SEARCH_CFG, network, env, NUM_SIMULATIONS, self_play=True, tree_candidates=True
    )
    result = search(None, key, states)
    output = network.apply(None, states.observation)
    root = root_from_output(output, states, node_extras=True)
    policy_output = make_policy(SEARCH_CFG, self_play=True)(
        None,
        key,
        root,
        make_recurrent_fn(network, env, node_extras=True),
        num_simulations=NUM_SIMULATIONS,
        invalid_actions=~states.legal_action_mask,
    )
    return result, policy_output.search_tree


def _path(parents, actions, node):
    path = []
    while parents[node] >= 0:
        path.append(int(actions[node]))
        node = int(parents[node])
    return path[::-1]


def test_search_reports_the_top_ranked_valid_tree_node():
    env = _hex()
    network = StubNetwork(3 * 3 * 4, env.num_actions)
    batch = 6
    states = _midgame_states(env, batch, 3, jax.random.key(0))
    result, tree = jax.device_get(_search_and_tree(env, network, jax.random.key(1), states))
    candidate = result.tree_candidate
    slots = tree.embeddings.terminated.shape[1]
    assert slots == NUM_SIMULATIONS  # the last node's state is not stored
    stub = jax.device_get(network.apply(None, tree.embeddings.observation.reshape(-1, 3, 3, 4)))
    stub_rank = stub.regret_rank.reshape(batch, slots)
    terminal_outranked = 0
    for b in range(batch):
        expanded = tree.parents[b, :slots] >= 0
        # The stored extras are the network's heads on each node's own stored state.
        np.testing.assert_allclose(
            tree.node_extras["regret_rank"][b, :slots][expanded], stub_rank[b][expanded], rtol=1e-6
        )
        valid = expanded & ~tree.embeddings.terminated[b]
        assert candidate.valid[b] == valid.any()
        if not valid.any():
            continue
        best = int(np.argmax(np.where(valid, stub_rank[b], -np.inf)))
        assert best != 0
        np.testing.assert_allclose(candidate.rank_logit[b], stub_rank[b, best], rtol=1e-6)
        np.testing.assert_allclose(
            candidate.regret_value[b], tree.node_extras["regret_value"][b, best], rtol=1e-6
        )
        for got, want in zip(
            jax.tree.leaves(jax.tree.map(lambda x, b=b: x[b], candidate.states)),
            jax.tree.leaves(jax.tree.map(lambda x, b=b, i=best: x[b, i], tree.embeddings)),
            strict=True,
        ):
            np.testing.assert_array_equal(got, want)
        assert not candidate.states.terminated[b]
        terminal_outranked += bool(
            np.any(expanded & tree.embeddings.terminated[b] & (stub_rank[b] > stub_rank[b, best]))
        )
        # A real position: replaying the node's path from the root gives its state.
        replay = jax.tree.map(lambda x, b=b: x[b], states)
        for action in _path(tree.parents[b], tree.action_from_parent[b], best):
            assert replay.legal_action_mask[action]
            replay = env.step(replay, action)
        for got, want in zip(
            jax.tree.leaves(replay),
            jax.tree.leaves(jax.tree.map(lambda x, b=b: x[b], candidate.states)),
            strict=True,
        ):
            np.testing.assert_array_equal(got, want)
        stones = int(stones_of(candidate.states.observation[b : b + 1])[0])
        assert int(candidate.states.legal_action_mask[b].sum()) == 9 - stones
    assert candidate.valid.any()
    assert terminal_outranked > 0  # the test means something: terminals would have won


def test_terminal_unexpanded_last_and_root_nodes_are_never_picked():
    env = _hex()
    network = StubNetwork(3 * 3 * 4, env.num_actions)
    states = _midgame_states(env, 2, 2, jax.random.key(3))
    _, tree = _search_and_tree(env, network, jax.random.key(4), states)
    n = NUM_SIMULATIONS + 1
    # Node 1 is live (2 plies + 1 cannot end 3x3 Hex); hand-set node 2 terminal, node 3
    # unexpanded; the root, nodes 2, 3 and the last node N-1 (no stored state) outrank 1.
    terminated = tree.embeddings.terminated.at[:, 2].set(True)
    tree = tree.replace(
        embeddings=tree.embeddings.replace(terminated=terminated),
        parents=tree.parents.at[:, 3].set(-1),
    )
    ranks = jnp.zeros((2, n)).at[:, 1].set(5.0)
    ranks = ranks.at[:, 0].set(9.0).at[:, 2].set(9.0).at[:, 3].set(9.0).at[:, n - 1].set(9.0)
    regrets = jnp.arange(n, dtype=jnp.float32)[None].repeat(2, 0)
    candidate = jax.jit(tree_candidate)(tree, ranks, regrets)
    np.testing.assert_array_equal(candidate.valid, [True, True])
    np.testing.assert_array_equal(candidate.rank_logit, [5.0, 5.0])
    np.testing.assert_array_equal(candidate.regret_value, [1.0, 1.0])
    np.testing.assert_array_equal(candidate.states._step_count, tree.embeddings._step_count[:, 1])
    # No valid node at all: invalid.
    none = jax.jit(tree_candidate)(
        tree.replace(parents=jnp.full_like(tree.parents, -1)), ranks, regrets
    )
    assert not np.any(none.valid)


@struct.dataclass
class Payload:
    """A stand-in env state ``[B]``: ``tag`` names it."""

    legal_action_mask: jax.Array
    terminated: jax.Array
    tag: jax.Array


def _payload(values):
    return Payload(
        legal_action_mask=jnp.ones((len(values), 2), bool),
        terminated=jnp.zeros(len(values), bool),
        tag=jnp.asarray(values, jnp.int32),
    )


def _result(root_rank, node_rank, node_valid):
    batch = len(root_rank)
    zeros = jnp.zeros((batch,))
    return SearchResult(
        action=jnp.zeros(batch, jnp.int32),
        action_weights=jnp.ones((batch, 2)) / 2,
        root_value=zeros,
        network_value=zeros,
        visit_distribution=jnp.ones((batch, 2)) / 2,
        regret_rank=jnp.asarray(root_rank, jnp.float32),
        regret_value=jnp.full((batch,), 0.1),
        tree_candidate=TreeCandidate(
            states=_payload([100 + i for i in range(batch)]),
            rank_logit=jnp.asarray(node_rank, jnp.float32),
            regret_value=jnp.full((batch,), 0.7),
            valid=jnp.asarray(node_valid),
        ),
    )


def _tracker_after(control, result):
    roots = _payload([0, 1, 2])
    state = control.init(roots)
    state = control.observe(None, state, roots, result, jnp.array([4, 4, 4], jnp.int32))
    return state.games.tracker


def test_tracker_keeps_the_tree_node_with_position_minus_one_and_its_estimate():
    cfg = types.SimpleNamespace(
        kind="rgsc", restart_prob=0.5, capacity=4, tau=0.1, ema=0.5, tree_candidates=True
    )
    on = make_search_control(cfg, 9)
    off = make_search_control(cfg, 9, tree_candidates=False)
    assert on.tree_candidates and not off.tree_candidates
    # Game 0: the node outranks the root; game 1: the root wins; game 2: invalid node.
    result = _result([1.0, 3.0, 1.0], [2.0, 2.0, 9.0], [True, True, False])
    tracker = _tracker_after(on, result)
    np.testing.assert_array_equal(tracker.states.tag, [100, 1, 2])
    np.testing.assert_array_equal(tracker.position, [-1, 4, 4])
    np.testing.assert_allclose(tracker.rank_logit, [2.0, 3.0, 1.0])
    np.testing.assert_allclose(tracker.regret_estimate, [0.7, 0.1, 0.1])
    regrets = jnp.full((3, 9), 0.25)
    np.testing.assert_allclose(regret_lib.candidate_regret(tracker, regrets), [0.7, 0.25, 0.25])
    # Off: exactly the root-only tracker of before.
    old = _tracker_after(off, result)
    want = regret_lib.candidate_update(
        regret_lib.candidate_init(_payload([0, 1, 2])),
        _payload([0, 1, 2]),
        result.regret_rank,
        jnp.array([4, 4, 4]),
        result.regret_value,
        jnp.ones(3, bool),
    )
    for got, ref in zip(jax.tree.leaves(old), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(got, ref)
    with pytest.raises(ValueError, match="tree_candidates"):
        _tracker_after(on, result.replace(tree_candidate=None))


def test_selfplay_restarts_from_tree_nodes_are_legal_continuations():
    network = StubNetwork(3 * 3 * 2, 9)
    search = make_search(SEARCH_CFG, network, pgx.make("tic_tac_toe"), 4, self_play=True,
                         tree_candidates=True)
    control = RegretGuided(restart_prob=0.8, capacity=8, tree_candidates=True)
    _, per_round = play_tictactoe_with_restarts(
        search, control, num_moves=24, random_opening_moves=1, replay_capacity=256)
    restarted_seen = sum(float(metrics["restart_fraction"]) for metrics, _ in per_round)
    tree_positions = sum(int(np.sum(np.asarray(state.games.tracker.position) == -1))
                         for _, state in per_round)
    assert restarted_seen > 0 and tree_positions > 0
    buffer = per_round[-1][1].buffer
    valid = np.asarray(buffer.valid)
    stored = jax.tree.map(lambda x: np.asarray(x)[valid], buffer.states)
    marks = stored.observation.reshape(len(stored.terminated), -1).sum(axis=1)
    np.testing.assert_array_equal(stored.legal_action_mask.sum(axis=1), 9 - marks)
    assert np.isfinite(np.asarray(buffer.regrets)[valid]).all()


def test_config_key_defaults_on_for_rgsc_and_is_validated():
    from pathlib import Path

    from curiosity_search.config import load_config
    from curiosity_search.config.fields import ConfigError

    configs = Path(__file__).resolve().parents[1] / "configs"
    assert load_config(configs / "hex4_rgsc.yaml").search_control.tree_candidates is True
    off = load_config(configs / "hex4_rgsc.yaml", ["search_control.tree_candidates=false"])
    assert off.search_control.tree_candidates is False
    assert load_config(configs / "hex4_go_exploit.yaml").search_control.tree_candidates is False
    with pytest.raises(ConfigError, match="tree_candidates"):
        load_config(configs / "hex4_go_exploit.yaml", ["search_control.tree_candidates=true"])
    with pytest.raises(ConfigError):
        load_config(configs / "hex4_rgsc.yaml", ["search_control.tree_candidates=3"])


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["alphazero", "curiosity"])
def test_tiny_rgsc_run_with_tree_candidates(algorithm):
    """Two iterations train with finite metrics; curiosity takes the batched fallback."""
    trainer = tiny_trainer(algorithm, "search_control.kind=rgsc", "search_control.capacity=4")
    assert trainer.selfplay.control.tree_candidates
    iteration = jax.jit(trainer.iteration, donate_argnums=0)
    state = trainer.init(jax.random.key(0))
    for i in range(2):
        state, metrics = iteration(state, jax.random.fold_in(jax.random.key(1), i))
        metrics = jax.device_get(metrics)
        assert all(np.isfinite(value) for value in metrics.values())
        assert metrics["illegal_moves"] == 0
    assert metrics["prb_size"] > 0
