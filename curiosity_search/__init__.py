"""curiosity_search: self-play and tree search for board games, in JAX.

Layers, lowest first (a lower layer never imports a higher one; ``tests/test_layering.py``):
``envs`` -> ``search``, ``nets``, ``htp`` -> ``curiosity`` -> ``testing``, ``rules`` ->
``config`` -> ``train`` -> ``eval`` -> ``plots``, ``sweeps``, ``bench`` -> ``cli``.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def load_agent(path: str, **kwargs: Any) -> Any:
    """Loads a run directory or a checkpoint as an ``Agent`` (see ``train.agent``)."""
    from curiosity_search.train.agent import load_agent as _load_agent

    return _load_agent(path, **kwargs)


__all__ = ["__version__", "load_agent"]
