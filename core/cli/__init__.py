"""Headless command line: ``branchwise [--data-dir D] <command> …`` printing JSON."""
