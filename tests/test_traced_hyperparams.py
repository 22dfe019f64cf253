"""Traced hyperparameters (lr, kappa, c_puct, pb_c_init, c_visit, c_scale, uct_c, w_a):
one program for a sweep over them, the same numbers as compiled-in constants, really
used, and checkpoints (which never hold them)."""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from train_fixtures import tiny_config

from curiosity_search.train import run
from curiosity_search.train.checkpoint import CheckpointStore, HostCounters, checkpoint_dir
from curiosity_search.train.hyperparams import (
    hyperparameters_from_config,
    with_config_hyperparameters,
)
from curiosity_search.train.optimizers import make_optimizer
from curiosity_search.train.run_dir import config_dict
from curiosity_search.train.search_fns import SearchParams, make_search
from curiosity_search.train.state import TrainState
from curiosity_search.train.trainer import build_trainer

CURIOSITY = ("network.value_head=dirichlet",)  # tic-tac-toe has draws
RUN = (
    "train.iterations=2",
    "checkpoint.every=1",
    "logging.progress=false",
    "logging.tensorboard=false",
    "eval.every=0",
    "eval.num_positions=0",
)


def lowered_text(algorithm: str, *overrides: str) -> str:
    """The StableHLO of the jitted iteration of a tiny trainer (lowered, not compiled)."""
    trainer = build_trainer(tiny_config(algorithm, *overrides))
    abstract = jax.eval_shape(trainer.init, jax.random.key(0))
    return jax.jit(trainer.iteration).lower(abstract, jax.random.key(1)).as_text()


@pytest.mark.parametrize(
    ("algorithm", "common", "first", "second"),
    [
        ("curiosity", CURIOSITY, "search.kappa=1.5", "search.kappa=40.0"),
        ("alphazero", ("search.puct_form=alphago",), "search.c_puct=0.5", "search.c_puct=3.0"),
        ("alphazero", (), "search.pb_c_init=0.5", "search.pb_c_init=3.0"),
        ("gumbel", (), "search.c_scale=0.1", "search.c_scale=1.0"),
        ("gumbel", (), "search.c_visit=10.0", "search.c_visit=50.0"),
        ("exit", (), "search.w_a=2.0", "search.w_a=100.0"),
        ("exit", (), "search.uct_c=0.5", "search.uct_c=2.0"),
        ("gumbel", (), "optimizer.learning_rate=1e-3", "optimizer.learning_rate=0.05"),
        (
            "gumbel",
            ("optimizer.name=adamw", "optimizer.weight_decay=0.01",
             "optimizer.schedule=warmup_cosine", "optimizer.warmup_steps=2"),
            "optimizer.learning_rate=1e-3",
            "optimizer.learning_rate=0.05",
        ),
    ],
)
def test_swept_floats_lower_to_the_same_program(algorithm, common, first, second):
    assert lowered_text(algorithm, *common, first) == lowered_text(algorithm, *common, second)


def test_a_static_choice_lowers_to_another_program():
    """The check above can fail: the simulation count is compiled in."""
    assert lowered_text("gumbel", "search.num_simulations=4") != lowered_text(
        "gumbel", "search.num_simulations=6"
    )


def _two_iterations(trainer, state):
    iteration = jax.jit(trainer.iteration)
    for i in range(2):
        state, metrics = iteration(state, jax.random.fold_in(jax.random.key(1), i))
    assert int(metrics["updates"]) > 0  # the updates ran (the replay had data)
    return jax.device_get(state.params)


@pytest.mark.parametrize(
    ("overrides", "optimizer_args", "atol"),
    [
        # The default optimizer (Adam, constant): -(1 * u) * lr == -lr * u, bit for bit.
        ((), dict(name="adam", grad_clip=1.0), 0.0),
        # Cosine: (s * lr) * u vs (s * 1) * u * lr round differently (1 ulp per update),
        # then Adam's normalisation of the next iteration's gradients amplifies it.
        (
            ("optimizer.name=adamw", "optimizer.weight_decay=0.1",
             "optimizer.schedule=cosine", "optimizer.learning_rate=0.02"),
            dict(name="adamw", weight_decay=0.1, schedule="cosine", grad_clip=1.0),
            1e-6,
        ),
    ],
)
def test_traced_learning_rate_matches_a_compiled_in_one(overrides, optimizer_args, atol):
    cfg = tiny_config("gumbel", *overrides)
    traced = build_trainer(cfg)
    opt = cfg.optimizer
    baked = make_optimizer(
        optimizer_args.pop("name"),
        opt.learning_rate,  # the old way: the schedule's peak compiled in
        total_steps=cfg.train.iterations * cfg.train.updates_per_iteration,
        **optimizer_args,
    )
    constant = build_trainer(cfg, optimizer=baked)
    state = traced.init(jax.random.key(0))
    # Same optimizer state structure either way (old checkpoints' opt_state restores).
    assert jax.tree.structure(state.opt_state) == jax.tree.structure(
        constant.optimizer.init(state.params)
    )
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=0.0, atol=atol),
        _two_iterations(traced, state),
        _two_iterations(constant, state),
    )


def test_learning_rate_is_used():
    trainer = build_trainer(tiny_config("gumbel"))
    state = trainer.init(jax.random.key(0))
    faster = state.replace(hyperparams=state.hyperparams.replace(learning_rate=jnp.float32(0.1)))
    slow, fast = _two_iterations(trainer, state), _two_iterations(trainer, faster)
    initial = jax.device_get(state.params)

    def moved(params):
        leaves = jax.tree.leaves(jax.tree.map(lambda a, b: np.abs(a - b).max(), params, initial))
        return max(leaves)

    assert moved(fast) > 10 * moved(slow) > 0


