"""Sweeps: grid expansion, sharding, dry runs, resume-skips-finished (fake train)."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from curiosity_search.sweeps.jobs import run_parallel
from curiosity_search.sweeps.sweep import (
    DONE_FILENAME,
    SweepError,
    expand_grid,
    load_sweep,
    parse_shard,
    run_status,
    run_sweep,
    shard,
)

REPO = Path(__file__).resolve().parents[1]

SWEEP = f"""
name: tiny
base:
  extends: {REPO / "configs" / "quickstart.yaml"}
  train: {{iterations: 3}}
set: [checkpoint.every=1]
grid:
  board:
    - {{name: hex3, set: [env.size=3]}}
    - {{name: hex4, set: [env.size=4, train.iterations=5]}}
  algorithm: [algorithm=gumbel, algorithm=curiosity]
  seed: [seed=0, seed=1]
evaluation:
  reference: [solver, random]
  opponents: [random]
  games: 4
"""


@pytest.fixture
def sweep_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(SWEEP)
    return path


class FakeTrain:
    """Records calls; raises for the runs named in ``crash``."""

    def __init__(self, crash: tuple[str, ...] = ()):
        self.calls: list[tuple[str, bool]] = []
        self.crash = crash

    def __call__(self, cfg, workdir, resume=False):
        self.calls.append((cfg.name, resume))
        (Path(workdir) / "config.yaml").write_text(f"name: {cfg.name}\n")
        if cfg.name in self.crash:
            raise RuntimeError("simulated crash")
        return None


def _no_eval(run_dir, plan) -> None:
    (Path(run_dir) / "eval.csv").write_text("run\n")


def test_expansion_names_overrides_and_configs(sweep_file: Path, tmp_path: Path) -> None:
    sweep = load_sweep(sweep_file, tmp_path / "out")
    names = [r.name for r in sweep.runs]
    assert len(names) == 8 and names == sorted(names)
    assert "hex4-curiosity-seed1" in names
    run = sweep.get("hex4-curiosity-seed1")
    assert run.overrides == (
        "checkpoint.every=1",
        "env.size=4",
        "train.iterations=5",
        "algorithm=curiosity",
        "seed=1",
        "name=hex4-curiosity-seed1",
    )
    cfg = sweep.config(run)
    assert (cfg.env.size, cfg.algorithm, cfg.seed, cfg.train.iterations) == (4, "curiosity", 1, 5)
    assert sweep.config(sweep.get("hex3-gumbel-seed0")).train.iterations == 3  # inline base
    assert cfg.search.rule == "curiosity"  # the algorithm bundle follows the override
    assert sweep.evaluation.games == 4 and sweep.root == tmp_path / "out"


def test_entry_forms_and_errors() -> None:
    runs = expand_grid({"lr": ["optimizer.learning_rate=0.001"], "net": [["network.width=8"]]})
    assert [r.name for r in runs] == ["lr0.001-net8"]
    with pytest.raises(SweepError, match="repeat"):
        expand_grid({"a": [{"name": "x", "set": ["seed=1"]}, {"name": "x", "set": ["seed=2"]}]})
    with pytest.raises(SweepError, match="grid.a"):
        expand_grid({"a": [{"nme": "x"}]})
    with pytest.raises(SweepError, match="key.path=value"):
        expand_grid({"a": [{"name": "x", "set": ["seed"]}]})


def test_load_errors_name_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("base: x.yaml\ngird: {}\n")
    with pytest.raises(SweepError, match="gird"):
        load_sweep(bad)
    bad.write_text(SWEEP.replace("games: 4", "games: 0"))
    with pytest.raises(SweepError, match="evaluation.games"):
        load_sweep(bad)


def test_shards_partition_the_sorted_runs(sweep_file: Path) -> None:
    runs = load_sweep(sweep_file).runs
    parts = [shard(runs, i, 3) for i in range(3)]
    assert [len(p) for p in parts] == [3, 3, 2]
    assert sorted(r.name for p in parts for r in p) == [r.name for r in runs]
    assert [r.name for r in parts[1]] == [runs[1].name, runs[4].name, runs[7].name]
    assert parse_shard("2/3") == (2, 3)
    for bad in ("3/3", "x/2", "-1/2"):
        with pytest.raises(SweepError):
            parse_shard(bad)


def test_dry_run_lists_without_running(sweep_file: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    sweep = load_sweep(sweep_file, tmp_path / "out")
    fake = FakeTrain()
    run_sweep(sweep, shard_spec=(1, 2), dry_run=True, train_fn=fake, out=lines.append)
    assert len([ln for ln in lines if ln.startswith("new")]) == 4
    assert fake.calls == [] and not (tmp_path / "out").exists()


def test_resume_skips_finished_and_resumes_crashed(sweep_file: Path, tmp_path: Path) -> None:
    sweep = load_sweep(sweep_file, tmp_path / "out")
    crashed = "hex3-gumbel-seed1"
    first = FakeTrain(crash=(crashed,))
    failed = run_sweep(sweep, train_fn=first, evaluate_fn=_no_eval, out=lambda s: None)
    assert failed == [crashed]
    assert len(first.calls) == 8 and not any(resume for _, resume in first.calls)
    assert run_status(sweep.run_dir(sweep.get(crashed))) == "partial"
    done = [r for r in sweep.runs if r.name != crashed]
    assert all((sweep.run_dir(r) / DONE_FILENAME).exists() for r in done)

    second = FakeTrain()
    assert run_sweep(sweep, train_fn=second, evaluate_fn=_no_eval, out=lambda s: None) == []
    assert second.calls == [(crashed, True)]  # only the crashed run, resumed
    third = FakeTrain()
    run_sweep(sweep, train_fn=third, evaluate_fn=_no_eval, out=lambda s: None)
    assert third.calls == []


def test_parallel_jobs_run_child_processes(sweep_file: Path, tmp_path: Path) -> None:
    sweep = load_sweep(sweep_file, tmp_path / "out")
    script = (
        "import pathlib, sys; p = pathlib.Path(sys.argv[1]); p.mkdir(parents=True); "
        "(p / 'DONE').write_text('{}') if 'seed0' in p.name else sys.exit(3)"
    )

    def command(sweep, run):
        return [sys.executable, "-c", script, str(sweep.run_dir(run))]

    lines: list[str] = []
    runs = shard(sweep.runs, 0, 2)
    failed = run_parallel(sweep, runs, 3, lines.append, command=command,
                          finished=lambda run: run_status(sweep.run_dir(run)) == "done")
    assert sorted(failed) == sorted(r.name for r in runs if "seed1" in r.name)
    assert all(run_status(sweep.run_dir(r)) == "done" for r in runs if "seed0" in r.name)
    assert sum(ln.startswith("started") for ln in lines) == len(runs)


def test_sweep_verb_dry_run(sweep_file: Path, tmp_path: Path, capsys) -> None:
    from curiosity_search import cli

    argv = ["sweep", str(sweep_file), "--dry-run", "--shard", "0/4", "--workdir",
            str(tmp_path / "root")]
    assert cli.main(argv) == 0
    assert "2 run(s) in shard 0/4 of tiny" in capsys.readouterr().out


END_TO_END = """
name: e2e
base:
  algorithm: gumbel
  env: {name: tic_tac_toe}
  train: {iterations: 2, batch_size: 8, updates_per_iteration: 2}
  selfplay: {batch_size: 4, moves_per_iteration: 2}
  search: {num_simulations: 2}
  checkpoint: {every: 1, keep: 10}
  eval: {every: 0, num_positions: 0}
  logging: {tensorboard: false, progress: false}
