"""Figures and tables from run and sweep directories (``curiosity-search plot``).

Reads what training and evaluation wrote (``metrics.jsonl``, ``eval.csv``,
``config.yaml``); never imports JAX. Matplotlib is passed to each figure as ``plt``.

- ``make``             ``load_runs``, ``make_plots``: every figure; the score and entropy
                       figures themselves.
- ``elo_figure``       Elo vs training compute with the frontier fit per board size.
- ``learning_curves``  optimal-move rates (exact solver, late-game judge) vs compute.
- ``variants``         a sweep's variants (run names without ``-seed<N>``) side by side.
- ``common``           the helpers they share: numbers from CSV cells, axes, panel grids.
"""
