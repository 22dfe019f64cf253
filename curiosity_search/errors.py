"""The one base class of the errors a user can fix: the CLI prints them on one line.

``ConfigError``, ``RunDirError``, ``CheckpointError``, ``SweepError`` and the other
errors raised for bad input (a file, a key, a run directory) derive from
``UserError``; ``curiosity-search`` prints ``error: <message>`` on stderr and exits 2
for any of them, without a traceback. Their messages name the file or key, the value
and what is allowed.

Like ``atomic_io``, this module sits outside the layers and imports nothing, so every
layer (and the JAX-free config package) may use it.
"""

from __future__ import annotations


class UserError(Exception):
    """An error in the user's input or files; its message is one line for ``error: ...``."""


__all__ = ["UserError"]
