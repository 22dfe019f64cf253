"""Search throughput and tree memory: our rules against mctx's policies, same model.

The model is pgx Hex 11x11 (``pgx.make("hex")``; its ``step`` is the dynamics) plus a
2-layer MLP over the observation with fixed random parameters: the same
``recurrent_fn`` for every search, in one process. Each (batch, simulations) point
compiles each policy once, warms it up, then times ``repeats`` rounds, each running
every policy once. A ratio against a baseline is read two ways: from the two policies'
fastest rounds (``speed_ratio``), and as the median over rounds of the ratio within a
round (``speed_ratio_round_median``), which a slow spell of a shared machine moves less.

``bench_search`` writes ``results/bench/search_<device>.csv`` and prints the ratios
against ``mctx.muzero_policy`` (for PUCT-style rules) and ``mctx.gumbel_muzero_policy``
(for Gumbel), and the tree memory (bytes of all tree arrays, embeddings included).

The ``curiosity`` row runs ``curiosity_policy`` with the options of the config's
``search`` section (``bench_curiosity_options``: the schema defaults unless ``--config``
or ``--set search.pbest_updates=incremental`` etc. change them; its ``options`` column
names the ones that differ from ``CuriosityOptions``'s defaults, and ``search.kappa``)
on ``make_hex_belief_model`` (the same MLP plus bounded Beta belief heads) and is
compared with OUR ``gumbel`` row, which runs on the plain model, in the same process
(target: >= 0.5x gumbel's simulations/s). Where curiosity's time goes (the belief model
alone, P(best) rows by site, a ceiling with P(best) stubbed out) is measured by
``scripts/curiosity_time_split.py``; results/bench/README.md has the figures.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import mctx
import pgx

from curiosity_search import rules
from curiosity_search.atomic_io import write_csv_atomically
from curiosity_search.bench import DEFAULT_OUT_DIR
from curiosity_search.config import config_from_dict
from curiosity_search.config.bundles import beliefs_outside_envelope
from curiosity_search.curiosity import (
    BeliefRecurrentFnOutput,
    BeliefRootFnOutput,
    CuriosityOptions,
    curiosity_policy,
    native_cpu,
)
from curiosity_search.nets.belief_head import BeliefBounds, split_belief_outputs
from curiosity_search.search import policies
from curiosity_search.search.base import RecurrentFnOutput, RootFnOutput
from curiosity_search.search.tree import tree_nbytes

# name -> (policy, the policy it is compared with: mctx's, or one of ours)
OURS: dict[str, tuple[Callable[..., Any], str]] = {
    "puct": (policies.puct_policy, "mctx_muzero"),
    "puct_alphago": (functools.partial(policies.puct_policy, formula="alphago"), "mctx_muzero"),
    "exit": (policies.exit_policy, "mctx_muzero"),
    "gumbel": (policies.gumbel_policy, "mctx_gumbel"),
    # No root noise: we skip the Dirichlet draw, mctx still makes it.
    "puct_nonoise": (
        functools.partial(policies.puct_policy, dirichlet_fraction=0.0),
        "mctx_muzero_nonoise",
    ),
    # Against OUR gumbel (issue 11's target: >= 0.5x its simulations/s).
    "curiosity": (curiosity_policy, "gumbel"),
}
# The belief model's head bounds (``make_hex_belief_model``): the shipped curiosity
# configs' ``network.belief_floor`` and ``belief_cap``.
BELIEF_BOUNDS = BeliefBounds(floor=1.0, cap=16.0)
# Rules that run on the belief model (``make_hex_belief_model``); all others, their
# baselines included, run on the plain model.
BELIEF_RULES = frozenset({"curiosity"})
MCTX: dict[str, Callable[..., Any]] = {
    "mctx_muzero": mctx.muzero_policy,
    "mctx_gumbel": mctx.gumbel_muzero_policy,
    "mctx_muzero_nonoise": functools.partial(mctx.muzero_policy, dirichlet_fraction=0.0),
}


def _hex_mlp(hidden: int, seed: int):
    """pgx Hex 11x11 and the benchmark MLP: ``(env, params, forward)``.

    ``forward(params, state) -> (logits [B, A] (illegal: dtype min), value [B],
    features [B, hidden])``.
    """
    env = pgx.make("hex")
    num_actions = env.num_actions
    obs_size = 11 * 11 * 4
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    params = {
        "w1": jax.random.normal(k1, (obs_size, hidden)) / jnp.sqrt(obs_size),
        "w2": jax.random.normal(k2, (hidden, hidden)) / jnp.sqrt(hidden),
        "w_out": jax.random.normal(k3, (hidden, num_actions + 1)) / jnp.sqrt(hidden),
    }

    def forward(params, state):
        x = state.observation.reshape(state.observation.shape[0], -1).astype(jnp.float32)
        x = jax.nn.relu(x @ params["w1"])
        x = jax.nn.relu(x @ params["w2"])
        out = x @ params["w_out"]
        logits = out[:, :num_actions]
        logits = jnp.where(state.legal_action_mask, logits, jnp.finfo(logits.dtype).min)
        return logits, jnp.tanh(out[:, -1]), x

    return env, params, forward


def _search_model(env, params, evaluate, root_output, recurrent_output):
    """``(params, root_fn, recurrent_fn)`` over ``env`` for a network ``evaluate(params,
    state) -> dict`` of ``[B, ...]`` outputs (``prior_logits``, ``value`` and any others
    ``root_output`` / ``recurrent_output`` take).

    root_fn(params, key, batch_size) -> (root_output(...), invalid_actions [B, A]);
    recurrent_fn steps the env and returns ``recurrent_output`` with the mover's reward,
    discount -1 (0 and value 0 at a terminal) and the new state as embedding.
    """

    def recurrent_fn(params, rng_key, action, state):
        del rng_key
        player = state.current_player
        state = jax.vmap(env.step)(state, action)
        outputs = evaluate(params, state)
        batch = jnp.arange(action.shape[0])
        reward = state.rewards[batch, player]
        outputs["value"] = jnp.where(state.terminated, 0.0, outputs["value"])
        discount = jnp.where(state.terminated, 0.0, -1.0)
        return recurrent_output(reward=reward, discount=discount, **outputs), state

    def root_fn(params, key, batch_size):
        state = jax.vmap(env.init)(jax.random.split(key, batch_size))
        root = root_output(embedding=state, **evaluate(params, state))
        return root, ~state.legal_action_mask

    return params, root_fn, recurrent_fn


def make_hex_model(hidden: int = 64, seed: int = 0):
    """Returns ``(params, root_fn, recurrent_fn)`` for pgx Hex 11x11 + an MLP.

    root_fn(params, key, batch_size) -> (RootFnOutput, invalid_actions [B, A]).
    """
    env, params, forward = _hex_mlp(hidden, seed)

    def evaluate(params, state):
        logits, value, _ = forward(params, state)
        return {"prior_logits": logits, "value": value}

    return _search_model(env, params, evaluate, RootFnOutput, RecurrentFnOutput)


def make_hex_belief_model(hidden: int = 64, seed: int = 0):
    """``make_hex_model`` plus belief heads, for ``curiosity_policy``.

    The same MLP (identical parameters for the same seed) with two more linear heads on
    its last hidden layer, read as the project's belief heads read theirs
    (``nets.belief_head.split_belief_outputs``: a softmax mean floored at 1e-3 times a
    total concentration ``1 + 15 sigmoid(t)``): a Beta value belief ``[B, 2]`` and
    per-action Beta beliefs ``[B, A, 2]`` (random weights: totals ~2..16). Returns
    ``(params, root_fn, recurrent_fn)``; root_fn(params, key, batch_size) ->
    (BeliefRootFnOutput, invalid_actions [B, A]); recurrent_fn returns
    ``BeliefRecurrentFnOutput``.

    Per evaluation this is ~1.5x the plain model's multiply-adds (the heads are
    hidden x 3 and hidden x 3A on top of 484 x 64 + 64 x 64 + 64 x 123).
    """
    env, params, forward = _hex_mlp(hidden, seed)
    num_actions = env.num_actions
    k1, k2 = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), 1))
    params = {
        **params,
        "w_value_belief": jax.random.normal(k1, (hidden, 3)) / jnp.sqrt(hidden),
        "w_action_beliefs": jax.random.normal(k2, (hidden, 3 * num_actions)) / jnp.sqrt(hidden),
    }

    bounds = BELIEF_BOUNDS

    def evaluate(params, state):
        logits, value, x = forward(params, state)
        return {
            "prior_logits": logits,
            "value": value,
            "value_belief": split_belief_outputs(x @ params["w_value_belief"], 1, 2, bounds)[:, 0],
            "action_beliefs": split_belief_outputs(
                x @ params["w_action_beliefs"], num_actions, 2, bounds),
        }

    return _search_model(env, params, evaluate, BeliefRootFnOutput, BeliefRecurrentFnOutput)


def interleaved_seconds(runs: dict[str, Callable[[], Any]],
                        repeats: int) -> dict[str, list[float]]:
    """Compiles and warms every run, then times them in ``repeats`` interleaved rounds
    (every run once per round); returns each run's seconds, one per round, in order."""
    for run in runs.values():
        jax.block_until_ready(run())
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            jax.block_until_ready(run())
            seconds[name].append(time.perf_counter() - start)
    return seconds


