"""Sweeps (``curiosity-search sweep``): grids of training runs from one YAML file.

Above ``train`` and ``eval``, which never import it:

- ``sweep``  the sweep file (grid, overrides, evaluation plan), its runs' status, and
             running them: train, evaluate, mark ``DONE``.
- ``jobs``   runs in parallel child processes (``--jobs J``), one GPU each where there
             are GPUs, dying with the sweep.
"""
