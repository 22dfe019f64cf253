"""The host training loop: metrics, TensorBoard, checkpoints, resume, NaN stop, configs."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import jax
import pytest
from _fake_trainer import FakeTrainer

from curiosity_search import cli
from curiosity_search.config import ConfigError, config_from_dict, load_config, save_config
from curiosity_search.train import run, run_dir
from curiosity_search.train.checkpoint import CheckpointStore, checkpoint_dir
from curiosity_search.train.metrics_log import read_rows
from curiosity_search.train.run import TIMING_KEYS
from curiosity_search.train.workdir_lock import RunDirError

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def tiny_config(**sections):
    data = {
        "algorithm": "gumbel",
        "seed": 3,
        "env": {"name": "tic_tac_toe"},
        "train": {"iterations": 4, "batch_size": 8, "updates_per_iteration": 2},
        "selfplay": {"batch_size": 4, "moves_per_iteration": 2},
        "search": {"num_simulations": 2},
        "checkpoint": {"every": 2, "keep": 5},
        "eval": {"every": 0, "num_positions": 0},
        "logging": {"tensorboard": True, "progress": False},
    }
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    return config_from_dict(data)


def fake(nan_at=None):
    return functools.partial(FakeTrainer, nan_at=nan_at)


def comparable(row):
    return {k: v for k, v in row.items() if k not in TIMING_KEYS}


def test_metrics_tensorboard_checkpoints(tmp_path):
    result = run.train(tiny_config(), tmp_path, build_trainer=fake())
    assert result.status == "completed" and result.ok and result.iterations == 4
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4]
    for row in rows:
        for key in ("wall_time_s", "positions", "train_flops", "loss", "counter"):
            assert key in row, key
    assert [r["counter"] for r in rows] == [1, 2, 3, 4]
    assert [r["positions"] for r in rows] == [8.0, 16.0, 24.0, 32.0]
    flops = [r["train_flops"] for r in rows]
    assert flops[0] > 0 and all(b > a for a, b in zip(flops, flops[1:], strict=False))
    assert any((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    assert (tmp_path / "config.yaml").is_file()
    assert load_config(tmp_path / "config.yaml") == tiny_config()
    assert CheckpointStore(checkpoint_dir(tmp_path), read_only=True).steps() == [2, 4]


def test_resume_after_kill_matches_uninterrupted(tmp_path):
    cfg = tiny_config()
    run.train(cfg, tmp_path / "a", build_trainer=fake())
    # Run b is "killed" during iteration 4: row 3 was written, checkpoint 4 never was.
    run.train(cfg, tmp_path / "b", build_trainer=fake())
    shutil.rmtree(checkpoint_dir(tmp_path / "b") / "4")
    metrics_b = tmp_path / "b" / "metrics.jsonl"
    metrics_b.write_text("".join(line + "\n" for line in metrics_b.read_text().splitlines()[:3]))
    result = run.train(cfg, tmp_path / "b", resume=True, build_trainer=fake())
    assert result.iterations == 4
    rows_a = read_rows(tmp_path / "a" / "metrics.jsonl")
    rows_b = read_rows(metrics_b)
    assert [r["iteration"] for r in rows_b] == [1, 2, 3, 4]  # no duplicates
    assert [comparable(r) for r in rows_b] == [comparable(r) for r in rows_a]


def test_extend_finished_run(tmp_path):
    run.train(tiny_config(), tmp_path / "a", build_trainer=fake())
    run.train(tiny_config(train={"iterations": 2}), tmp_path / "b", build_trainer=fake())
    run.train(tiny_config(), tmp_path / "b", resume=True, build_trainer=fake())
    rows_a = read_rows(tmp_path / "a" / "metrics.jsonl")
    rows_b = read_rows(tmp_path / "b" / "metrics.jsonl")
    assert [comparable(r) for r in rows_b] == [comparable(r) for r in rows_a]


def test_workdir_rules(tmp_path):
    cfg = tiny_config(train={"iterations": 2})
    run.train(cfg, tmp_path, build_trainer=fake())
    with pytest.raises(RunDirError, match="--resume"):
        run.train(cfg, tmp_path, build_trainer=fake())
    changed = config_from_dict({**run_dir.config_dict(cfg), "seed": 4})
    with pytest.raises(RunDirError, match=r"seed: 3 -> 4"):
        run.train(changed, tmp_path, resume=True, build_trainer=fake())
    cosine = tiny_config(optimizer={"schedule": "cosine"})
    run.train(tiny_config(optimizer={"schedule": "cosine"}, train={"iterations": 2}),
              tmp_path / "c", build_trainer=fake())
    with pytest.raises(RunDirError, match="schedule"):
        run.train(cosine, tmp_path / "c", resume=True, build_trainer=fake())


def test_nonfinite_loss_stops_and_keeps_last_good_checkpoint(tmp_path, monkeypatch, capsys):
    cfg = tiny_config(checkpoint={"every": 1})
    result = run.train(cfg, tmp_path / "r", build_trainer=fake(nan_at=3))
    assert result.status == "nonfinite" and not result.ok
    assert "iteration 3" in result.message and "loss" in result.message
    assert CheckpointStore(checkpoint_dir(tmp_path / "r"), read_only=True).steps() == [1, 2]
    # The CLI entry point exits non-zero with the message on one line.
    config_path = tmp_path / "nan.yaml"
    save_config(cfg, config_path)
    monkeypatch.setattr(run, "train", functools.partial(run.train, build_trainer=fake(3)))
    assert cli.main(["train", "--config", str(config_path), "--workdir",
                     str(tmp_path / "cli")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert any(line.startswith("stopped: iteration 3 produced loss = nan") for line in err)


def test_time_limit_stops_and_checkpoints(tmp_path):
    cfg = tiny_config(train={"time_limit_s": 1e-9}, checkpoint={"every": 10})
    result = run.train(cfg, tmp_path, build_trainer=fake())
    assert result.status == "time_limit" and result.ok and result.iterations == 1
    assert "time limit" in result.message
    assert CheckpointStore(checkpoint_dir(tmp_path), read_only=True).steps() == [1]
    # The limit counts training time over every session: a resume stops at once.
    again = run.train(cfg, tmp_path, resume=True, build_trainer=fake())
    assert again.status == "time_limit" and again.iterations == 1
    more = run.train(tiny_config(checkpoint={"every": 10}), tmp_path, resume=True,
                     build_trainer=fake())
    assert more.status == "completed" and more.iterations == 4


def test_incomplete_checkpoints_are_skipped(tmp_path):
    cfg = tiny_config()
    run.train(cfg, tmp_path, build_trainer=fake())
    ckpts = checkpoint_dir(tmp_path)
    # A crash mid-write leaves orbax's temporary folder; a hand-truncated one lacks items.
    (ckpts / "6.orbax-checkpoint-tmp-1234" / "state").mkdir(parents=True)
    (ckpts / "5" / "state").mkdir(parents=True)
    store = CheckpointStore(ckpts, read_only=True)
    assert store.latest_step() == 4
    state, counters = store.restore(FakeTrainer(cfg).init(jax.random.key(0)))
    assert counters.iteration == 4 and int(state.counter) == 4
    with pytest.warns(UserWarning, match="incomplete checkpoint folder"):
        result = run.train(tiny_config(train={"iterations": 5}), tmp_path, resume=True,
                           build_trainer=fake())
    assert result.iterations == 5
    assert 5 in CheckpointStore(ckpts, read_only=True).steps()


def test_bad_config_exits_2(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("serch: {}\n")
    assert cli.main(["train", "--config", str(path), "--workdir", str(tmp_path / "w")]) == 2
    assert "serch" in capsys.readouterr().err


@pytest.mark.parametrize(
    "path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name
)
def test_every_config_loads(path):
    try:
        load_config(path)
    except ConfigError as error:
        pytest.fail(f"{path.name}: {error}")


REAL_TINY = [
    "train.iterations=3", "selfplay.batch_size=8", "selfplay.moves_per_iteration=2",
    "selfplay.replay_capacity=64", "train.batch_size=8", "train.updates_per_iteration=2",
    "network.width=16", "network.blocks=1", "search.num_simulations=2",
    "search.eval_num_simulations=2", "eval.every=2", "eval.num_positions=16",
    "checkpoint.every=1", "checkpoint.keep=5", "logging.progress=false",
    "train.time_limit_s=null",
]


def test_real_trainer_resume_matches_and_agent_acts(tmp_path):
    """The real trainer on tiny 3x3 Hex: iteration 3 replayed after a kill equals the
    uninterrupted one, and the run loads as an agent that plays legal moves."""
    from curiosity_search import load_agent

    cfg = load_config(CONFIGS / "quickstart.yaml", REAL_TINY)
    first = run.train(cfg, tmp_path)
    assert first.ok and first.iterations == 3
    assert set(first.evaluation) == {"eval/raw_optimal_move_rate", "eval/search_optimal_move_rate"}
    assert "raw policy optimal-move rate" in first.message
    assert json.loads((tmp_path / "evaluation.json").read_text())["iteration"] == 3
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert "eval/raw_optimal_move_rate" in rows[1] and "eval/raw_optimal_move_rate" in rows[2]
    # Kill during iteration 3: its checkpoint never landed, its row did.
    shutil.rmtree(checkpoint_dir(tmp_path) / "3")
    second = run.train(cfg, tmp_path, resume=True)
    assert second.iterations == 3
    resumed = read_rows(tmp_path / "metrics.jsonl")
    assert [r["iteration"] for r in resumed] == [1, 2, 3]
    assert [comparable(r) for r in resumed] == [comparable(r) for r in rows]

    agent = load_agent(tmp_path)
    states = jax.jit(jax.vmap(agent.env.init))(jax.random.split(jax.random.key(0), 4))
    for n in (0, 2):
        actions = agent.act(jax.random.key(1), states, num_simulations=n)
        assert actions.shape == (4,)
        assert bool(jax.numpy.all(states.legal_action_mask[jax.numpy.arange(4), actions]))
