"""Bitwise check: one training iteration of each algorithm, hashed, against another commit.

A refactor that claims "behaviour unchanged" must leave the trained parameters
identical bit for bit. This runs one compiled training iteration (self-play, then the
updates) of every algorithm on tiny 3x3 Hex configs (``configs/base.yaml`` plus the
overrides below, an MLP) and prints a SHA-256 of the resulting parameters and of the
whole train state per case::

    python scripts/bitwise_check.py                    # hashes of this checkout
    python scripts/bitwise_check.py --json hashes.json # ...also written to a file
    python scripts/bitwise_check.py --against 501b782  # and compared with that commit

``--against REF`` checks REF out into a temporary ``git worktree``, runs this same
script there (same interpreter, ``PYTHONPATH`` pointing at the worktree, so that its
``curiosity_search`` and its ``configs/base.yaml`` are used) and exits 1 when any
hash differs. Every game of 3x3 Hex ends within the iteration's 9 moves, so the
replay is filled and the updates run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

TINY = (
    "env.name=hex",
    "env.size=3",
    "env.swap=false",
    "network.trunk=mlp",
    "network.blocks=1",
    "network.width=16",
    "search.eval_num_simulations=4",
    "selfplay.batch_size=8",
    "selfplay.moves_per_iteration=9",
    "selfplay.random_opening_moves=2",
    "selfplay.sampling_moves=2",
    "selfplay.replay_capacity=128",
    "train.iterations=2",
    "train.batch_size=16",
    "train.updates_per_iteration=2",
    "eval.every=0",
    "logging.progress=false",
    "logging.tensorboard=false",
)

# name -> (algorithm, extra overrides); one case per algorithm plus the warm start.
SEARCH = ("search.num_simulations=4",)
CASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "alphazero": ("alphazero", SEARCH),
    "gumbel": ("gumbel", SEARCH),
    "curiosity": ("curiosity", SEARCH),
    "exit": ("exit", SEARCH),
    "reinforce": ("reinforce", ()),  # learns without search (num_simulations 0)
    "alphazero_warm_start": ("alphazero", (*SEARCH, "train.warm_start_iterations=1")),
}


def tree_sha256(tree) -> str:
    """SHA-256 over every leaf's path, dtype, shape and bytes (PRNG keys as key data)."""
    import jax
    import numpy as np

    digest = hashlib.sha256()
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        array = np.asarray(jax.device_get(leaf))
        digest.update(jax.tree_util.keystr(path).encode())
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def run_cases() -> dict[str, dict[str, str]]:
    """``{case: {"params": sha256, "state": sha256}}`` for this interpreter's package."""
    import jax

    import curiosity_search
    from curiosity_search.config import load_config
    from curiosity_search.train.trainer import build_trainer

    base = Path(curiosity_search.__file__).resolve().parents[1] / "configs" / "base.yaml"
    hashes = {}
    for name, (algorithm, extra) in CASES.items():
        cfg = load_config(base, [f"algorithm={algorithm}", *TINY, *extra])
        trainer = build_trainer(cfg)
        state = trainer.init(jax.random.key(cfg.seed))
        state, _ = jax.jit(trainer.iteration)(state, jax.random.key(1))
        state = state.replace(hyperparams=None)  # the config's values, not trained
        hashes[name] = {"params": tree_sha256(state.params), "state": tree_sha256(state)}
        print(f"{name:22s} params {hashes[name]['params']}  state {hashes[name]['state']}",
              flush=True)
    return hashes


def hashes_at(ref: str) -> dict[str, dict[str, str]]:
    """The hashes of commit ``ref``, computed in a temporary worktree."""
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="bitwise_check_") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", "--quiet",
                        str(tree), ref], check=True)
        try:
            out = Path(tmp) / "hashes.json"
            env = {**os.environ, "PYTHONPATH": str(tree)}
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "--json", str(out),
                            "--expect-package-in", str(tree)], check=True, env=env)
            return json.loads(out.read_text())
        finally:
            subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force",
                            str(tree)], check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REF", help="compare with this git commit")
    parser.add_argument("--json", metavar="FILE", help="also write the hashes here")
    parser.add_argument("--expect-package-in", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.expect_package_in:
        import curiosity_search

        where = Path(curiosity_search.__file__).resolve()
        if Path(args.expect_package_in).resolve() not in where.parents:
            print(f"error: imported curiosity_search from {where}", file=sys.stderr)
            return 2
    if args.against:
        print(f"== {args.against}", flush=True)
        reference = hashes_at(args.against)
        print("== this checkout", flush=True)
    hashes = run_cases()
    if args.json:
        Path(args.json).write_text(json.dumps(hashes, indent=2) + "\n")
    if not args.against:
        return 0
    mismatches = [
        f"{name} {kind}" for name in CASES for kind in ("params", "state")
        if reference.get(name, {}).get(kind) != hashes[name][kind]
    ]
    for name in CASES:
        same = "identical" if not [m for m in mismatches if m.startswith(name + " ")] else "DIFFER"
        print(f"{name:22s} {same}")
    if mismatches:
        print(f"MISMATCH against {args.against}: {', '.join(mismatches)}")
        return 1
    print(f"all {len(CASES)} cases identical to {args.against} (params and train state)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
