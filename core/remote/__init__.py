"""Remote store: ``branchwise serve`` and the client the desktop uses (DESIGN §5)."""
