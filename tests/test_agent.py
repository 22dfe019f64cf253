"""Agents load from a run directory or a checkpoint and act legally without retracing."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import pytest
from _fake_trainer import FakeTrainer
from test_train_run import tiny_config

from curiosity_search.train import run
from curiosity_search.train.agent import load_agent, resolve_checkpoint


def _states(env, key, batch):
    def one(key):
        state = env.init(key)
        # One random move, so the batch is not all empty boards.
        mask = state.legal_action_mask.astype(jnp.float32)
        return env.step(state, jax.random.choice(key, mask.shape[0], p=mask / mask.sum()))

    return jax.jit(jax.vmap(one))(jax.random.split(key, batch))


def test_load_agent_from_run_and_checkpoint_dirs(tmp_path):
    trainers = []

    def build(cfg):
        trainers.append(FakeTrainer(cfg))
        return trainers[-1]

    cfg = tiny_config(train={"iterations": 2}, checkpoint={"every": 1})
    run.train(cfg, tmp_path, build_trainer=build)
    agent = load_agent(tmp_path, build_trainer=build)
    assert agent.iteration == 2 and agent.config == cfg and agent.num_simulations == 0
    older = load_agent(tmp_path / "checkpoints" / "1", build_trainer=build)
    assert older.iteration == 1
    assert resolve_checkpoint(tmp_path / "checkpoints") == (tmp_path.absolute(), 2)
    leaves_new, leaves_old = jax.tree.leaves(agent.params), jax.tree.leaves(older.params)
    assert any(not jnp.array_equal(a, b) for a, b in zip(leaves_new, leaves_old, strict=True))

    states = _states(agent.env, jax.random.key(1), 6)
    for n in (0, 0, 2, 2):
        actions = agent.act(jax.random.key(n), states, num_simulations=n)
        assert actions.shape == (6,)
        assert bool(jnp.all(states.legal_action_mask[jnp.arange(6), actions]))
    assert agent.trainer.act_traces == {0: 1, 2: 1}  # act twice, compiled once
    # The raw policy is deterministic: the argmax of the logits over legal moves.
    logits = agent.trainer.network.apply(agent.params, states.observation)
    expected = jnp.argmax(jnp.where(states.legal_action_mask, logits, -jnp.inf), axis=-1)
    assert jnp.array_equal(agent.act(jax.random.key(9), states), expected)


def test_load_agent_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such run directory"):
        load_agent(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        load_agent(tmp_path / "empty")
    cfg = tiny_config(train={"iterations": 1})
    run.train(cfg, tmp_path / "r", build_trainer=functools.partial(FakeTrainer))
    with pytest.raises(FileNotFoundError, match="not a complete checkpoint"):
        load_agent(tmp_path / "r" / "checkpoints" / "7")
