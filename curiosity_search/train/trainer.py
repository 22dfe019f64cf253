"""``build_trainer(cfg)``: the env, network, optimizer and the one compiled iteration.

``Trainer.iteration(state, key) -> (state, metrics)`` runs ``S`` self-play moves in
every game (search, targets, replay writes) and then ``K`` optimizer updates on batches
sampled uniformly from the replay. It is a pure function; the caller jits it once::

    trainer = build_trainer(cfg)
    state = trainer.init(jax.random.key(cfg.seed))
    iteration = jax.jit(trainer.iteration, donate_argnums=0)
    for i in range(cfg.train.iterations):
        state, metrics = iteration(state, jax.random.fold_in(root_key, i))

Updates are skipped (parameters and optimizer state left unchanged) while the replay
buffer is still empty, which happens in the first iterations before any game ends.

Static vs traced (DESIGN.md): the shapes, simulation counts, search rule and network
are compiled in; the learning rate and the search's exploration constants (``kappa``,
``c_puct``, ``c_visit``, ``w_a``, ...: ``hyperparams.Hyperparameters``) are read from
``state.hyperparams``, traced, so configs that differ only in them lower to the same
program. ``init`` fills them from the config; the iteration returns them unchanged.
Self-play's search gets them inside its params (``search_fns.SearchParams``, or
``WarmStartParams.hyperparams``); the optimizer is built at learning rate 1 (its
schedule's shape) and each update is multiplied by ``hyperparams.learning_rate``
(``optimizers.scale_updates``).

Static strategies bound at build time (no config branching inside the iteration):
- ``begin_dataset`` (``train.dataset``): ``online`` keeps the replay (datasets
  aggregate, DAgger-like); ``batch`` empties it before each iteration's self-play, so
  the updates train on positions of the games that ended in this iteration only.
- ``expert_params`` (``train.warm_start_iterations``): what self-play's search takes;
  with a warm start, ``WarmStartParams`` whose flag makes the first ``k`` iterations'
  expert a pure MCTS with random rollouts (``warm_start``).
- ``selfplay.control`` (``search_control.kind``): where new games start (``restarts``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from curiosity_search.rules import get_rule
from curiosity_search.train import replay as replay_lib
from curiosity_search.train.hyperparams import Hyperparameters, hyperparameters_from_config
from curiosity_search.train.losses import make_loss_fn
from curiosity_search.train.optimizers import scale_updates
from curiosity_search.train.restarts import make_search_control
from curiosity_search.train.search_fns import SearchFn, SearchParams, make_search
from curiosity_search.train.selfplay import SelfPlay
from curiosity_search.train.state import Counters, TrainState, zero_counters
from curiosity_search.train.warm_start import WarmStartParams, make_warm_start_search

ActFn = Callable[[Any, jax.Array, Any], jax.Array]


def _env_from_config(cfg: Any) -> Any:
    from curiosity_search import envs

    kwargs: dict[str, Any] = {}
    if cfg.env.name == "hex":
        kwargs = {"size": cfg.env.size, "swap": cfg.env.swap}
    return envs.make(cfg.env.name, **kwargs)


def _network_from_config(cfg: Any, num_actions: int) -> Any:
    from curiosity_search.nets import BeliefBounds, make_network

    net = cfg.network
    return make_network(
        net.trunk,
        net.blocks,
        net.width,
        num_actions,
        value_head=net.value_head,
        action_values=net.action_values,
        regret_heads=net.regret_heads,
        compute_dtype=net.compute_dtype,
        conv_gradient=net.conv_gradient,
        belief_bounds=BeliefBounds(net.belief_floor, net.belief_cap, net.belief_init),
    )


def _optimizer_from_config(cfg: Any) -> optax.GradientTransformation:
    """The configured optimizer at peak learning rate 1 (the trainer scales its updates
    by the traced ``hyperparams.learning_rate``)."""
    from curiosity_search.train.optimizers import make_optimizer

    opt = cfg.optimizer
    return make_optimizer(
        opt.name,
        1.0,
        schedule=opt.schedule,
        total_steps=cfg.train.iterations * cfg.train.updates_per_iteration,
        warmup_steps=opt.warmup_steps,
        weight_decay=opt.weight_decay,
        grad_clip=opt.grad_clip,
        momentum=opt.momentum,
    )


def network_expert(
    params: Any, iterations: jax.Array, hyperparams: Hyperparameters | None = None
) -> Any:
    """The expert searches with the network from the first iteration.

    Returns ``SearchParams(params, hyperparams)`` (traced search constants), or the bare
    ``params`` when ``hyperparams`` is None (the config's constants).
    """
    del iterations
    return params if hyperparams is None else SearchParams(params, hyperparams)


def warm_start_expert(
    warm_iterations: int,
    params: Any,
    iterations: jax.Array,
    hyperparams: Hyperparameters | None = None,
) -> Any:
    """Pure-MCTS (random rollouts) expert while ``iterations < warm_iterations``."""
    return WarmStartParams(
        params=params, use_rollouts=iterations < warm_iterations, hyperparams=hyperparams
    )


def _mean_over_updates(per_update: dict[str, jax.Array]) -> dict[str, jax.Array]:
    return {name: jnp.mean(values) for name, values in per_update.items()}


@dataclasses.dataclass(frozen=True)
class Trainer:
    """Everything static about a run; ``init`` and ``iteration`` are pure functions.

    Attributes:
      cfg: the run's config.
      env: the pgx env.
      network: flax module; ``apply(params, obs [B, ...]) -> NetworkOutput``.
      optimizer: optax transformation.
      selfplay: the bound ``SelfPlay``.
      batch_size: ``B`` games played in parallel.
      train_batch_size: ``N`` positions per update.
      updates_per_iteration: ``K``.
      replay_capacity: ``C``.
      begin_dataset: ``replay -> replay`` before self-play (``replay.DATASET_MODES``).
      expert_params: ``(params, iterations [], hyperparams) -> search params`` for
        self-play (``SearchParams`` or ``WarmStartParams``, carrying the traced
        ``hyperparams``).
      scale_updates_by_learning_rate: ``optimizer`` is built at learning rate 1 and
        each update is multiplied by ``state.hyperparams.learning_rate`` (the
        config's optimizer); False for an optimizer passed to ``build_trainer``, whose
        updates are applied as they are.
    """

    cfg: Any
    env: Any
    network: Any
    optimizer: optax.GradientTransformation
    selfplay: SelfPlay
    batch_size: int
    train_batch_size: int
    updates_per_iteration: int
    replay_capacity: int
    begin_dataset: Callable[[replay_lib.ReplayBuffer], replay_lib.ReplayBuffer] = replay_lib.keep
    expert_params: Callable[..., Any] = network_expert
    scale_updates_by_learning_rate: bool = False

    def init(self, key: jax.Array) -> TrainState:
        """A fresh state: initial parameters, empty replay, ``B`` newly opened games."""
        params_key, games_key = jax.random.split(key)
        example_states = jax.vmap(self.env.init)(jax.random.split(params_key, 1))
        params = self.network.init(params_key, example_states.observation)
        example = self._example_position(params, example_states)
        games, records = self.selfplay.init_games(games_key, self.batch_size, example)
        return TrainState(
            params=params,
            opt_state=self.optimizer.init(params),
            replay=replay_lib.init_replay(example, self.replay_capacity),
            games=games,
            records=records,
            counters=zero_counters(),
            control=self.selfplay.init_control(games),
            hyperparams=hyperparameters_from_config(self.cfg),
        )

    def _example_position(self, params: Any, states: Any) -> replay_lib.Positions:
        """Zeros shaped like one recorded position (shapes found by ``eval_shape``)."""

        def record_one(params: Any, states: Any) -> replay_lib.Positions:
            key = jax.random.key(0)
            expert = self.expert_params(
                params, jnp.zeros((), jnp.int32), hyperparameters_from_config(self.cfg)
            )
            result = self.selfplay.search(expert, key, states)
            return self.selfplay.record(states, result, result.action)

        shapes = jax.eval_shape(record_one, params, states)
        return jax.tree.map(lambda s: jnp.zeros(s.shape[1:], s.dtype), shapes)

    def update(
        self,
        params: Any,
        opt_state: Any,
        key: jax.Array,
        replay: replay_lib.ReplayBuffer,
        learning_rate: jax.Array | None = None,
    ) -> tuple[Any, Any, dict[str, jax.Array]]:
        """One optimizer step on ``N`` positions sampled uniformly from the replay.

        ``learning_rate`` (``[]``, traced): multiplies the optimizer's updates (an
        optimizer built at peak 1); None applies them as they are.
        """
        loss_fn = make_loss_fn(
            self.network.apply, self.cfg.train, reinforce=self.cfg.algorithm == "reinforce",
            belief_bounds=getattr(self.network, "belief_bounds", None),
        )
        batch = replay_lib.sample(key, replay, self.train_batch_size)
        (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch)
        updates, new_opt_state = self.optimizer.update(grads, opt_state, params)
        if learning_rate is not None:
            updates = scale_updates(updates, learning_rate)
        new_params = optax.apply_updates(params, updates)
        has_data = replay.size > 0
        params = jax.tree.map(lambda new, old: jnp.where(has_data, new, old), new_params, params)
        opt_state = jax.tree.map(
            lambda new, old: jnp.where(has_data, new, old), new_opt_state, opt_state
        )
        metrics["grad_norm"] = optax.tree.norm(grads)
        return params, opt_state, metrics

    def iteration(
        self, state: TrainState, key: jax.Array
    ) -> tuple[TrainState, dict[str, jax.Array]]:
        """``S`` self-play moves, then ``K`` updates. Jit with ``donate_argnums=0``.

        ``self_play_phase`` then ``update_phase`` with the two halves of one split of
        ``key``: one compiled program. Returns the new state and scalar metrics: the
        losses and entropies (means over the ``K`` updates), ``grad_norm``, self-play
        statistics, ``replay_size`` and the counters after the iteration.
        ``state.hyperparams`` (traced) is returned unchanged; a state without it
        (``None``) uses the config's values, compiled in.
        """
        play_key, train_key = jax.random.split(key)
        state, play_metrics = self.self_play_phase(state, play_key)
        state, per_update = self.update_phase(state, train_key)
        trained = (state.replay.size > 0).astype(jnp.int32)
        previous = state.counters
        counters = Counters(
            iterations=previous.iterations + 1,
            updates=previous.updates + trained * self.updates_per_iteration,
            positions=previous.positions + float(self.batch_size * self.selfplay.num_moves),
            games=previous.games + play_metrics["games_finished"],
        )
        metrics = {**_mean_over_updates(per_update), **play_metrics}
        metrics["replay_size"] = state.replay.size
        metrics["iterations"] = counters.iterations
        metrics["updates"] = counters.updates
        metrics["positions"] = counters.positions
        metrics["games"] = counters.games
        return state.replace(counters=counters), metrics

    def _hyperparams(self, state: TrainState) -> Hyperparameters:
        if state.hyperparams is None:
            return hyperparameters_from_config(self.cfg)
        return state.hyperparams

    def self_play_phase(
        self, state: TrainState, key: jax.Array
    ) -> tuple[TrainState, dict[str, jax.Array]]:
        """The iteration's first half: the dataset rule, then ``S`` self-play moves.

        Returns the state with new games, records, replay and search control (parameters
        and counters unchanged) and the self-play metrics. Jitted on its own, it is what
        ``bench train`` times as self-play.
        """
        replay = self.begin_dataset(state.replay)
        expert = self.expert_params(
            state.params, state.counters.iterations, self._hyperparams(state)
        )
        games, records, replay, control, play_metrics = self.selfplay.play(
            expert, key, state.games, state.records, replay, state.control
        )
        state = state.replace(games=games, records=records, replay=replay, control=control)
        return state, play_metrics

    def update_phase(
        self, state: TrainState, key: jax.Array
    ) -> tuple[TrainState, dict[str, jax.Array]]:
        """The iteration's second half: ``K`` updates in a ``lax.scan``, ``key`` split ``K``
        ways. Returns the state with new parameters and optimizer state and the metrics
        of each update, ``[K]`` each. Jitted on its own, ``bench train``'s update time.
        """
        learning_rate = (
            self._hyperparams(state).learning_rate
            if self.scale_updates_by_learning_rate else None
        )

        def update_step(carry: tuple, update_key: jax.Array) -> tuple:
            params, opt_state = carry
            params, opt_state, metrics = self.update(
                params, opt_state, update_key, state.replay, learning_rate
            )
            return (params, opt_state), metrics

        (params, opt_state), per_update = jax.lax.scan(
            update_step,
            (state.params, state.opt_state),
            jax.random.split(key, self.updates_per_iteration),
        )
        return state.replace(params=params, opt_state=opt_state), per_update

    def make_search(self, num_simulations: int, *, self_play: bool = False) -> SearchFn:
        """The run's search rule at ``num_simulations`` (0: the raw network policy)."""
        return make_search(
            self.cfg.search, self.network, self.env, num_simulations, self_play=self_play
        )

    def make_act_fn(self, num_simulations: int) -> ActFn:
        """``act(params, key, states [B]) -> actions [B]`` int32, deterministic search.

        ``num_simulations == 0``: argmax of the legal policy logits. Otherwise the run's
        search without exploration noise; the move is the argmax of its
        ``action_weights`` (Gumbel: the policy's own choice).
        """
        search = self.make_search(num_simulations, self_play=False)
        use_policy_action = num_simulations > 0 and self.selfplay.action_rule == "policy"

        def act(params: Any, key: jax.Array, states: Any) -> jax.Array:
            result = search(params, key, states)
            if use_policy_action:
                return result.action
            weights = jnp.where(states.legal_action_mask, result.action_weights, -1.0)
            return jnp.argmax(weights, axis=-1).astype(jnp.int32)

        return act


def build_trainer(
    cfg: Any,
    *,
    env: Any | None = None,
    network: Any | None = None,
    optimizer: optax.GradientTransformation | None = None,
) -> Trainer:
    """The trainer for ``cfg``; ``env``/``network``/``optimizer`` override the config's.

    The search rule, simulation counts, shapes and targets are static: each choice
    compiles its own program; the learning rate and the search's floats are traced
    (``TrainState.hyperparams``). An ``optimizer`` passed here
    is used as it is (its own learning rate; ``hyperparams.learning_rate`` unused).
    """
    env = env if env is not None else _env_from_config(cfg)
    network = network if network is not None else _network_from_config(cfg, env.num_actions)
    scale_updates_by_learning_rate = optimizer is None
    optimizer = optimizer if optimizer is not None else _optimizer_from_config(cfg)
    sp, train = cfg.selfplay, cfg.train
    rule = get_rule(cfg.search.rule)
    action_values = bool(getattr(cfg.network, "action_values", False)) and rule.beliefs
    warm_iterations = getattr(train, "warm_start_iterations", 0)
    # RGSC restart candidates from the search trees' nodes (static): only a search with
    # a tree and the network at its leaves has them (not at 0 simulations or warm start).
    tree_candidates = (
        cfg.search_control.kind == "rgsc"
        and bool(getattr(cfg.search_control, "tree_candidates", False))
        and cfg.search.num_simulations > 0
        and warm_iterations == 0
    )
    if warm_iterations > 0:
        search = make_warm_start_search(
            cfg.search, network, env, cfg.search.num_simulations, self_play=True
        )
        expert_params = functools.partial(warm_start_expert, warm_iterations)
    else:
        search = make_search(
            cfg.search,
            network,
            env,
            cfg.search.num_simulations,
            self_play=True,
            tree_candidates=tree_candidates,
        )
        expert_params = network_expert
    max_game_length = sp.max_game_length or env.num_actions
    # REINFORCE samples every move from its policy (on-policy returns).
    sampling_moves = max_game_length if cfg.algorithm == "reinforce" else sp.sampling_moves
    selfplay = SelfPlay(
        env=env,
        search=search,
        num_moves=sp.moves_per_iteration,
        sampling_moves=sampling_moves,
        sampling_temperature=sp.sampling_temperature,
        random_opening_moves=sp.random_opening_moves,
        max_game_length=max_game_length,
        policy_target=train.policy_target,
        value_target=train.value_target,
        action_beliefs=action_values,
        one_position_per_game=sp.one_position_per_game,
        action_rule=(
            "policy" if rule.plays_policy_action and cfg.search.num_simulations > 0
            else "weights"
        ),
        control=make_search_control(cfg.search_control, max_game_length, tree_candidates),
        regrets=bool(getattr(cfg.network, "regret_heads", False)),
        outcomes=(train.outcome_loss_weight > 0 or train.action_outcome_loss_weight > 0)
        and train.value_target != "outcome",
        played_actions=train.action_outcome_loss_weight > 0,
    )
    return Trainer(
        cfg=cfg,
        env=env,
        network=network,
        optimizer=optimizer,
        selfplay=selfplay,
        batch_size=sp.batch_size,
        train_batch_size=train.batch_size,
        updates_per_iteration=train.updates_per_iteration,
        replay_capacity=sp.replay_capacity,
        begin_dataset=replay_lib.DATASET_MODES[getattr(train, "dataset", "online")],
        expert_params=expert_params,
        scale_updates_by_learning_rate=scale_updates_by_learning_rate,
    )
