"""``bench train``: the user's run loop plus the phase split, on a tiny conv config;
``bench search``'s curiosity options; ``scripts/with_free_pbest.py``'s stand-in."""

from __future__ import annotations

import functools
import importlib
import math
from pathlib import Path

import jax
import pytest
from train_fixtures import tiny_config

from curiosity_search.bench.train import bench_train, compare_train
from curiosity_search.curiosity import CuriosityOptions, best_arm, curiosity_policy, native_cpu
from curiosity_search.testing.curiosity_reference import BeliefHashModel


def test_bench_train_reports_the_loop_and_the_phases():
    cfg = tiny_config("gumbel", "network.trunk=resnet", "network.width=8",
                      "logging.tensorboard=false", "eval.every=0")
    row = bench_train(cfg, repeats=1)
    for key in ("positions_per_sec", "iteration_seconds", "first_iteration_seconds",
                "compile_seconds", "selfplay_seconds", "updates_seconds",
                "update_alone_seconds", "update_in_scan_ratio", "selfplay_fraction"):
        assert math.isfinite(row[key]) and row[key] > 0, (key, row[key])
    assert row["host_seconds"] >= 0
    assert row["network"] == "resnet 1x8" and row["conv_gradient"] == "auto"
    positions = cfg.selfplay.batch_size * cfg.selfplay.moves_per_iteration
    expected = positions / (row["iteration_seconds"] + row["host_seconds"])
    assert math.isclose(row["positions_per_sec"], expected, rel_tol=0.01, abs_tol=0.1)
    assert 0 < row["selfplay_fraction"] < 1
    assert row["curiosity_passes"] == row["pbest_fallback"] == ""  # not a curiosity config


def test_rows_record_which_curiosity_passes_ran():
    """``curiosity_passes`` in the bench CSVs: the native passes on a CPU with the
    library, the array programs on any other platform."""
    expected = "native" if native_cpu.native_available() else "array"
    assert native_cpu.passes_on("cpu") == expected
    assert native_cpu.passes_on("gpu") == native_cpu.passes_on("tpu") == "array"


def test_compare_train_alternates_abba_and_divides_by_the_baseline_mean():
    ran = []

    def fake_bench(cfg, repeats):
        ran.append((cfg, repeats))
        rate = {"mine": 30.0, "base": 100.0 + 20.0 * len(ran)}[cfg]
        return {"config": cfg, "positions_per_sec": rate}

    rows = compare_train("mine", "base", repeats=5, rounds=3, bench=fake_bench)
    assert [cfg for cfg, _ in ran] == ["base", "mine", "mine", "base", "base", "mine"]
    assert all(repeats == 5 for _, repeats in ran)
    assert [(row["role"], row["round"]) for row in rows] == [
        ("baseline", 0), ("config", 0), ("config", 1), ("baseline", 1), ("baseline", 2),
        ("config", 2)]
    baseline_mean = (120.0 + 180.0 + 200.0) / 3
    assert rows[1]["positions_per_sec_vs_baseline"] == round(30.0 / baseline_mean, 3)
    assert rows[0]["positions_per_sec_vs_baseline"] == round(120.0 / baseline_mean, 3)


def test_bench_search_runs_curiosity_with_the_configs_search_options(monkeypatch, tmp_path):
    """``bench search --set search.pbest_updates=incremental`` reaches the curiosity row's
    ``CuriosityOptions`` (and ``search.kappa`` its prior strength); without a config section
    the row keeps the defaults."""
    from curiosity_search.bench import search as search_bench
    from curiosity_search.config import apply_overrides, config_from_dict

    seen = []
    monkeypatch.setattr(search_bench, "bench_search",
                        lambda **kwargs: seen.append(kwargs) or [{"policy": "curiosity"}])
    cfg = config_from_dict(apply_overrides({}, ["search.pbest_updates=incremental",
                                                "search.kappa=2.5", "search.grid_size=17"]))
    search_bench.run_search_bench((8,), (4,), out=tmp_path / "a.csv", search_cfg=cfg.search)
    search_bench.run_search_bench((8,), (4,), out=tmp_path / "b.csv")
    options = seen[0]["curiosity_options"]
    assert (options.pbest_updates, options.grid_size, seen[0]["kappa"]) == ("incremental", 17, 2.5)
    assert options.selection_draw == cfg.search.selection_draw
    assert "curiosity_options" not in seen[1] and "kappa" not in seen[1]