grid:
  seed: [seed=0]
evaluation:
  reference: [solver]
  opponents: [random]
  games: 4
  opening_moves: 1
  simulations: [0]
"""


def test_sweep_end_to_end_with_fake_trainer(tmp_path: Path, monkeypatch) -> None:
    """Train (fake trainer) -> evaluate every checkpoint -> DONE -> plots, one compile;
    then ``curiosity-search eval`` on the finished run."""
    import functools

    from _fake_trainer import FakeTrainer

    import curiosity_search
    from curiosity_search.eval.evaluation import evaluate_checkpoint, evaluate_run
    from curiosity_search.plots.make import make_plots
    from curiosity_search.train import agent as agent_module
    from curiosity_search.train.run import train

    trainers: list[FakeTrainer] = []

    def build(cfg):
        trainers.append(FakeTrainer(cfg))
        return trainers[-1]

    path = tmp_path / "e2e.yaml"
    path.write_text(END_TO_END)
    sweep = load_sweep(path, tmp_path / "results")
    messages: list[str] = []
    failed = run_sweep(
        sweep,
        train_fn=functools.partial(train, build_trainer=build),
        evaluate_fn=functools.partial(evaluate_run, build_trainer=build),
        out=messages.append,
    )
    assert failed == [], messages
    run_dir = sweep.run_dir(sweep.runs[0])
    assert run_status(run_dir) == "done"
    with open(run_dir / "eval.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["iteration"], r["player_b"], r["reference"]) for r in rows] == [
        ("1", "solver", "1"),
        ("1", "random", "0"),
        ("2", "solver", "1"),
        ("2", "random", "0"),
    ]
    assert all(float(r["train_flops"]) > 0 and float(r["wall_time_s"]) > 0 for r in rows)
    assert {r["role"] for r in rows} == {"apprentice"} and rows[0]["algorithm"] == "gumbel"
    assert all(int(r["games"]) == 4 for r in rows)
    # The act function is traced once for both checkpoints and both opponents.
    assert trainers[-1].act_traces == {0: 1}
    paths = make_plots([sweep.root], tmp_path / "figures")
    assert any(p.name == "win_rate_vs_flops.png" for p in paths)

    monkeypatch.setattr(
        curiosity_search,
        "load_agent",
        functools.partial(agent_module.load_agent, build_trainer=build),
    )
    evaluate_checkpoint(run_dir, "random", 4, simulations=0, seed=0)
    with open(run_dir / "arena.csv", newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["player_b"], row["games"], row["iteration"]) == ("random", "4", "2")


def test_sequential_sweep_frees_each_runs_compiled_programs(
    sweep_file: Path, tmp_path: Path
) -> None:
    """Each run starts with JAX's in-memory caches empty, a crashed run's too, so a
    long sweep in one process does not keep every run's executables mapped."""
    traces: list[tuple[int, ...]] = []  # the Python body runs once per trace
    square = jax.jit(lambda x: traces.append(x.shape) or x * x)

    def train(cfg, workdir, resume=False):
        square(jnp.ones(3))  # the same program every run: traced again only if freed
        (Path(workdir) / "config.yaml").write_text(f"name: {cfg.name}\n")
        if cfg.name == "hex3-gumbel-seed1":
            raise RuntimeError("simulated crash")

    sweep = load_sweep(sweep_file, tmp_path / "out")
    failed = run_sweep(sweep, train_fn=train, evaluate_fn=_no_eval, out=lambda s: None)
    assert failed == ["hex3-gumbel-seed1"]
    assert len(traces) == 8  # each of the 8 runs traced (and compiled) it afresh
    square(jnp.ones(3))
    traced = len(traces)
    square(jnp.ones(3))
    assert len(traces) == traced  # the check above can fail: the cache does keep a program
