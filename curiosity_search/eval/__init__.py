"""Evaluation: players, matches, Elo, reference opponents, explain.

Modules (``match_result``, ``wilson``, ``elo`` and ``frontier`` never import JAX):

- ``players``          ``JaxPlayer``, ``GameSpec``; random, rollout MCTS, solver and
                       checkpoint players.
- ``player_specs``     ``parse_player(spec, game)``: random, ``mcts:SIMS``, solver,
                       ``checkpoint:DIR[@SIMS]``, ``reference[@SIMS]``, ``htp:COMMAND``.
- ``reference_player`` a frozen reference opponent as a player (``reference[@SIMS]``).
- ``references``       training, freezing and assessing a reference opponent.
- ``late_game``, ``late_game_player`` the exact late-game judge as a rate and a player.
- ``arena``            ``play_match`` / ``run_match`` over both colours, ``append_csv``.
- ``host_match``       one-game-at-a-time matches for HTP programs (``htp.client``).
- ``match_result``     ``MatchResult`` and ``summarize``.
- ``wilson``           ``wilson_interval``: the score's confidence interval.
- ``elo``              ``fit_elo``: Bradley-Terry maximum likelihood with standard errors.
- ``frontier``         ``fit_frontier``: elo = min(0, max(incline, plateau)) in log-compute.
- ``evaluation``       ``EvalPlan``, ``evaluate_run`` (writes ``eval.csv``),
                       ``evaluate_checkpoint`` (``curiosity-search eval``).
- ``explain``, ``explain_figure`` one position and the search at its root, as text and PNG.
- ``htp_play``         a checkpoint or player spec behind ``htp.HtpEngine``
                       (``curiosity-search play``).
"""
