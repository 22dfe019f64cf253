"""``scripts/device_check.sh --dry-run``: the GPU readiness script's whole path on CPU.

The dry run skips the install, collects the GPU test selection and runs one small
test, benches both 9x9 configs shrunk to a 3x3 board and a 1 x 8 ResNet, and writes
the CSVs the GPU run writes; this checks that each step passes and that the summary
carries finite positions/s, network evaluations/s and fractions of the bf16 peak.
"""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "device_check.sh"


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_dry_run_writes_every_csv(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable}
    result = subprocess.run(["bash", str(SCRIPT), "--dry-run"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=1300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]

    steps = {row["step"]: row for row in _rows(out / "steps.csv")}
    assert steps["install"]["status"] == "skipped"
    for name in ("imports", "tests", "bench_hex9_gumbel_b8", "bench_hex9_curiosity_b8",
                 "summary"):
        assert steps[name]["status"] == "ok", steps[name]

    bench = _rows(out / "bench_train.csv")
    assert [row["config"] for row in bench] == ["hex9_gumbel", "hex9_curiosity"]
    for row in bench:
        assert row["env"] == "hex3" and row["network"] == "resnet 1x8"
        assert row["compute_dtype"] == "bfloat16" and row["games"] == "8"
        # 8 games x 8 moves x (4 simulations + 1) self-play evaluations per iteration.
        assert int(row["network_evaluations"]) == 8 * 8 * 5
        for key in ("positions_per_sec", "evaluations_per_sec", "forward_flops",
                    "flops_per_iteration", "flops_per_sec", "selfplay_evaluations_per_sec"):
            assert math.isfinite(float(row[key])) and float(row[key]) > 0, (key, row[key])

    summary = _rows(out / "bench_summary.csv")
    assert len(summary) == 2
    for row in summary:
        assert float(row["peak_bf16_flops"]) == 989e12
        assert 0 < float(row["peak_fraction"]) < 1
        assert math.isclose(float(row["peak_fraction"]),
                            float(row["flops_per_sec"]) / 989e12, rel_tol=0.01)
    assert (out / "tests.xml").exists() and (out / "env.txt").exists()
    assert "== steps" in (out / "device_check.log").read_text()


def test_unknown_argument_and_missing_out_are_refused(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "OUT"}
    bad = subprocess.run(["bash", str(SCRIPT), "--bogus"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown argument --bogus" in bad.stderr
    no_out = subprocess.run(["bash", str(SCRIPT), "--dry-run"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=60)
    assert no_out.returncode == 2 and "set OUT" in no_out.stderr
