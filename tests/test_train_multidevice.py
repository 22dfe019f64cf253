"""``train()`` over several devices and several processes gives the one-device numbers.

The real trainer on tiny 3x3 Hex (batch 8 games, 2 simulations, 2 iterations, 16-wide
MLP): a 4-device mesh (conftest's host devices) writes the same losses as a 1-device
mesh, resumes from a sharded checkpoint (and from a 1-device one), and two processes
with one CPU device each (``jax.distributed`` over gloo) match one process with two.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from curiosity_search.config import ConfigError, load_config
from curiosity_search.train import run
from curiosity_search.train.checkpoint import checkpoint_dir
from curiosity_search.train.distributed import DistributedError, distributed_kwargs
from curiosity_search.train.metrics_log import read_rows

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"
TINY = [
    "train.iterations=2", "selfplay.batch_size=8", "selfplay.moves_per_iteration=2",
    "selfplay.replay_capacity=64", "train.batch_size=8", "train.updates_per_iteration=2",
    "network.width=16", "network.blocks=1", "search.num_simulations=2",
    "search.eval_num_simulations=2", "eval.every=0", "eval.num_positions=0",
    "checkpoint.every=1", "checkpoint.keep=5", "logging.progress=false",
    "logging.tensorboard=false", "train.time_limit_s=null",
]
LOSS_KEYS = ("loss", "policy_loss", "value_loss", "grad_norm")
SUBPROCESS_TIMEOUT_S = 240

needs_4 = pytest.mark.skipif(len(jax.devices()) < 4, reason="needs 4 (host) devices")


def losses(workdir: Path) -> list[dict[str, float]]:
    rows = read_rows(workdir / "metrics.jsonl")
    return [{"iteration": r["iteration"], **{k: r[k] for k in LOSS_KEYS}} for r in rows]


def assert_same_losses(a: list[dict[str, float]], b: list[dict[str, float]]) -> None:
    assert [r["iteration"] for r in a] == [r["iteration"] for r in b] == [1, 2]
    for row_a, row_b in zip(a, b, strict=True):
        for key in LOSS_KEYS:
            np.testing.assert_allclose(row_a[key], row_b[key], rtol=1e-4, err_msg=key)


@needs_4
def test_four_devices_match_one_and_resume_sharded(tmp_path):
    cfg = load_config(QUICKSTART, TINY)
    one = run.train(cfg, tmp_path / "one", devices=jax.devices()[:1])
    four = run.train(cfg, tmp_path / "four")
    assert one.ok and four.ok and four.iterations == 2
    assert_same_losses(losses(tmp_path / "four"), losses(tmp_path / "one"))

    # Killed during iteration 2: resume the 4-device run from its sharded checkpoint 1.
    shutil.rmtree(checkpoint_dir(tmp_path / "four") / "2")
    again = run.train(cfg, tmp_path / "four", resume=True)
    assert again.iterations == 2
    assert_same_losses(losses(tmp_path / "four"), losses(tmp_path / "one"))
    # A checkpoint does not remember its mesh: the 1-device run resumes on 4 devices.
    shutil.rmtree(checkpoint_dir(tmp_path / "one") / "2")
    moved = run.train(cfg, tmp_path / "one", resume=True)
    assert moved.iterations == 2
    assert_same_losses(losses(tmp_path / "one"), losses(tmp_path / "four"))


@needs_4
def test_indivisible_batch_is_a_config_error(tmp_path):
    cfg = load_config(QUICKSTART, [*TINY, "selfplay.batch_size=6"])
    with pytest.raises(ConfigError, match=r"selfplay\.batch_size \(6\).*replay_capacity") as info:
        run.train(cfg, tmp_path)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "metrics.jsonl").exists()


def test_distributed_environment_variables():
    assert distributed_kwargs({}) is None
    assert distributed_kwargs({"CURIOSITY_SEARCH_DISTRIBUTED": "auto"}) == {}
    env = {
        "CURIOSITY_SEARCH_COORDINATOR": "10.0.0.1:1234",
        "CURIOSITY_SEARCH_NUM_PROCESSES": "4",
        "CURIOSITY_SEARCH_PROCESS_ID": "3",
        "CURIOSITY_SEARCH_LOCAL_DEVICE_IDS": "0,1",
        "CURIOSITY_SEARCH_INIT_TIMEOUT_S": "60",
    }
    assert distributed_kwargs(env) == {
        "coordinator_address": "10.0.0.1:1234", "num_processes": 4, "process_id": 3,
        "local_device_ids": [0, 1], "initialization_timeout": 60,
    }
    assert distributed_kwargs({**env, "CURIOSITY_SEARCH_DISTRIBUTED": "off"}) is None
    with pytest.raises(DistributedError, match="CURIOSITY_SEARCH_PROCESS_ID is missing"):
        distributed_kwargs({"CURIOSITY_SEARCH_COORDINATOR": "h:1",
                            "CURIOSITY_SEARCH_NUM_PROCESSES": "2"})
    with pytest.raises(DistributedError, match=r"must be in \[0, "):
        distributed_kwargs({**env, "CURIOSITY_SEARCH_PROCESS_ID": "4"})
    with pytest.raises(DistributedError, match="host:port"):
        distributed_kwargs({**env, "CURIOSITY_SEARCH_COORDINATOR": "nohost"})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
@pytest.mark.skipif(len(jax.devices()) < 2, reason="the reference run needs 2 (host) devices")
def test_two_processes_match_one_process_with_two_devices(tmp_path):
    """``curiosity-search train`` as two localhost processes with one CPU device each."""
    cfg = load_config(QUICKSTART, TINY)
    reference = run.train(cfg, tmp_path / "reference", devices=jax.devices()[:2])
    assert reference.ok

    workdir = tmp_path / "multihost"
    port = _free_port()
    command = [sys.executable, "-m", "curiosity_search.cli", "train", "--config",
               str(QUICKSTART), "--workdir", str(workdir), "--set", *TINY]
    procs = []
    start = time.perf_counter()
    for process_id in range(2):
        env = {
            **os.environ,
            "XLA_FLAGS": "--xla_force_host_platform_device_count=1",
            "JAX_PLATFORMS": "cpu",
            "CURIOSITY_SEARCH_COORDINATOR": f"127.0.0.1:{port}",
            "CURIOSITY_SEARCH_NUM_PROCESSES": "2",
            "CURIOSITY_SEARCH_PROCESS_ID": str(process_id),
            "CURIOSITY_SEARCH_INIT_TIMEOUT_S": str(SUBPROCESS_TIMEOUT_S // 2),
        }
        procs.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outputs = []
    try:
        for proc in procs:
            remaining = max(1.0, SUBPROCESS_TIMEOUT_S - (time.perf_counter() - start))
            outputs.append(proc.communicate(timeout=remaining)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for process_id, (proc, output) in enumerate(zip(procs, outputs, strict=True)):
        assert proc.returncode == 0, f"process {process_id} failed:\n{output[-3000:]}"
    assert "completed 2 iterations" in outputs[0]  # only process 0 reports
    assert "completed 2 iterations" not in outputs[1]
    assert_same_losses(losses(workdir), losses(tmp_path / "reference"))
    assert sorted(p.name for p in checkpoint_dir(workdir).iterdir()) == ["1", "2"]
