"""Rendering a 5,000-line Markdown answer, side by side with the same text shown plain.

    python tests/benchmarks/bench_render.py [--runs 3] [--lines 5000]

1. Render: a finished 5,000-line answer (headings, paragraphs, lists, tables,
   quotes, Python code blocks) from nothing until its first screen is painted
   in an 800×600 scroll area, as Markdown (our MessageLabel) vs. a plain
   word-wrapped QLabel of the same text (the floor).
2. Streaming: the same answer arriving 20 lines per repaint (250 repaints),
   each repaint laid out and painted; reported as the mean cost of one repaint
   and the cost of the last one (where a whole-text re-render would show).

Both run in this one process, alternating, medians of ``--runs`` runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import report  # noqa: E402

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QApplication, QLabel, QScrollArea, QWidget  # noqa: E402

from branchwise.desktop.host.rows import Entry  # noqa: E402
from branchwise.desktop.widgets.style import apply_style  # noqa: E402
from branchwise.desktop.widgets.turn_widget import MessageLabel  # noqa: E402

SECTION = """## Section {n}

This paragraph explains step {n} in some detail, with **bold** words, *emphasis*
and `inline code`, long enough to wrap on an 800-pixel wide window at least once.

- first point of {n}
- second point, with a [link](https://example.org/{n})
- third point

| Name | Count | Note |
|------|------:|:----:|
| apples | {n} | red |
| pears | 12 | green |

> A quoted remark about step {n}.

```python
def step_{n}(values: list[int]) -> int:
    total = 0
    for value in values:
        total += value * {n}
    return total
```

"""


def answer(lines: int) -> str:
    """A Markdown answer of about ``lines`` lines."""
    parts: list[str] = []
    count = 0
    n = 0
    while count < lines:
        section = SECTION.format(n=n)
        parts.append(section)
        count += section.count("\n")
        n += 1
    return "".join(parts)


def plain_label(text: str) -> QLabel:
    label = QLabel()
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(text)
    return label


def markdown_label(text: str) -> QWidget:
    return MessageLabel(Entry("m", "assistant", text))


def shown(app: QApplication, widget: QWidget) -> QScrollArea:
    scroll = QScrollArea()
    scroll.setWidgetResizable(True)
    scroll.resize(800, 600)
    scroll.setWidget(widget)
    scroll.show()
    app.processEvents()
    scroll.viewport().grab()
    return scroll


def time_render(app: QApplication, make: Callable[[str], QWidget], text: str) -> float:
    start = time.perf_counter()
    scroll = shown(app, make(text))
    elapsed = time.perf_counter() - start
    scroll.deleteLater()
    app.processEvents()
    return elapsed


def time_stream(app: QApplication, markdown: bool, text: str) -> tuple[float, float]:
    """(mean, last) seconds per repaint while ``text`` arrives 20 lines at a time."""
    lines = text.splitlines(keepends=True)
    widget: QWidget = markdown_label("") if markdown else plain_label("")
    scroll = shown(app, widget)
    costs = []
    for end in range(20, len(lines) + 20, 20):
        prefix = "".join(lines[:end])
        start = time.perf_counter()
        if isinstance(widget, MessageLabel):
            widget.set_content(prefix)
        else:
            assert isinstance(widget, QLabel)
            widget.setText(prefix)
        app.processEvents()
        bar = scroll.verticalScrollBar()
        bar.setValue(bar.maximum())
        scroll.viewport().grab()
        costs.append(time.perf_counter() - start)
    scroll.deleteLater()
    app.processEvents()
    return statistics.mean(costs), costs[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lines", type=int, default=5000)
    args = parser.parse_args()
    app = QApplication.instance() or QApplication([])
    assert isinstance(app, QApplication)
    apply_style(app)
    text = answer(args.lines)
    print(f"answer: {text.count(chr(10))} lines, {len(text):,} characters")
    ours, floor = [], []
    for _ in range(args.runs):
        ours.append(time_render(app, markdown_label, text))
        floor.append(time_render(app, plain_label, text))
    report(
        "render 5,000-line answer, first paint",
        statistics.median(ours),
        statistics.median(floor),
        10,
    )
    mean_ours, last_ours, mean_floor, last_floor = [], [], [], []
    for _ in range(args.runs):
        mean, last = time_stream(app, True, text)
        mean_ours.append(mean)
        last_ours.append(last)
        mean, last = time_stream(app, False, text)
        mean_floor.append(mean)
        last_floor.append(last)
    report(
        "stream: one repaint, mean", statistics.median(mean_ours), statistics.median(mean_floor), 1
    )
    report(
        "stream: last repaint (5,000 lines shown)",
        statistics.median(last_ours),
        statistics.median(last_floor),
        1,
    )


if __name__ == "__main__":
    main()
