"""The worked examples in docs/fork_search_kernel.md run as written."""

import re
from pathlib import Path

import yaml

from curiosity_search.config import load_config
from curiosity_search.rules import RULES
from curiosity_search.train import run

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "fork_search_kernel.md"
TRAIN_SECTION = "## Train with your rule"
PYTHON = r"```python\n(.*?)```"


def _kernel_part() -> str:
    return DOC.read_text().split(TRAIN_SECTION)[0]


def _train_part() -> str:
    text = DOC.read_text().split(TRAIN_SECTION)[1]
    return text.split("\n## ")[0]


def test_fork_example_runs():
    blocks = re.findall(PYTHON, _kernel_part(), flags=re.DOTALL)
    assert len(blocks) >= 3
    namespace: dict = {}
    exec(compile("\n".join(blocks), str(DOC), "exec"), namespace)  # asserts inside
    assert "ucb1_policy" in namespace and "ema_backup" in namespace


def test_train_with_the_docs_ucb1_rule_from_yaml(tmp_path):
    # The doc's rule file (the policy from the kernel part, then the builder and the
    # registry line), its YAML file, and two tiny training iterations.
    blocks = re.findall(PYTHON, _kernel_part(), flags=re.DOTALL)[:1]
    blocks += re.findall(PYTHON, _train_part(), flags=re.DOTALL)
    (config_text,) = re.findall(r"```yaml\n(.*?)```", _train_part(), flags=re.DOTALL)
    raw = yaml.safe_load(config_text)
    assert raw["search"]["rule"] == "ucb1"
    raw["extends"] = str(ROOT / "configs" / raw["extends"])
    config_file = tmp_path / "ucb1.yaml"
    config_file.write_text(yaml.safe_dump(raw))
    assert "ucb1" not in RULES
    namespace: dict = {}
    try:
        exec(compile("\n".join(blocks), str(DOC), "exec"), namespace)  # registers "ucb1"
        assert RULES["ucb1"].make_policy is namespace["make_ucb1_policy"]
        calls = []
        policy = namespace["ucb1_policy"]

        def counted_policy(*args, **kwargs):  # runs when self-play's search is traced
            calls.append(kwargs.get("c"))
            return policy(*args, **kwargs)

        namespace["ucb1_policy"] = counted_policy  # what make_ucb1_policy binds
        cfg = load_config(config_file, [
            "env.size=3", "network.width=16", "network.blocks=1",
            "search.num_simulations=4", "search.eval_num_simulations=4",
            "selfplay.batch_size=8", "selfplay.moves_per_iteration=9",
            "selfplay.random_opening_moves=2", "selfplay.replay_capacity=64",
            "train.iterations=2", "train.batch_size=8", "train.updates_per_iteration=2",
            "eval.every=0", "checkpoint.every=1", "logging.progress=false",
            "logging.tensorboard=false",
        ])
        assert cfg.search.rule == "ucb1"
        result = run.train(cfg, tmp_path / "run")
        assert result.ok and result.iterations == 2
        assert calls and set(calls) == {1.4}  # self-play searched with the doc's policy
    finally:
        RULES.pop("ucb1", None)
