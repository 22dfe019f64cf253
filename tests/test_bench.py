"""``bench train``: the user's run loop plus the phase split, on a tiny conv config."""

from __future__ import annotations

import math

from train_fixtures import tiny_config

from curiosity_search.bench.train import bench_train


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
