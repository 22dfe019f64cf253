"""Search control (seeds/003): where self-play games start, as pure device functions.

One import for the integration into self-play; the pieces live in two files:

- ``regret``: the regret ``R(s_t)`` of trajectory positions, the ranking / regret-value
  head losses, and the per-game tracker of the top-ranked restart candidate.
- ``restart_buffers``: RGSC's prioritized regret buffer (``prb_*``), the Go-Exploit
  FIFO archive (``archive_*``) and the restart decision ``choose_starts``.

Per move, the self-play loop records for every game: the searched value of the selected
action (mover's view), the player to move, the trajectory's validity mask, and, for RGSC,
the ranking logit (and regret-value estimate) of candidate states, fed to
``candidate_update``. When games end: ``regret_from_rewards`` gives ``[B, T]`` regrets;
fresh games ``prb_offer`` their candidate (``candidate_regret``), restarted games call
``prb_update_regret`` with ``first_position_regret``; then ``choose_starts`` picks the
new games' starts. Go-Exploit instead calls ``archive_add`` with the visited states.
``restarts`` runs exactly this flow inside the compiled self-play loop (``SelfPlay``).
"""

from curiosity_search.train.regret import (
    CandidateTracker,
    candidate_found,
    candidate_init,
    candidate_regret,
    candidate_reset,
    candidate_update,
    first_position_regret,
    ranking_loss,
    regret_from_rewards,
    regret_value_loss,
    reverse_cumsum,
    trajectory_regret,
)
from curiosity_search.train.restart_buffers import (
    DEFAULT_ALPHA,
    DEFAULT_CAPACITY,
    DEFAULT_RESTART_PROB,
    DEFAULT_TAU,
    RegretBuffer,
    StateArchive,
    archive_add,
    archive_init,
    archive_sample,
    choose_starts,
    prb_init,
    prb_metrics,
    prb_offer,
    prb_sample,
    prb_sample_logits,
    prb_update_regret,
)

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_CAPACITY",
    "DEFAULT_RESTART_PROB",
    "DEFAULT_TAU",
    "CandidateTracker",
    "RegretBuffer",
    "StateArchive",
    "archive_add",
    "archive_init",
    "archive_sample",
    "candidate_found",
    "candidate_init",
    "candidate_regret",
    "candidate_reset",
    "candidate_update",
    "choose_starts",
    "first_position_regret",
    "prb_init",
    "prb_metrics",
    "prb_offer",
    "prb_sample",
    "prb_sample_logits",
    "prb_update_regret",
    "ranking_loss",
    "regret_from_rewards",
    "regret_value_loss",
    "reverse_cumsum",
    "trajectory_regret",
]
