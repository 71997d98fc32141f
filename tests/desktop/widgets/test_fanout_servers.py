"""Send to several offers every server's models: the app's, a saved one's, and the demo's.

Two real OpenAI-compatible servers on 127.0.0.1 (the app's, and one the
person used before, kept in the settings' saved servers); the host chooses
providers from the settings as the app does. The test reads the dialog's
headings and models, mixes all three in one fan-out, and reads the grid's
column headers and states.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from helpers.fake_openai_server import FakeOpenAIServer
from helpers.gui import WAIT_MS, App, open_served, run, seed_session
from helpers.serve import serve_process
from pytestqt.qtbot import QtBot

from branchwise.core.i18n.language import set_language
from branchwise.core.providers.detect import choose_provider
from branchwise.core.settings import Settings, save_settings
from branchwise.core.store.store import SessionStore
from branchwise.desktop.widgets.fanout_grid import MODEL_ROLE, SendToSeveralDialog


def _models_under(dialog: SendToSeveralDialog, heading: str) -> list[str]:
    """The models the dialog lists under ``heading``, in order."""
    rows = [dialog.models.item(row) for row in range(dialog.models.count())]
    texts = [item.text() for item in rows]
    start = texts.index(heading) + 1
    models = []
    for item in rows[start:]:
        if item.data(MODEL_ROLE) is None:  # the next heading
            break
        models.append(item.text())
    return models


def test_the_dialog_mixes_the_apps_server_a_saved_server_and_the_demo(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app_server = run(qtbot, FakeOpenAIServer(models=["alpha", "nomic-embed-text"]).start())
    saved = run(qtbot, FakeOpenAIServer(models=["beta", "gamma"], per_model=True).start())
    try:
        root_dir = tmp_path / "root"
        save_settings(
            root_dir,
            Settings(
                provider="openai",
                base_url=app_server.base_url,
                model="alpha",
                demo_pace=0,
                first_run_done=True,
                saved_servers=(saved.base_url,),
            ),
        )
        root = seed_session(SessionStore(root_dir), ["Where to go in Kyoto?"], "Trip")
        app = make_app(provider_factory=choose_provider, root=root_dir)
        app.window.open_tab(root)
        tab = app.tab(root)
        tab.composer.editor.setPlainText("Kyoto or Osaka?")
        tab.composer.several_button.click()
        dialog = app.window.send_several_dialog
        assert dialog is not None
        own = f"Models on {urlsplit(app_server.base_url).netloc}"
        other = f"Models on {urlsplit(saved.base_url).netloc} · OpenAI-compatible server"
        qtbot.waitUntil(lambda: other in dialog.headings(), timeout=WAIT_MS)
        assert dialog.headings()[:2] == [own, "Demo responder (offline)"]
        assert _models_under(dialog, own) == ["alpha"]  # the embedding model is left out
        assert _models_under(dialog, "Demo responder (offline)") == ["demo"]
        assert _models_under(dialog, other) == ["beta", "gamma"]
        set_language("zh_Hans")
        assert "演示应答器（离线）" in dialog.headings(), dialog.headings()
        set_language("en")

        dialog.samples.setValue(1)
        dialog.set_checked(["alpha"])
        dialog.check("beta", saved.base_url)
        dialog.check("demo", "demo")
        assert dialog.summary.text() == "3 answers, each its own branch."
        dialog.send_button.click()
        grid = app.window.fanout_grid
        assert grid is not None
        qtbot.waitUntil(
            lambda: len(grid.columns) == 3 and all(c.ended for c in grid.columns.values()),
            timeout=WAIT_MS,
        )
        grid.flush()
        # In the list's order: the app's server, the demo, the saved server.
        assert grid.column_labels() == [
            "alpha",
            "demo",
            f"beta · {urlsplit(saved.base_url).netloc}",
        ]
        assert [c.state.text() for c in grid.columns.values()] == ["Done."] * 3
        beta = list(grid.columns.values())[2]
        assert beta.text.startswith("[beta]")  # the saved server answered it
        chats = [r for r in saved.requests if r["path"] == "/v1/chat/completions"]
        assert [r["json"]["model"] for r in chats] == ["beta"]  # type: ignore[index]
        # Fusing with beta asks beta where it answered, not the app's server.
        grid.fuse_now(list(grid.columns), "beta", "Keep it short.")
        qtbot.waitUntil(lambda: grid.fused is not None, timeout=WAIT_MS)
        chats = [r for r in saved.requests if r["path"] == "/v1/chat/completions"]
        assert [r["json"]["model"] for r in chats] == ["beta", "beta"]  # type: ignore[index]
        (merge,) = app.host.store.read(root).projection.merges
        assert merge["kind"] == "fused" and merge["model"] == "beta"
    finally:
        run(qtbot, app_server.stop())
        run(qtbot, saved.stop())


def test_a_servers_conversation_offers_the_models_that_server_answers_with(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    """The answers of a ``branchwise serve`` conversation run there: the dialog lists that
    server's models (``GET /models``), not this app's."""
    model_server = run(
        qtbot, FakeOpenAIServer(models=["served-a", "served-b", "nomic-embed-text"]).start()
    )
    try:
        served_root = tmp_path / "served"
        sid = seed_session(SessionStore(served_root), ["Where to go in Kyoto?"], "Plans")
        save_settings(
            served_root,
            Settings(provider="openai", base_url=model_server.base_url, model="served-a"),
        )
        app = make_app()
        with serve_process(served_root) as process:
            tab = open_served(qtbot, app, process.url, process.token, sid)
            tab.composer.editor.setPlainText("Kyoto or Osaka?")
            tab.composer.several_button.click()
            dialog = app.window.send_several_dialog
            assert dialog is not None
            offered = lambda: [  # noqa: E731
                dialog.models.item(row).text() for row in range(dialog.models.count())
            ]
            qtbot.waitUntil(lambda: "served-b" in offered(), timeout=WAIT_MS)
            assert "served-a" in offered() and "nomic-embed-text" not in offered()
            assert dialog.headings() == []  # one server answers all: no groups
            dialog.reject()
    finally:
        run(qtbot, model_server.stop())
