"""Search control: regrets, ranking losses, the prioritized regret buffer, the Go-Exploit
archive and restarts from stored pgx states. Everything runs under ``jax.jit``."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curiosity_search.envs.rollouts import uniform_legal
from curiosity_search.train import regret
from curiosity_search.train import restart_buffers as buffers

# --- Regret ---------------------------------------------------------------------------


def test_regret_matches_hand_computed_trajectories():
    # Game 0: player 0 wins; 4 recorded positions, movers alternate 0, 1, 0, 1.
    #   z per mover: +1, -1, +1, -1; errors (V - z)^2 = 0.25, 0.64, 0.04, 0.
    # Game 1: a draw; 2 recorded positions (movers 1, 0); errors 0.09, 0.36.
    # Padding holds garbage that must not leak into the regrets.
    values = jnp.array([[0.5, -0.2, 0.8, -1.0, 99.0], [0.3, -0.6, 7.0, 7.0, 7.0]])
    players = jnp.array([[0, 1, 0, 1, 0], [1, 0, 1, 0, 1]])
    valid = jnp.array([[True, True, True, True, False], [True, True, False, False, False]])
    final_rewards = jnp.array([[1.0, -1.0], [0.0, 0.0]])
    regrets = jax.jit(regret.regret_from_rewards)(values, players, valid, final_rewards)
    expected = np.array(
        [
            [(0.25 + 0.64 + 0.04 + 0.0) / 4, (0.64 + 0.04 + 0.0) / 3, 0.04 / 2, 0.0, 0.0],
            [(0.09 + 0.36) / 2, 0.36, 0.0, 0.0, 0.0],
        ]
    )
    np.testing.assert_allclose(regrets, expected, rtol=1e-6)
    # Flipping the winner flips every z: a confident, correct player 0 becomes wrong.
    flipped = regret.regret_from_rewards(values, players, valid, -final_rewards)
    np.testing.assert_allclose(flipped[0, 2:4], [(3.24 + 4.0) / 2, 4.0], rtol=1e-6)
    np.testing.assert_allclose(
        regret.first_position_regret(regrets, valid), expected[:, 0], rtol=1e-6
    )


def test_regret_from_per_position_outcomes_equals_reward_form():
    key_v, key_p, key_r, key_l = jax.random.split(jax.random.PRNGKey(0), 4)
    values = jax.random.uniform(key_v, (3, 6), minval=-1, maxval=1)
    players = jax.random.randint(key_p, (3, 6), 0, 2)
    rewards = jnp.sign(jax.random.normal(key_r, (3, 1))) * jnp.array([[1.0, -1.0]])
    valid = jnp.arange(6)[None, :] < jax.random.randint(key_l, (3, 1), 1, 7)
    outcomes = jnp.take_along_axis(rewards, players, axis=1)
    brute = np.zeros((3, 6))
    for b in range(3):
        length = int(valid[b].sum())
        errors = (np.asarray(values[b]) - np.asarray(outcomes[b])) ** 2
        for t in range(length):
            brute[b, t] = errors[t:length].mean()
    np.testing.assert_allclose(regret.trajectory_regret(values, outcomes, valid), brute, rtol=1e-5)
    from_rewards = regret.regret_from_rewards(values, players, valid, rewards)
    np.testing.assert_allclose(from_rewards, brute, rtol=1e-5)


# --- Ranking and regret-value losses ----------------------------------------------------


def test_ranking_loss_value_and_gradient_direction():
    regrets = jnp.array([0.0, 0.1, 1.0, 0.2, 5.0])
    mask = jnp.array([True, True, True, True, False])  # the 5.0 entry does not take part
    gamma = jnp.zeros(5)
    loss = regret.ranking_loss(gamma, regrets, mask)
    np.testing.assert_allclose(loss, -np.log(np.mean(np.exp([0.0, 0.1, 1.0, 0.2]))), rtol=1e-6)

    grad_fn = jax.jit(jax.grad(regret.ranking_loss))
    grad = grad_fn(gamma, regrets, mask)
    assert grad[4] == 0.0 and jnp.all(jnp.isfinite(grad))
    for _ in range(50):
        gamma = gamma - 0.5 * grad_fn(gamma, regrets, mask)
    before = jax.nn.softmax(jnp.zeros(4))
    after = jax.nn.softmax(gamma[:4])
    assert after[2] > before[2] and int(jnp.argmax(after)) == 2
    assert after[0] < before[0]  # the zero-regret state loses probability
    # Entirely masked: zero loss, finite zero gradient.
    none = jnp.zeros(5, bool)
    assert regret.ranking_loss(gamma, regrets, none) == 0.0
    assert jnp.all(grad_fn(gamma, regrets, none) == 0.0)


def test_regret_value_loss_is_masked_mse():
    predictions = jnp.array([0.5, 0.0, 3.0])
    regrets = jnp.array([0.25, 0.5, 0.0])
    mask = jnp.array([True, True, False])
    np.testing.assert_allclose(
        regret.regret_value_loss(predictions, regrets, mask), (0.0625 + 0.25) / 2, rtol=1e-6
    )


def test_candidate_tracker_keeps_top_ranked_state():
    states = {"cell": jnp.zeros((2, 3))}
    tracker = regret.candidate_init(states)
    assert not jnp.any(regret.candidate_found(tracker))
    update = jax.jit(regret.candidate_update)
    tracker = update(
        tracker,
        {"cell": jnp.ones((2, 3))},
        jnp.array([0.5, 0.1]),
        jnp.array([0, 0]),
        jnp.zeros(2),
        jnp.array([True, True]),
    )
    # A tree node ranks higher in game 0 only; game 1's contender is masked out.
    tracker = update(
        tracker,
        {"cell": 2 * jnp.ones((2, 3))},
        jnp.array([0.9, 9.0]),
        jnp.array([-1, -1]),
        jnp.array([0.7, 0.7]),
        jnp.array([True, False]),
    )
    tracker = update(
        tracker,
        {"cell": 3 * jnp.ones((2, 3))},
        jnp.array([0.2, 0.3]),
        jnp.array([2, 2]),
        jnp.zeros(2),
        jnp.array([True, True]),
    )
    np.testing.assert_array_equal(tracker.states["cell"][:, 0], [2.0, 3.0])
    regrets = jnp.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    np.testing.assert_allclose(regret.candidate_regret(tracker, regrets), [0.7, 0.6])
    reset = regret.candidate_reset(tracker, jnp.array([True, False]))
    np.testing.assert_array_equal(regret.candidate_found(reset), [False, True])


# --- Prioritized regret buffer ------------------------------------------------------------


def _payload_states(ids) -> dict:
    ids = jnp.asarray(ids, jnp.int32)
    return {"id": ids, "board": jnp.stack([ids, -ids], axis=-1).astype(jnp.float32)}


_offer = jax.jit(buffers.prb_offer)
_update = jax.jit(buffers.prb_update_regret)


def _buffer_with(regrets) -> buffers.RegretBuffer:
    buffer = buffers.prb_init(_payload_states(0), capacity=len(regrets))
    count = len(regrets)
    return _offer(
        buffer,
        _payload_states(np.arange(1, count + 1)),
        jnp.asarray(regrets),
        jnp.ones(count, bool),
    )


def test_prb_inserts_while_there_is_room():
    buffer = buffers.prb_init(_payload_states(0), capacity=4)
    buffer = _offer(
        buffer,
        _payload_states([7, 8, 9]),
        jnp.array([0.3, 0.0, 0.5]),
        jnp.array([True, True, False]),
    )
    np.testing.assert_array_equal(buffer.valid, [True, True, False, False])
    np.testing.assert_array_equal(buffer.states["id"][:2], [7, 8])
    np.testing.assert_allclose(buffer.regrets[:2], [0.3, 0.0])  # zero regret enters too
    np.testing.assert_array_equal(buffer.entry_ids[:2], [0, 1])
    assert int(buffer.total_inserted) == 2


def test_prb_replaces_the_minimum_and_rejects_below_it():
    buffer = _buffer_with([0.5, 0.2, 0.9])  # ids 1, 2, 3 in slots 0, 1, 2
    replaced = _offer(buffer, _payload_states([10]), jnp.array([0.3]), jnp.array([True]))
    np.testing.assert_array_equal(replaced.states["id"], [1, 10, 3])  # the 0.2 entry went
    np.testing.assert_allclose(replaced.regrets, [0.5, 0.3, 0.9])
    np.testing.assert_array_equal(replaced.states["board"][1], [10.0, -10.0])
    assert int(replaced.entry_ids[1]) == 3
    for low in (0.1, 0.2):  # below the minimum, and equal to it (must strictly beat it)
        rejected = _offer(buffer, _payload_states([11]), jnp.array([low]), jnp.array([True]))
        np.testing.assert_array_equal(rejected.states["id"], [1, 2, 3])
        np.testing.assert_allclose(rejected.regrets, buffer.regrets)
    masked = _offer(buffer, _payload_states([12]), jnp.array([9.0]), jnp.array([False]))
    np.testing.assert_array_equal(masked.states["id"], [1, 2, 3])


def _sequential_reference(entries, capacity, offers):
    """Offers one at a time: enter if room or strictly above the minimum (replace it;
    among tied minima the latest inserted, the largest id here)."""
    entries = list(entries)
    for score, ident in offers:
        if len(entries) < capacity:
            entries.append((score, ident))
        else:
            low = min(range(len(entries)), key=lambda i: (entries[i][0], -entries[i][1]))
            if score > entries[low][0]:
                entries[low] = (score, ident)
    return entries


def test_prb_batched_offers_match_sequential_offers():
    capacity, batch = 5, 7
    rng = np.random.default_rng(0)
    buffer = buffers.prb_init(_payload_states(0), capacity=capacity)
    reference: list = []
    next_id = 1
    for _ in range(6):
        regrets = np.round(rng.uniform(0, 1, batch), 1).astype(np.float32)  # ties happen
        mask = rng.uniform(size=batch) < 0.7
        ids = np.arange(next_id, next_id + batch)
        next_id += batch
        buffer = _offer(buffer, _payload_states(ids), jnp.asarray(regrets), jnp.asarray(mask))
        reference = _sequential_reference(
            reference,
            capacity,
            [(float(r), int(i)) for r, i, m in zip(regrets, ids, mask, strict=True) if m],
        )
        got = sorted(
            (float(r), int(i))
            for r, i, v in zip(buffer.regrets, buffer.states["id"], buffer.valid, strict=True)
            if v
        )
        assert got == sorted(reference)
        # Surviving entries keep their slot; entry ids are unique among occupied slots.
        live_ids = np.asarray(buffer.entry_ids)[np.asarray(buffer.valid)]
        assert len(set(live_ids.tolist())) == len(live_ids)


def test_prb_update_regret_ema():
    buffer = _buffer_with([0.5, 0.2, 0.9])
    updated = _update(
        buffer,
        jnp.array([0, 2, 2, 1, -1]),
        jnp.array([0.1, 0.1, 0.3, 5.0, 5.0]),
        jnp.array([True, True, True, False, True]),
        0.5,
    )
    # slot 0: 0.5 * 0.5 + 0.5 * 0.1; slot 2: two games, mean 0.2; slot 1 masked; -1 ignored.
    np.testing.assert_allclose(updated.regrets, [0.3, 0.2, 0.55], rtol=1e-6)
    full = _update(buffer, jnp.array([1]), jnp.array([0.0]), jnp.array([True]), 1.0)
    np.testing.assert_allclose(full.regrets, [0.5, 0.0, 0.9], rtol=1e-6)
    # A stale update (slot refilled since the game restarted) is dropped.
    refilled = _offer(buffer, _payload_states([10]), jnp.array([0.3]), jnp.array([True]))
    stale_id = buffer.entry_ids[1:2]
    stale = _update(refilled, jnp.array([1]), jnp.array([0.0]), jnp.array([True]), 0.5, stale_id)
    np.testing.assert_allclose(stale.regrets, refilled.regrets)
    fresh = _update(
        refilled, jnp.array([1]), jnp.array([0.0]), jnp.array([True]), 0.5, refilled.entry_ids[1:2]
    )
    np.testing.assert_allclose(fresh.regrets[1], 0.15, rtol=1e-6)


def test_prb_sampling_is_proportional_to_regret_power():
    buffer = buffers.prb_init(_payload_states(0), capacity=6)
    buffer = _offer(
        buffer,
        _payload_states([1, 2, 3, 4, 5]),
        jnp.array([0.1, 0.2, 0.4, 0.0, 5.0]),
        jnp.array([True] * 4 + [False]),
    )
    sample = jax.jit(buffers.prb_sample, static_argnums=2)
    num = 20000
    indices, states = sample(jax.random.PRNGKey(1), buffer, num, 0.5)
    np.testing.assert_array_equal(states["id"], np.asarray(buffer.states["id"])[indices])
    frequencies = np.bincount(np.asarray(indices), minlength=6) / num
    weights = np.array([0.1, 0.2, 0.4, 1e-6, 0, 0]) ** 2  # R^(1/tau), tau = 0.5
    expected = weights / weights.sum()
    np.testing.assert_allclose(frequencies, expected, atol=0.015)
    assert frequencies[4] == 0 and frequencies[5] == 0  # never an empty slot
    # The default tau = 0.1 (R^10) puts nearly all mass on the top entry.
    indices, _ = sample(jax.random.PRNGKey(2), buffer, 2000, buffers.DEFAULT_TAU)
    assert np.mean(np.asarray(indices) == 2) > 0.99


# --- Go-Exploit archive ---------------------------------------------------------------------


def test_archive_is_fifo_and_samples_uniformly():
    archive = buffers.archive_init(_payload_states(0), capacity=4)
    add = jax.jit(buffers.archive_add)
    archive = add(archive, _payload_states([1, 2, 3]), jnp.array([True, False, True]))
    np.testing.assert_array_equal(archive.valid, [True, True, False, False])
    np.testing.assert_array_equal(archive.states["id"][:2], [1, 3])
    archive = add(archive, _payload_states([4, 5, 6]), jnp.ones(3, bool))
    np.testing.assert_array_equal(archive.states["id"], [6, 3, 4, 5])  # 1 was oldest
    assert int(archive.size) == 4 and int(archive.insert_index) == 1
    indices, states = jax.jit(buffers.archive_sample, static_argnums=2)(
        jax.random.PRNGKey(0), archive, 8000
    )
    frequencies = np.bincount(np.asarray(indices), minlength=4) / 8000
    np.testing.assert_allclose(frequencies, 0.25, atol=0.03)
    np.testing.assert_array_equal(states["id"], np.asarray(archive.states["id"])[indices])
    half = buffers.archive_init(_payload_states(0), capacity=4)
    half = add(half, _payload_states([1, 2]), jnp.ones(2, bool))
    indices, _ = buffers.archive_sample(jax.random.PRNGKey(0), half, 1000)
    assert set(np.asarray(indices).tolist()) == {0, 1}


# --- The restart decision ---------------------------------------------------------------


def test_choose_starts_probability_and_empty_buffer():
    choose = jax.jit(buffers.choose_starts)
    fresh = _payload_states(np.zeros(2000, np.int32))
    empty = buffers.prb_init(_payload_states(0), capacity=3)
    _, restarted, indices = choose(jax.random.PRNGKey(0), fresh, empty, 1.0, 0.1)
    assert not jnp.any(restarted) and jnp.all(indices == -1)
    buffer = _buffer_with([0.5, 0.2, 0.9])
    for prob in (0.0, 0.5, 1.0):
        starts, restarted, indices = choose(jax.random.PRNGKey(1), fresh, buffer, prob, 1.0)
        assert abs(float(jnp.mean(restarted)) - prob) < 0.05
        stored = np.asarray(buffer.states["id"])[np.maximum(np.asarray(indices), 0)]
        np.testing.assert_array_equal(starts["id"], np.where(restarted, stored, 0))
        np.testing.assert_array_equal(indices < 0, ~restarted)
    starting = jnp.arange(2000) % 2 == 0
    _, restarted, _ = buffers.choose_starts(
        jax.random.PRNGKey(2), fresh, buffer, 1.0, 0.1, starting
    )
    np.testing.assert_array_equal(restarted, starting)
    archive = buffers.archive_add(
        buffers.archive_init(_payload_states(0), 3), _payload_states([4]), jnp.array([True])
    )
    starts, restarted, indices = choose(jax.random.PRNGKey(3), fresh, archive, 1.0, 0.1)
    assert jnp.all(restarted) and jnp.all(indices == 0) and jnp.all(starts["id"] == 4)


def _random_play(env, key, states, num_moves):
    """``num_moves`` uniformly random legal moves in every game ``[B]``.

    Returns ``(final states [B], states before each move [M, B], move was legal [M, B],
    rewards of each step [M, B, 2])``.
    """

    def step(states, move_key):
        action_key, step_key = jax.random.split(move_key)
        action = uniform_legal(action_key, states.legal_action_mask)
        legal = jnp.take_along_axis(states.legal_action_mask, action[:, None], axis=1)[:, 0]
        batch = action.shape[0]
        stepped = jax.vmap(env.step)(states, action, jax.random.split(step_key, batch))
        return stepped, (states, legal, stepped.rewards)

    return jax.lax.scan(step, states, jax.random.split(key, num_moves))


def _take(x, index):
    return x[index]


@functools.partial(jax.jit, static_argnums=(0, 1))
def _store_restart_and_play(env, batch, key):
    """Random games -> every visited state (terminals too) offered to a PRB and an
    archive -> every game restarted from each -> random play to the end."""
    init_key, play_key, regret_key, fresh_key, prb_key, archive_key, end_key = jax.random.split(
        key, 7
    )
    num_cells = 9
    states = jax.vmap(env.init)(jax.random.split(init_key, batch))
    final, (visited, _, _) = _random_play(env, play_key, states, num_cells)
    flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), visited)
    flat = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), flat, final)  # + terminals
    count = (num_cells + 1) * batch
    example = jax.tree.map(functools.partial(_take, index=0), states)
    buffer = buffers.prb_offer(
        buffers.prb_init(example, capacity=16),
        flat,
        jax.random.uniform(regret_key, (count,)),
        jnp.ones(count, bool),
    )
    archive = buffers.archive_add(buffers.archive_init(example, 16), flat, jnp.ones(count, bool))
    fresh = jax.vmap(env.init)(jax.random.split(fresh_key, batch))
    prb_starts, prb_restarted, prb_indices = buffers.choose_starts(prb_key, fresh, buffer, 1.0)
    archive_starts, archive_restarted, archive_indices = buffers.choose_starts(
        archive_key, fresh, archive, 1.0
    )
    stored = jax.tree.map(
        lambda a, b: jnp.concatenate([a[prb_indices], b[archive_indices]]),
        buffer.states,
        archive.states,
    )
    starts = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), prb_starts, archive_starts)
    end, (trail, legal, rewards) = _random_play(env, end_key, starts, num_cells)
    return {
        "offered_terminal": jnp.any(flat.terminated),
        "stored_terminal": jnp.any(buffer.states.terminated) | jnp.any(archive.states.terminated),
        "stored_valid": jnp.all(buffer.valid) & jnp.all(archive.valid),
        "restarted": jnp.concatenate([prb_restarted, archive_restarted]),
        "starts": starts,
        "stored": stored,
        "legal": legal | trail.terminated,
        "end_terminated": end.terminated,
        "live": ~trail.terminated,
        "legal_counts": jnp.sum(trail.legal_action_mask, axis=-1),
        "stones": trail._step_count,
        "outcome": jnp.sum(rewards, axis=0),  # [2B, 2], nonzero only on the final step
    }


def _env(name):
    from curiosity_search import envs

    if name == "hex":
        return envs.make("hex", size=3, swap=False)
    return envs.make(name)


@pytest.mark.parametrize("name", ["tic_tac_toe", "hex"])
def test_restarts_from_stored_pgx_states_are_legal_continuations(name):
    out = jax.device_get(_store_restart_and_play(_env(name), 8, jax.random.PRNGKey(0)))
    assert out["offered_terminal"]  # finished states were offered ...
    assert not out["stored_terminal"]  # ... and refused
    assert out["stored_valid"] and np.all(out["restarted"])
    for got, want in zip(
        jax.tree.leaves(out["starts"]), jax.tree.leaves(out["stored"]), strict=True
    ):
        np.testing.assert_array_equal(got, want)  # the restart is the stored state
    assert np.all(out["legal"])  # every move played from a live state was legal
    assert np.all(out["end_terminated"])  # every restarted game ends within the board
    live = out["live"]
    # One stone per move (no swap): the legal moves are exactly the empty cells.
    np.testing.assert_array_equal(
        np.where(live, out["legal_counts"], 0), np.where(live, 9 - out["stones"], 0)
    )
    outcome = out["outcome"]
    np.testing.assert_array_equal(outcome.sum(axis=-1), 0.0)  # zero-sum
    assert np.all(np.isin(outcome, [-1.0, 0.0, 1.0]))
    if name == "hex":
        assert np.all(np.abs(outcome[:, 0]) == 1.0)  # Hex has no draws


def test_end_of_game_bookkeeping_compiles_once_with_traced_hyperparameters():
    """The flow self-play runs when games end, as one jitted function: regrets, offers
    from fresh games, EMA updates from restarted games, new starts. Sweeping the floats
    (lambda, alpha, tau) must not recompile."""
    traces = []

    @jax.jit
    def end_of_games(key, buffer, tracker, done, restarted, indices, ids, rewards, hyper):
        traces.append(None)
        restart_prob, alpha, tau = hyper
        values = jnp.full((4, 3), 0.5)
        players = jnp.array([[0, 1, 0]] * 4)
        valid = jnp.ones((4, 3), bool)
        regrets = regret.regret_from_rewards(values, players, valid, rewards)
        offer = done & ~restarted & regret.candidate_found(tracker)
        buffer = buffers.prb_offer(
            buffer, tracker.states, regret.candidate_regret(tracker, regrets), offer
        )
        buffer = buffers.prb_update_regret(
            buffer, indices, regret.first_position_regret(regrets, valid), done & restarted,
            alpha, ids,
        )
        fresh = _payload_states(jnp.zeros(4, jnp.int32))
        starts = buffers.choose_starts(key, fresh, buffer, restart_prob, tau, starting=done)
        return buffer, starts

    tracker = regret.candidate_update(
        regret.candidate_init(_payload_states(jnp.zeros(4, jnp.int32))),
        _payload_states(jnp.arange(1, 5)),
        jnp.ones(4),
        jnp.array([0, 1, 2, 0]),
        jnp.zeros(4),
        jnp.ones(4, bool),
    )
    buffer = buffers.prb_init(_payload_states(0), capacity=3)
    rewards = jnp.array([[1.0, -1.0]] * 4)
    done = jnp.array([True, True, False, True])
    args = (jnp.zeros(4, bool), jnp.full(4, -1, jnp.int32), jnp.full(4, -1, jnp.int32), rewards)
    buffer, (_, restarted, _) = end_of_games(
        jax.random.PRNGKey(0), buffer, tracker, done, *args, (0.5, 0.5, 0.1)
    )
    # Games 0, 1, 3 offered regrets (0.25+2.25+0.25)/3, (2.25+0.25)/2, (0.25+2.25+0.25)/3.
    np.testing.assert_array_equal(buffer.valid, [True, True, True])
    np.testing.assert_allclose(sorted(buffer.regrets), [2.75 / 3, 2.75 / 3, 1.25], rtol=1e-6)
    assert not restarted[2]
    ids = buffer.entry_ids[jnp.array([0, 1, 2, 0])]
    restart_args = (jnp.ones(4, bool), jnp.array([0, 1, 2, 0], jnp.int32), ids, rewards)
    updated, _ = end_of_games(
        jax.random.PRNGKey(1), buffer, tracker, done, *restart_args, (0.9, 1.0, 0.5)
    )
    # alpha = 1: slots 0 and 1 take their restarted games' first-position regret.
    np.testing.assert_allclose(updated.regrets[:2], 2.75 / 3, rtol=1e-6)
    np.testing.assert_allclose(updated.regrets[2], buffer.regrets[2])  # game 2 not done
    assert len(traces) == 1
