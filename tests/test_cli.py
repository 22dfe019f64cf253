"""The command line: verbs, usage errors, config errors, lazy dispatch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from curiosity_search import cli
from curiosity_search.config import load_config

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"
VERBS = ["train", "eval", "sweep", "plot", "bench", "play", "explain"]


@pytest.fixture
def calls(monkeypatch):
    """Replaces dispatch with a recorder, so no handler (and no JAX work) runs."""
    recorded = []
    monkeypatch.setattr(cli, "dispatch", lambda verb, args: recorded.append((verb, args)) or 0)
    return recorded


def test_help_lists_every_verb(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for verb in VERBS:
        assert f"\n    {verb} " in out


@pytest.mark.parametrize("verb", VERBS)
def test_each_verb_has_help(verb, capsys):
    assert cli.main([verb, "--help"]) == 0
    assert f"usage: curiosity-search {verb}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["trian"],
        [],
        ["train", "--bogus"],
        ["eval", "--games", "3"],  # --checkpoint missing
        ["eval", "--checkpoint", "x", "--games", "-1"],
        ["sweep", "s.yaml", "--shard", "4/4"],
        ["bench", "nothing"],
    ],
)
def test_usage_errors_exit_2(argv, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("curiosity-search")
    assert "error:" in err.strip().splitlines()[-1]


def test_bad_config_is_one_line_exit_2(tmp_path, calls, capsys):
    code = cli.main(["train", "--config", str(QUICKSTART), "--set", "search.rule=pucct"])
    assert code == 2 and not calls
    err = capsys.readouterr().err
    assert err == "error: search.rule: 'pucct' is not one of puct, gumbel, curiosity, uct_p_nn\n"
    assert cli.main(["train", "--config", str(tmp_path / "none.yaml")]) == 2
    assert capsys.readouterr().err.startswith("error: config file not found")
    assert cli.main(["train"]) == 2
    assert "needs --config" in capsys.readouterr().err


def test_train_writes_resolved_config(tmp_path, calls, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["train", "--config", str(QUICKSTART), "--set", "train.iterations=3", "seed=5"]
    assert cli.main(argv) == 0
    ((verb, args),) = calls
    assert verb == "train" and args.workdir == Path("runs") / "quickstart"
    assert args.set == ["train.iterations=3", "seed=5"] and args.resume is False
    saved = load_config(tmp_path / "runs" / "quickstart" / "config.yaml")
    assert saved == args.cfg and saved.train.iterations == 3 and saved.seed == 5
    # --resume without --config reloads the run's own config.
    assert cli.main(["train", "--resume", "--workdir", "runs/quickstart"]) == 0
    assert calls[-1][1].cfg == saved
    assert calls[-1][1].config == Path("runs/quickstart/config.yaml")


def test_bench_validates_config(calls, capsys):
    assert cli.main(["bench", "search", "--set", "search.num_simulations=8"]) == 0
    assert calls[-1][1].cfg.search.num_simulations == 8
    assert cli.main(["bench", "train", "--set", "serch.rule=puct"]) == 2
    assert "did you mean 'search'?" in capsys.readouterr().err


def test_bench_train_baseline(calls, capsys):
    argv = ["bench", "train", "--config", "configs/hex5_curiosity.yaml", "--set",
            "search.pbest_updates=incremental", "--baseline", "configs/hex5_gumbel.yaml",
            "--rounds", "4"]
    assert cli.main(argv) == 0
    args = calls[-1][1]
    assert args.cfg.search.rule == "curiosity" and args.cfg.search.pbest_updates == "incremental"
    assert args.baseline_cfg.search.rule == "gumbel" and args.rounds == 4
    assert cli.main(["bench", "search", "--baseline", "configs/hex5_gumbel.yaml"]) == 2
    assert "applies to 'bench train' only" in capsys.readouterr().err
    assert cli.main(["bench", "train", "--baseline", "nowhere.yaml"]) == 2
    assert "nowhere.yaml" in capsys.readouterr().err


def test_parsed_arguments(calls):
    assert cli.main(["sweep", "s.yaml", "--dry-run", "--shard", "1/4", "--jobs", "2"]) == 0
    args = calls[-1][1]
    assert (args.file, args.dry_run, args.shard, args.jobs) == (Path("s.yaml"), True, (1, 4), 2)
    assert cli.main(["explain", "--checkpoint", "r", "--moves", "a1 b2"]) == 0
    assert calls[-1][1].moves == "a1 b2"
    assert cli.main(["eval", "--checkpoint", "r", "--opponent", "random", "--games", "8"]) == 0
    assert (calls[-1][1].opponent, calls[-1][1].games) == ("random", 8)


def test_missing_module_is_an_error_not_success(monkeypatch):
    monkeypatch.setitem(cli.HANDLERS, "plot", ("curiosity_search.eval.no_such_module", "f"))
    with pytest.raises(ModuleNotFoundError, match="no_such_module"):
        cli.main(["plot", "somewhere"])


def test_broken_module_import_is_not_swallowed(monkeypatch, tmp_path):
    (tmp_path / "cs_fake_verb.py").write_text("import curiosity_search.no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.HANDLERS, "plot", ("cs_fake_verb", "plot_main"))
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency"):
        cli.main(["plot", "somewhere"])


def test_handler_result_is_exit_code(monkeypatch, tmp_path):
    (tmp_path / "cs_fake_plot.py").write_text("def plot_main(args):\n    return 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.HANDLERS, "plot", ("cs_fake_plot", "plot_main"))
    assert cli.main(["plot", "somewhere"]) == 3


def test_module_entry_point_without_traceback(tmp_path):
    run = lambda *argv: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "curiosity_search.cli", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    result = run("train", "--config", str(QUICKSTART), "--set", "search.num_simulations=-3")
    assert result.returncode == 2
    assert result.stderr.startswith("error: search.num_simulations: -3 is not a positive integer")
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    result = run("frobnicate")
    assert result.returncode == 2 and "invalid choice" in result.stderr
