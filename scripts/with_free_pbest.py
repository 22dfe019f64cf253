"""Runs a ``curiosity-search`` command with curiosity's P(best) replaced by an O(A)
stand-in: what the command would cost if P(best) were free.

    python scripts/with_free_pbest.py bench train --config configs/hex5_curiosity.yaml \
        --baseline configs/hex5_gumbel.yaml --rounds 2 --repeats 3 --out CSV

A diagnostic, not a search anyone should run: ``best_arm_probability`` becomes a softmax
of the arms' mean scores (``curiosity_time_split.mean_score_softmax``) in
``curiosity.nodes``, through which the search computes every row (its
``CuriosityOptions``), as in ``curiosity_time_split``'s stub. The trees differ from
the real search's; everything else (the tree, belief algebra, level-wise backups and
prior fills as XLA programs, compaction, the network, the updates) is unchanged, so
the timing bounds what any cheaper P(best) could reach. ``search.pbest_updates:
incremental`` keeps its own root kernel and is not stubbed: time it with ``full`` (the
default below 36 actions).
"""

import contextlib
import sys
from collections.abc import Iterator
from unittest import mock

from curiosity_time_split import mean_score_softmax

from curiosity_search.bench.pbest_rows import without_native_passes
from curiosity_search.cli import main
from curiosity_search.curiosity import nodes


@contextlib.contextmanager
def free_pbest() -> Iterator[None]:
    """Inside: every P(best) row a curiosity search with ``full`` updates computes is
    the stand-in (``tests/test_bench.py`` traces searches with the kernels forbidden).
    The backup levels and prior fills run as the XLA programs, not the native CPU
    passes (which compute their P(best) rows themselves)."""
    with mock.patch.object(nodes, "best_arm_probability", mean_score_softmax), \
            without_native_passes():
        yield


if __name__ == "__main__":
    with free_pbest():
        sys.exit(main(sys.argv[1:]))
