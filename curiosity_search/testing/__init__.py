"""Test aids kept in the package so users can check their own rules against them:
slow, obviously-correct reference searches (``curiosity_reference``: the curiosity
search one simulation at a time in numpy).
"""
