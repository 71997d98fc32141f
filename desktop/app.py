"""Starting the desktop app on the qasync loop (bare window until the UI lands)."""

from __future__ import annotations

import argparse


def run_app(args: argparse.Namespace) -> int:
    """Open the main window and run until it closes."""
    from PySide6.QtWidgets import QApplication, QMainWindow

    app = QApplication.instance() or QApplication([])
    window = QMainWindow()
    window.setWindowTitle("Branchwise")
    window.show()
    return int(app.exec())
