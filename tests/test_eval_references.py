"""Frozen reference opponents: train -> freeze (params only) -> assess -> play as ``reference``."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from train_fixtures import TINY_HEX

from curiosity_search import load_agent
from curiosity_search.eval import reference_player, references
from curiosity_search.eval.arena import play_match
from curiosity_search.eval.player_specs import parse_player
from curiosity_search.eval.players import GameSpec, random_player
from curiosity_search.train.checkpoint import CheckpointError

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
HEX3 = GameSpec("hex", {"size": 3, "swap": False})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A tiny 3x3 reference built by ``build_reference`` into a temporary folder."""
    root = tmp_path_factory.mktemp("refs")
    info = references.build_reference(
        CONFIGS / "references" / "hex3.yaml",
        overrides=TINY_HEX,
        workdir=root / "run",
        out=root / "hex3",
        games=4,
    )
    return root, info


def test_build_reference_freezes_params_and_reports_quality(built):
    root, info = built
    out = root / "hex3"
    assert sorted(p.name for p in out.iterdir()) == [
        "config.yaml", "frozen.json", "params.msgpack", "reference.json"
    ]
    on_disk = json.loads((out / "reference.json").read_text())
    assert on_disk == info
    assert info["name"] == "hex3" and info["simulations"] == 2 and info["iterations"] == 2
    opponents = [m["opponent"] for m in info["quality"]["matches"]]
    assert opponents[:2] == ["solver", "random"] and opponents[2].startswith("raw policy")
    for match in info["quality"]["matches"]:
        assert match["games"] == 4 and 0.0 <= match["score"] <= 1.0
        assert match["ci_low"] <= match["score"] <= match["ci_high"]
    rates = info["quality"]["optimal_move_rate"]
    assert rates["positions"] == 512 and 0.0 <= rates["raw"] <= 1.0


def test_frozen_params_equal_the_last_checkpoint(built):
    root, _ = built
    frozen, trained = load_agent(root / "hex3"), load_agent(root / "run")
    assert frozen.iteration == trained.iteration == 2
    for a, b in zip(jax.tree.leaves(frozen.params), jax.tree.leaves(trained.params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # the frozen folder holds parameters only: far smaller than a full checkpoint
    assert (root / "hex3" / "params.msgpack").stat().st_size < 20_000


def test_second_build_skips_training(built, capsys):
    root, first = built
    again = references.build_reference(
        CONFIGS / "references" / "hex3.yaml", overrides=TINY_HEX, workdir=root / "run",
        out=root / "hex3_again", games=4,
    )
    assert "training already finished" in capsys.readouterr().out
    assert again["iterations"] == first["iterations"]


def test_reference_player_plays_legal_games(built):
    root, _ = built
    player = reference_player.reference_player(HEX3, root=root)
    assert player.name == "reference:hex3@2"
    env = load_agent(root / "hex3").env
    result = play_match(jax.random.key(0), player, random_player(), env, 4)
    assert result.illegal_a == 0 and result.games == 4
    assert reference_player.reference_player(HEX3, 0, root=root).name == "reference:hex3@0"


def test_missing_reference_names_the_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="configs/references/hex3.yaml"):
        reference_player.reference_player(HEX3, root=tmp_path)


def test_frozen_params_must_match_the_config(built, tmp_path):
    root, _ = built
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "params.msgpack").write_bytes((root / "hex3" / "params.msgpack").read_bytes())
    config = (root / "hex3" / "config.yaml").read_text().replace("width: 16", "width: 24")
    (bad / "config.yaml").write_text(config)
    with pytest.raises(CheckpointError, match="shapes differ"):
        load_agent(bad)


@pytest.mark.parametrize("size", [3, 4, 5])
def test_committed_references_load_and_play(size):
    """The frozen references shipped with the package work on a fresh clone."""
    game = GameSpec("hex", {"size": size, "swap": False})
    info = json.loads((reference_player.reference_dir(game) / "reference.json").read_text())
    assert info["name"] == f"hex{size}" and info["quality"]["matches"]
    player = parse_player("reference@1", game)
    env = load_agent(reference_player.reference_dir(game)).env
    result = play_match(jax.random.key(size), player, random_player(), env, 2)
    assert result.illegal_a == 0


def test_sweep_plan_falls_back_when_no_reference_is_shipped():
    """hex_scaling_gpu lists [solver, reference, mcts:256]: 7x7 has neither of the first two."""
    from curiosity_search.envs import make
    from curiosity_search.eval.evaluation import EvalPlan, build_opponents

    game = GameSpec("hex", {"size": 7, "swap": False})
    plan = EvalPlan(reference=("solver", "reference", "random"), opponents=())
    (player, is_reference), = build_opponents(plan, game, make("hex", size=7))
    assert is_reference and player.name == "random"
    plan5 = EvalPlan(reference=("solver", "reference"), opponents=())
    game5 = GameSpec("hex", {"size": 5, "swap": False})
    (player5, _), = build_opponents(plan5, game5, make("hex", size=5))
    assert player5.name == "reference:hex5@64"
