"""The fixtures every widget test uses: the qasync loop (``qloop``) and the app (``make_app``)."""

from helpers.gui import make_app_fixture, qloop_fixture  # noqa: F401 - pytest finds fixtures here
