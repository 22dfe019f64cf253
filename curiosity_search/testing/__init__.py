"""Test aids kept in the package so users can check their own rules against them:
stub models with known answers (``stubs``: a hashed random tree, a bandit) and slow,
obviously-correct reference searches (``search_reference``: the kernel's PUCT, Gumbel
and UCT-P-NN searches one simulation at a time in plain Python; ``curiosity_reference``:
the curiosity search one simulation at a time in numpy, with the kernel's selection
noise and a node-by-node comparison; ``scripts/curiosity_reference_fuzz.py`` runs that
comparison on many random trees).
"""
