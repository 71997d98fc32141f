"""Branchwise desktop: the host (sessions, runners, journal, notices) and the widgets."""
