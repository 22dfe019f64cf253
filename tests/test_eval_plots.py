"""Plots from synthetic run directories: every figure and table is written."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from curiosity_search import cli
from curiosity_search.eval.frontier import fit_frontier, frontier
from curiosity_search.plots.make import load_runs, make_plots


def _fake_run(root: Path, board: int, algorithm: str, seed: int, rng) -> None:
    run = f"hex{board}-{algorithm}-seed{seed}"
    run_dir = root / run
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(
        f"algorithm: {algorithm}\nseed: {seed}\nenv: {{name: hex, size: {board}}}\n"
        "network: {trunk: mlp, blocks: 2, width: 64}\n"
    )
    rows, metrics = [], []
    for it in range(1, 6):
        flops = 1e10 * board**2 * 3**it
        metrics.append(
            {
                "iteration": it,
                "train_flops": flops,
                "wall_time_s": 10.0 * it,
                "train/policy_entropy_bits": 3.0 / it,
                "train/policy_target_entropy_bits": 2.0 / it,
                "train/value_entropy_bits": -it,
            }
        )
        for role, sims in (("apprentice", 0), ("expert", 16)):
            strength = min(0.5, 0.1 * it + (0.05 if role == "expert" else 0))
            for opponent, p, ref in (("solver", strength, 1), ("random", 0.5 + strength, 0)):
                games = 32
                wins = int(rng.binomial(games, p))
                rows.append(
                    {
                        "run": run,
                        "algorithm": algorithm,
                        "board_size": board,
                        "network": "mlp2x64",
                        "seed": seed,
                        "iteration": it,
                        "train_flops": flops,
                        "wall_time_s": 10.0 * it,
                        "role": role,
                        "simulations": sims,
                        "reference": ref,
                        "player_a": f"{run}@{it}:{sims}",
                        "player_b": opponent,
                        "games": games,
                        "wins": wins,
                        "draws": 0,
                        "losses": games - wins,
                        "score": wins / games,
                    }
                )
    with open(run_dir / "eval.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    for board in (3, 4):
        for algorithm in ("gumbel", "curiosity"):
            for seed in (0, 1):
                _fake_run(tmp_path / "sweep", board, algorithm, seed, rng)
    return tmp_path / "sweep"


def test_plots_write_every_figure_and_table(sweep_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "figures"
    paths = make_plots([sweep_dir], out)
    names = {p.name for p in paths}
    for stem in ("win_rate_vs_flops", "curiosity_vs_gumbel", "entropy_vs_flops",
                 "prediction_entropy_vs_flops", "elo_vs_compute"):
        assert f"{stem}.png" in names and f"{stem}.csv" in names
        assert (out / f"{stem}.png").stat().st_size > 5000
    assert "frontier_fit.csv" in names
    with open(out / "win_rate_vs_flops.csv") as handle:
        curves = list(csv.DictReader(handle))
    # 2 boards x 2 algorithms x 2 roles x 5 iterations, seeds pooled.
    assert len(curves) == 40 and {c["runs"] for c in curves} == {"2"}
    # The blog's Figure 13: the policy target's entropy alone; the rest in a second figure.
    with open(out / "entropy_vs_flops.csv") as handle:
        target = list(csv.DictReader(handle))
    assert {r["metric"] for r in target} == {"train/policy_target_entropy_bits"}
    assert float(target[0]["entropy_bits"]) == pytest.approx(2.0)  # iteration 1, seeds pooled
    with open(out / "prediction_entropy_vs_flops.csv") as handle:
        other = {r["metric"] for r in csv.DictReader(handle)}
    assert other == {"train/policy_entropy_bits", "train/value_entropy_bits"}
    with open(out / "elo_vs_compute.csv") as handle:
        elo = list(csv.DictReader(handle))
    assert all(float(r["elo"]) < 200 for r in elo)  # anchored at the solver, nobody beats it
    with open(out / "frontier_fit.csv") as handle:
        fits = list(csv.DictReader(handle))
    assert {f["board_size"] for f in fits} == {"3", "4"}
    assert all(float(f["slope"]) > 0 for f in fits)


def test_plot_verb_defaults_to_first_dir(sweep_dir: Path) -> None:
    assert cli.main(["plot", str(sweep_dir)]) == 0
    assert (sweep_dir / "elo_vs_compute.png").exists()
    assert (sweep_dir / "PLOTS_COMMAND.txt").exists()


def test_load_runs_labels_metrics_from_config(sweep_dir: Path) -> None:
    eval_rows, metric_rows = load_runs([sweep_dir])
    assert len(eval_rows) == 8 * 5 * 4 and len(metric_rows) == 8 * 5
    assert {str(m["board_size"]) for m in metric_rows} == {"3", "4"}


def test_frontier_fit_recovers_a_known_curve() -> None:
    rng = np.random.default_rng(1)
    compute = np.logspace(10, 16, 80)
    truth = np.minimum(0, np.maximum(300 * (np.log10(compute) - 15), -900))
    fit = fit_frontier(compute, truth + rng.normal(0, 5, compute.size))
    assert fit.slope == pytest.approx(300, rel=0.1)
    assert fit.plateau == pytest.approx(-900, abs=60)
    assert -fit.intercept / fit.slope == pytest.approx(15, abs=0.2)
    index = frontier(compute, truth)
    assert np.all(np.diff(truth[index]) > 0) and not math.isnan(fit.rmse)


def test_optimal_move_rate_curves_from_solver_evaluations(tmp_path: Path) -> None:
    run_dir = tmp_path / "hex4_gumbel"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("algorithm: gumbel\nenv: {name: hex, size: 4}\n")
    rows = []
    for it in range(1, 7):
        row = {"iteration": it, "wall_time_s": 5.0 * it, "train_flops": 1e9 * it}
        if it % 2 == 0:  # evaluated every other iteration
            row["eval/raw_optimal_move_rate"] = 0.5 + 0.08 * it
            row["eval/search_optimal_move_rate"] = 0.6 + 0.06 * it
        rows.append(row)
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    make_plots([tmp_path], tmp_path / "out")
    assert (tmp_path / "out" / "optimal_move_rate.png").stat().st_size > 0
    with open(tmp_path / "out" / "optimal_move_rate.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [int(r["iteration"]) for r in table] == [2, 4, 6]
    assert [float(r["raw_optimal_move_rate"]) for r in table] == pytest.approx([0.66, 0.82, 0.98])
    assert {r["algorithm"] for r in table} == {"gumbel"}


def test_variants_pool_seeds_of_each_grid_entry(sweep_dir: Path, tmp_path: Path) -> None:
    from curiosity_search.plots.variants import variant_name

    assert variant_name("tpt-online-seed12") == "tpt-online"
    assert variant_name("hex4-curiosity") == "hex4-curiosity"
    assert variant_name("seedless-seed") == "seedless-seed"
    out = tmp_path / "figures"
    make_plots([sweep_dir], out)
    assert (out / "variants.png").stat().st_size > 5000
    with open(out / "variants.csv") as handle:
        rows = [r for r in csv.DictReader(handle) if r.get("role")]
    # 4 variants (board x algorithm) x 2 roles x 5 iterations, 2 seeds pooled in each.
    assert len(rows) == 40 and {r["runs"] for r in rows} == {"2"}
    assert {r["variant"] for r in rows} == {
        "hex3-gumbel", "hex3-curiosity", "hex4-gumbel", "hex4-curiosity"
    }
    # pooled score = pooled wins / pooled games of the two seeds' reference rows
    first = next(r for r in rows if r["variant"] == "hex3-gumbel" and r["role"] == "expert"
                 and r["iteration"] == "1")
    seeds = [list(csv.DictReader(open(sweep_dir / f"hex3-gumbel-seed{s}" / "eval.csv")))
             for s in (0, 1)]
    wins = sum(int(r["wins"]) for table in seeds for r in table
               if r["iteration"] == "1" and r["role"] == "expert" and r["reference"] == "1")
    assert float(first["score"]) == pytest.approx(wins / 64)


def test_a_single_variant_draws_no_variant_figure(tmp_path: Path) -> None:
    _fake_run(tmp_path / "one", 3, "gumbel", 0, np.random.default_rng(1))
    make_plots([tmp_path / "one"], tmp_path / "out")
    assert not (tmp_path / "out" / "variants.png").exists()


def test_variants_keep_two_arms_of_one_algorithm_apart(tmp_path: Path) -> None:
    """Two arms of one algorithm (the same ``algorithm`` column, different run names)
    with late-game rates: ``variants.csv`` keeps their late-game curves apart (seed
    means per arm), while ``late_game_rate_vs_flops.csv``, grouped by algorithm, pools
    all four runs."""
    rng = np.random.default_rng(2)
    scratch, root = tmp_path / "scratch", tmp_path / "sweep"
    for arm, rate in (("curiosity", 0.8), ("curiosity_gate", 0.6)):
        for seed in (0, 1):
            _fake_run(scratch / arm, 5, "curiosity", seed, rng)
            source = scratch / arm / f"hex5-curiosity-seed{seed}"
            run = f"hex5-{arm}-seed{seed}"
            with open(source / "eval.csv", newline="") as handle:
                rows = list(csv.DictReader(handle))
            for row in rows:
                row.update(run=run, late_game_rate=rate + 0.02 * seed,
                           late_game_positions=300, late_game_empty_cells=14,
                           late_game_source="synthetic")
            (root / run).mkdir(parents=True)
            with open(root / run / "eval.csv", "w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
            for name in ("config.yaml", "metrics.jsonl"):
                (root / run / name).write_text((source / name).read_text())
    out = tmp_path / "figures"
    make_plots([root], out)
    assert (out / "variants.png").stat().st_size > 5000
    with open(out / "variants.csv", newline="") as handle:
        late = [r for r in csv.DictReader(handle) if r.get("late_game_rate")]
    # 2 arms x 2 roles x 5 iterations, each the mean of its two seeds
    assert len(late) == 20 and {r["runs"] for r in late} == {"2"}
    by_arm = {r["variant"]: float(r["late_game_rate"]) for r in late
              if r["role"] == "expert" and r["iteration"] == "3"}
    assert by_arm == pytest.approx({"hex5-curiosity": 0.81, "hex5-curiosity_gate": 0.61})
    with open(out / "late_game_rate_vs_flops.csv", newline="") as handle:
        pooled = [r for r in csv.DictReader(handle)
                  if r["role"] == "expert" and r["iteration"] == "3"]
    assert len(pooled) == 1 and pooled[0]["runs"] == "4"
    assert float(pooled[0]["late_game_rate"]) == pytest.approx(0.71)
