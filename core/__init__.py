"""Branchwise core: the session log, its projection, forking and the turn runtime.

Nothing under this package imports Qt; the desktop layer builds on it.
"""