def test_kappa_is_used_and_two_values_trace_once():
    chex.clear_trace_counter()
    trainer = build_trainer(tiny_config("curiosity", *CURIOSITY))
    iteration = jax.jit(chex.assert_max_traces(trainer.iteration, n=1))
    state = trainer.init(jax.random.key(0))
    key = jax.random.key(3)
    results = []
    for kappa in (0.05, 50.0):
        hyperparams = state.hyperparams.replace(kappa=jnp.float32(kappa))
        new_state, _ = iteration(state.replace(hyperparams=hyperparams), key)
        assert new_state.hyperparams.kappa == jnp.float32(kappa)  # returned unchanged
        results.append(jax.device_get(new_state.records.trajectory.policy_target))
    assert not np.allclose(results[0], results[1])


def _search_weights(cfg: Any, overrides: dict[str, float] | None) -> np.ndarray:
    """Root action weights of a 16-simulation search from the opening, on a fixed net.

    ``overrides=None`` searches with plain params (the config's constants); otherwise
    with ``SearchParams`` whose hyperparams are the config's with ``overrides``.
    """
    trainer = build_trainer(cfg)
    states = jax.vmap(trainer.env.init)(jax.random.split(jax.random.key(0), 4))
    params = trainer.network.init(jax.random.key(5), states.observation)
    search = make_search(cfg.search, trainer.network, trainer.env, 16, self_play=False)
    if overrides is not None:
        hyperparams = hyperparameters_from_config(cfg).replace(
            **{name: jnp.float32(value) for name, value in overrides.items()}
        )
        params = SearchParams(params, hyperparams)
    return np.asarray(jax.jit(search)(params, jax.random.key(2), states).action_weights)


@pytest.mark.parametrize(
    ("algorithm", "common", "name", "values"),
    [
        ("alphazero", ("search.puct_form=alphago",), "c_puct", (0.0, 20.0)),
        ("alphazero", (), "pb_c_init", (0.0, 20.0)),
        # ~90 s of compilation; test_kappa_is_used_and_two_values_trace_once covers kappa
        pytest.param("curiosity", CURIOSITY, "kappa", (0.05, 50.0), marks=pytest.mark.slow),
        ("gumbel", (), "c_scale", (0.01, 10.0)),
        ("exit", (), "w_a", (0.0, 100.0)),
        ("exit", ("search.w_a=0.5",), "uct_c", (0.0, 5.0)),
    ],
)
def test_search_reads_the_traced_value(algorithm, common, name, values):
    cfg = tiny_config(algorithm, *common)
    constant = _search_weights(cfg, None)
    # The config's value, traced, gives the constant path's result...
    same = _search_weights(cfg, {name: float(getattr(cfg.search, name))})
    np.testing.assert_allclose(same, constant, rtol=1e-5, atol=1e-6)
    # ...and another value another result.
    low, high = (_search_weights(cfg, {name: value}) for value in values)
    assert not np.allclose(low, high)


@struct.dataclass
class TrainStateBeforeHyperparams:
    """``TrainState`` as it was before ``hyperparams``: what old checkpoints hold."""

    params: Any
    opt_state: Any
    replay: Any
    games: Any
    records: Any
    counters: Any
    control: Any = None


def test_old_checkpoint_restores_and_resumes_with_config_values(tmp_path):
    cfg = tiny_config("alphazero", *RUN)
    trainer = build_trainer(cfg)
    init_key = jax.random.fold_in(jax.random.key(cfg.seed), run.INIT_STREAM)
    state = trainer.init(init_key)
    old = TrainStateBeforeHyperparams(
        **{name: getattr(state, name) for name in TrainStateBeforeHyperparams.__dataclass_fields__}
    )
    with CheckpointStore(checkpoint_dir(tmp_path)) as store:
        store.save(old, HostCounters(iteration=1, config=config_dict(cfg)))
        restored, counters = store.restore(state)
    assert counters.iteration == 1 and isinstance(restored, TrainState)
    assert restored.hyperparams is None
    chex.assert_trees_all_equal(restored.params, state.params)
    chex.assert_trees_all_equal(restored.opt_state, state.opt_state)

    result = run.train(cfg, tmp_path, resume=True)
    assert result.ok and result.iterations == 2
    with CheckpointStore(checkpoint_dir(tmp_path), read_only=True) as store:
        final, _ = store.restore(state, 2)
    assert final.hyperparams is None  # the config's, never written (CONFIG_FIELDS)


def test_checkpoints_do_not_hold_the_hyperparameters(tmp_path):
    # They are the config's: saved as None, so a version with other hyperparameter
    # fields still restores; a resume takes them from the config.
    cfg = tiny_config("gumbel", *RUN)
    trainer = build_trainer(cfg)
    state = trainer.init(jax.random.fold_in(jax.random.key(cfg.seed), run.INIT_STREAM))
    stale = jax.tree.map(lambda _: jnp.float32(0.5), hyperparameters_from_config(cfg))
    with CheckpointStore(checkpoint_dir(tmp_path)) as store:
        store.save(state.replace(hyperparams=stale),
                   HostCounters(iteration=1, config=config_dict(cfg)))
        restored, _ = store.restore(state)
    assert restored.hyperparams is None
    chex.assert_trees_all_equal(restored.params, state.params)
    assert run.train(cfg, tmp_path, resume=True).iterations == 2
    # What run.train puts in a restored state: the config's values.
    chex.assert_trees_all_close(with_config_hyperparameters(restored, cfg).hyperparams,
                                hyperparameters_from_config(cfg))
