"""Remote store: ``branchwise serve`` and the client the desktop uses (docs/cli.md, "Serve")."""
