"""Full-text search over every conversation: the SQLite FTS5 cache and its queries.

:mod:`~branchwise.core.search.index` keeps the cache current from the
projection's tail hook; :mod:`~branchwise.core.search.query` turns what a
person typed into a query of that cache and its hits.
"""
