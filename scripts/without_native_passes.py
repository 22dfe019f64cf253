"""Runs a ``curiosity-search`` command with curiosity's native CPU passes off: the backup
levels and the lazy prior fills run as the XLA programs (``backup._batched_levels``,
``nodes._batched_prior_fill``), the fast P(best) kernel stays native.

    python scripts/without_native_passes.py bench train --config configs/hex5_curiosity.yaml \
        --baseline configs/hex5_gumbel.yaml --rounds 2 --repeats 3 --out CSV

For side-by-side timings of the passes (results/bench/README.md): the same numbers to
float32 rounding (tests/test_backup_cpu.py), another cost. ``CURIOSITY_SEARCH_PBEST_KERNEL=xla``
turns every native call off instead.
"""

import sys

from curiosity_search.bench.pbest_rows import without_native_passes
from curiosity_search.cli import main

if __name__ == "__main__":
    with without_native_passes():
        sys.exit(main(sys.argv[1:]))