def test_bench_search_resolves_the_fallback_as_a_curiosity_config_would():
    """A search section that leaves ``pbest_fallback`` unresolved (the default gumbel
    config's) gets what a shipped Hex curiosity config resolves for the same heads, the
    belief model's: no fallback compiled; an explicit value, or a summary that can leave
    the fast kernel's envelope, keeps it."""
    from curiosity_search import rules
    from curiosity_search.bench.search import bench_curiosity_options
    from curiosity_search.config import apply_overrides, config_from_dict, load_config

    configs = Path(__file__).resolve().parents[1] / "configs"
    shipped = load_config(configs / "hex5_curiosity.yaml").search
    assert shipped.pbest_fallback is False
    assert bench_curiosity_options(config_from_dict({}).search).bounded_beliefs
    assert bench_curiosity_options(shipped) == rules.curiosity_options(shipped)
    explicit = config_from_dict(apply_overrides({}, ["search.pbest_fallback=true"])).search
    assert not bench_curiosity_options(explicit).bounded_beliefs
    moment = config_from_dict(apply_overrides({}, ["search.belief_summary=moment_match"]))
    assert not bench_curiosity_options(moment.search).bounded_beliefs


def test_with_free_pbest_stands_in_for_every_pbest_kernel(monkeypatch):
    """``scripts/with_free_pbest.py`` patches one name; traced searches (``full``
    updates, K = 2 table and K = 3 draw selection) must then reach no P(best) kernel,
    and do reach one without the patch. Tracing only, nothing is compiled; JAX's caches
    are cleared before each trace, so no jaxpr traced earlier hides a kernel call."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "scripts"))
    free_pbest = importlib.import_module("with_free_pbest").free_pbest

    def forbidden(*args, **kwargs):
        raise AssertionError("a P(best) kernel was reached")

    # The kernels themselves, private to best_arm.py: every public path (rows,
    # aggregates, fallbacks) looks them up there at trace time, whatever imported it.
    for name in ("_fast_core", "_fast_terms", "_accurate_core"):
        monkeypatch.setattr(best_arm, name, forbidden)
    for name in ("native_backup_levels", "native_prior_fill"):  # their own rows
        monkeypatch.setattr(native_cpu, name, forbidden)

    def trace(num_outcomes):
        jax.clear_caches()
        model = BeliefHashModel(num_actions=5, num_outcomes=num_outcomes, seed=1)
        search = functools.partial(curiosity_policy, recurrent_fn=model.recurrent_fn,
                                   num_simulations=6,
                                   options=CuriosityOptions(pbest_updates="full"))
        jax.make_jaxpr(search)(None, jax.random.PRNGKey(0), model.root(4))

    for num_outcomes in (2, 3):
        with free_pbest():
            trace(num_outcomes)
        with pytest.raises(AssertionError, match="P\\(best\\) kernel was reached"):
            trace(num_outcomes)


def test_search_rounds_are_interleaved_and_their_ratios_paired():
    """``bench search``'s timing: every run once per round, in order, after a warm-up
    call each; ``median_round_ratio`` pairs the two policies' times round by round."""
    from curiosity_search.bench.search import (
        interleaved_min_seconds,
        interleaved_seconds,
        median_round_ratio,
    )

    calls = []
    runs = {name: functools.partial(calls.append, name) for name in ("base", "mine")}
    seconds = interleaved_seconds(runs, repeats=3)
    assert calls == ["base", "mine"] * 4  # the warm-up round, then three timed
    assert [len(times) for times in seconds.values()] == [3, 3]
    assert interleaved_min_seconds(runs, 2).keys() == {"base", "mine"}
    # Round by round: 2/4, 1/4, 8/4 -> median 0.5; the fastest rounds' 1/4 pairs
    # different rounds.
    assert median_round_ratio([4.0, 4.0, 4.0], [2.0, 1.0, 8.0]) == 0.5
    assert median_round_ratio([2.0, 4.0], [1.0, 4.0]) == 0.75
    with pytest.raises(ValueError, match="same number of rounds"):
        median_round_ratio([1.0], [1.0, 2.0])