def fastest_rounds(round_seconds: dict[str, list[float]]) -> dict[str, float]:
    """Each run's fastest round, from ``interleaved_seconds``'s per-round times (robust
    to other processes sharing the CPU)."""
    return {name: min(times) for name, times in round_seconds.items()}


def interleaved_min_seconds(runs: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """``interleaved_seconds``, then each run's ``fastest_rounds``."""
    return fastest_rounds(interleaved_seconds(runs, repeats))


def median_round_ratio(seconds: Sequence[float], baseline_seconds: Sequence[float]) -> float:
    """The median over rounds of ``baseline / seconds`` (a speed ratio), each round's
    two times taken within that round: a slow spell of a shared machine that spans a
    round slows both, where the fastest rounds of the two may come from different
    spells. ``[R]`` seconds each, in round order."""
    if len(seconds) != len(baseline_seconds) or not seconds:
        raise ValueError(f"need the same number of rounds, got {len(seconds)} and "
                         f"{len(baseline_seconds)}")
    pairs = zip(seconds, baseline_seconds, strict=True)
    return statistics.median(base / own for own, base in pairs)


def bench_search(
    batch_sizes: Sequence[int] = (64, 256),
    num_simulations: Sequence[int] = (32, 128),
    rules: Sequence[str] = (
        "puct", "gumbel", "exit", "puct_alphago", "puct_nonoise", "curiosity"
    ),
    repeats: int = 5,
    hidden: int = 64,
    out_dir: str | Path | None = "results/bench",
    print_fn: Callable[[str], None] | None = print,
    curiosity_options: CuriosityOptions | None = None,
    kappa: float = 4.0,
) -> list[dict[str, Any]]:
    """Measures simulations per second and tree bytes for our rules and mctx's policies.

    Args:
      batch_sizes, num_simulations: the grid (each point compiles every policy once).
      rules: names in ``OURS``; their baselines (mctx's, or ours such as ``gumbel``
        for ``curiosity``) are always measured too, on the plain model.
      repeats: timed rounds per point after one warm-up call; each policy keeps its
        fastest round (rounds interleave the policies, so load spikes hit all alike).
      hidden: MLP width.
      out_dir: where ``search_<device>.csv`` goes (None: no file).
      print_fn: progress and ratio lines (None: silent).
      curiosity_options, kappa: the ``curiosity`` row's static options (None: the
        defaults) and prior strength.

    Returns:
      One row per (policy, batch, simulations): ``policy``, ``baseline``, ``batch``,
      ``num_simulations``, ``seconds``, ``sims_per_sec``, ``tree_bytes``,
      ``speed_ratio`` and ``memory_ratio`` (ours / baseline, from the fastest rounds; 1
      for mctx rows), ``speed_ratio_round_median`` (``median_round_ratio``: the median
      over rounds of the round's speed ratio), ``device``,
      ``options`` (the curiosity row's non-default options and kappa, e.g.
      ``pbest_updates=incremental kappa=4.0``; empty for the others) and
      ``curiosity_passes`` (the curiosity row's: ``native_cpu.passes_on``, ``native``
      or ``array``; empty for the others).
    """
    say = print_fn or (lambda _: None)
    device = jax.devices()[0].platform
    unknown = sorted(set(rules) - set(OURS))
    if unknown:
        raise ValueError(f"unknown rules {unknown}; choose from {sorted(OURS)}")
    models = {False: make_hex_model(hidden), True: make_hex_belief_model(hidden)}
    defaults = CuriosityOptions()
    curiosity_options = curiosity_options or defaults
    ours_policies = {name: policy for name, (policy, _) in OURS.items()}
    ours_policies["curiosity"] = functools.partial(curiosity_policy, options=curiosity_options,
                                                   kappa=kappa)
    changed = [f"{field.name}={getattr(curiosity_options, field.name)}"
               for field in dataclasses.fields(CuriosityOptions)
               if getattr(curiosity_options, field.name) != getattr(defaults, field.name)]
    options_text = {"curiosity": " ".join([*changed, f"kappa={kappa}"])}
    # Baselines first (mctx's, then ours that others compare against), each once.
    ours = list(dict.fromkeys([*(OURS[r][1] for r in rules if OURS[r][1] in OURS), *rules]))
    names = [*sorted({OURS[r][1] for r in ours} & set(MCTX)), *ours]
    rows: list[dict[str, Any]] = []
    for batch in batch_sizes:
        roots = {
            uses_beliefs: jax.jit(root_fn, static_argnums=2)(
                params, jax.random.PRNGKey(1), batch
            )
            for uses_beliefs, (params, root_fn, _) in models.items()
        }
        for sims in num_simulations:
            runs, outputs = {}, {}
            for name in names:
                policy = MCTX[name] if name in MCTX else ours_policies[name]
                uses_beliefs = name in BELIEF_RULES
                params, _, recurrent_fn = models[uses_beliefs]
                root, invalid = roots[uses_beliefs]
                run = jax.jit(
                    lambda p, k, r, i, policy=policy, sims=sims, fn=recurrent_fn: policy(
                        p, k, r, fn, sims, invalid_actions=i
                    )
                )
                runs[name] = functools.partial(
                    run, params, jax.random.PRNGKey(2), root, invalid
                )
            round_seconds = interleaved_seconds(runs, repeats)
            seconds = fastest_rounds(round_seconds)
            measured: dict[str, dict[str, Any]] = {}
            for name in names:
                outputs[name] = runs[name]()
                row = {
                    "policy": name,
                    "baseline": name if name in MCTX else OURS[name][1],
                    "batch": batch,
                    "num_simulations": sims,
                    "seconds": seconds[name],
                    "sims_per_sec": batch * sims / seconds[name],
                    "tree_bytes": tree_nbytes(outputs[name].search_tree),
                    "device": device,
                    "options": options_text.get(name, ""),
                    "curiosity_passes": (native_cpu.passes_on(device)
                                         if name in BELIEF_RULES else ""),
                }
                base = measured.get(row["baseline"], row)
                row["speed_ratio"] = row["sims_per_sec"] / base["sims_per_sec"]
                row["speed_ratio_round_median"] = median_round_ratio(
                    round_seconds[name], round_seconds[row["baseline"]])
                row["memory_ratio"] = row["tree_bytes"] / base["tree_bytes"]
                measured[name] = row
                rows.append(row)
                say(
                    f"B={batch:4d} sims={sims:4d} {name:13s} {row['sims_per_sec']:10.0f} sims/s"
                    f"  x{row['speed_ratio']:.3g} vs {row['baseline']}"
                    f" (rounds' median x{row['speed_ratio_round_median']:.3g})"
                    f"  tree {row['tree_bytes'] / 2**20:7.2f} MiB (x{row['memory_ratio']:.2f})"
                )
    if out_dir is not None:
        path = write_csv_atomically(Path(out_dir) / f"search_{device}.csv", rows)
        say(f"wrote {path}")
    return rows


def bench_curiosity_options(search_cfg: Any) -> CuriosityOptions:
    """The curiosity row's options from a ``search`` config section.

    ``search.pbest_fallback: null`` (a config whose algorithm has no beliefs, such as the
    schema's default gumbel) is resolved as a curiosity config resolves it, from the
    network that the row runs: the belief model (Hex, Beta heads within
    ``BELIEF_BOUNDS``), so the row compiles the search a shipped Hex curiosity config
    trains with. An explicit true or false is kept.
    """
    options = rules.curiosity_options(search_cfg)
    if search_cfg.pbest_fallback is not None:
        return options
    model_cfg = config_from_dict({
        "algorithm": "curiosity",
        "env": {"name": "hex", "size": 11},
        "network": {"belief_floor": BELIEF_BOUNDS.floor, "belief_cap": BELIEF_BOUNDS.cap},
    })
    outside = beliefs_outside_envelope(dataclasses.replace(model_cfg, search=search_cfg))
    return dataclasses.replace(options, bounded_beliefs=not outside)


def run_search_bench(
    batch_sizes: Sequence[int] = (64, 256),
    num_simulations: Sequence[int] = (32, 128),
    *,
    repeats: int = 3,
    out: str | Path | None = None,
    search_cfg: Any = None,
) -> Path:
    """``curiosity-search bench search``: ``bench_search`` over ``batch_sizes`` x
    ``num_simulations``, the curiosity row with ``search_cfg``'s options
    (``bench_curiosity_options`` and ``search.kappa``; None: the defaults), written to
    ``out`` (default ``results/bench/search_<device>.csv``); returns the CSV's path."""
    device = jax.devices()[0].platform
    curiosity = {}
    if search_cfg is not None:
        curiosity = {"curiosity_options": bench_curiosity_options(search_cfg),
                     "kappa": float(search_cfg.kappa)}
    rows = bench_search(
        batch_sizes=batch_sizes, num_simulations=num_simulations, repeats=repeats, out_dir=None,
        **curiosity,
    )
    path = write_csv_atomically(out or DEFAULT_OUT_DIR / f"search_{device}.csv", rows)
    print(f"wrote {path}")
    return path
