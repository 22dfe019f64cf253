"""Benchmarks (``curiosity-search bench``), above the kernel and the training loop.

- ``search``  our search policies against mctx's on one model: simulations/s, tree bytes.
- ``train``   one compiled training iteration: seconds, network evaluations/s, FLOP/s.
"""

from pathlib import Path

DEFAULT_OUT_DIR = Path("results/bench")
"""Where the benchmark CSVs go by default (``search_<device>.csv``, ``train_<device>.csv``)."""
