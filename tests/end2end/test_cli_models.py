"""``branchwise models`` against a real model server on 127.0.0.1 that also lists embedding models.

Embedding models cannot chat: they are left out unless ``--all`` asks for
every model. A server marks one by its entry (LM Studio's ``"type":
"embeddings"``), or its id says so (``text-embedding-3-small``,
``nomic-embed-text``, ``bge-m3``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import HELPERS_DIR
from helpers.cli import run_cli

from branchwise.core.settings import Settings, save_settings

FAKE_SERVER = HELPERS_DIR / "fake_openai_server.py"
MODELS = [
    "llama3.2",
    "text-embedding-3-small",
    "nomic-embed-text",
    "bge-m3",
    "qwen2.5",
    "marked-by-its-entry",
]


def test_models_hides_embedding_models_unless_all(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--port", "0", "--models", ",".join(MODELS)]
        + ["--model-type", "marked-by-its-entry=embeddings", "--model-type", "qwen2.5=llm"],
        stdout=subprocess.PIPE,
        text=True,
    ) as server:
        assert server.stdout is not None
        try:
            base_url = server.stdout.readline().strip()
            save_settings(root, Settings(provider="openai", base_url=base_url))
            _, shown = run_cli(root, "models")
            _, every = run_cli(root, "models", "--all")
        finally:
            server.terminate()
    assert shown["models"] == ["llama3.2", "qwen2.5"]
    assert every["models"] == MODELS
