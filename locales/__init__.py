"""Babel gettext catalogs (``messages.pot`` and one folder per language)."""
