"""The Hex Text Protocol (HTP, the GTP dialect of MoHex and HexGui), both sides of it.

Modules (none imports a network, a search or an evaluation; only ``envs``):

- ``coords``  HTP cell notation: ``a1`` <-> pgx action ``r * size + c``, colours.
- ``engine``  ``HtpEngine``: a Hex board behind the protocol, its moves from a callback;
              ``serve`` runs it on stdin/stdout.
- ``client``  ``HtpPlayer``: an external HTP program driven as a subprocess.

``eval`` builds on them: ``eval.player_specs`` plays ``htp:COMMAND`` opponents,
``eval.host_match`` plays them one game at a time, and ``eval.htp_play`` puts a
checkpoint or a player spec behind the engine (``curiosity-search play``).
"""
