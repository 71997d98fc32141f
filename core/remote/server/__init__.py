"""``branchwise serve``: the store over HTTP, one module per group of routes (see ``app``)."""
