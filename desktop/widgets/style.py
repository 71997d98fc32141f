"""The app's look: Fusion, a light stylesheet keyed on object names, a drawn icon.

Kept in one place so widgets only name their parts (``userMessage``,
``noticeRow[level="error"]``…) and never carry colours themselves.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPainterPath, QPen, QPixmap
from PySide6.QtWidgets import QApplication

ACCENT = "#2f6fde"

STYLESHEET = f"""
QFrame#userMessage {{
    background: palette(alternate-base);
    border: 1px solid palette(mid);
    border-radius: 8px;
    padding: 8px 10px;
}}
QFrame#assistantMessage {{ padding: 2px 10px; }}
QFrame#codeBlock {{
    background: palette(alternate-base);
    border: 1px solid palette(midlight);
    border-radius: 6px;
}}
QLabel#codeLanguage {{ color: palette(placeholder-text); font-size: 11px; }}
QToolButton#copyCodeButton {{ font-size: 11px; }}
QFrame#toolMessage {{
    font-family: monospace;
    color: palette(dark);
    padding: 2px 10px;
}}
QLabel#turnStatus {{ color: palette(dark); padding: 0 10px; }}
QLabel#turnStatus[error="true"] {{ color: #b3261e; }}
QLabel#turnNumber {{ color: palette(dark); font-size: 11px; }}
QToolButton#branchButton {{ color: {ACCENT}; }}
QToolButton#branchButton:disabled {{ color: palette(mid); }}
QToolButton#branchesButton {{ color: {ACCENT}; font-size: 11px; }}
QFrame#turn {{ border-bottom: 1px solid palette(midlight); }}
QFrame#turn[flash="true"] {{ background: #fff3b0; }}
QFrame#searchResult {{ border-bottom: 1px solid palette(midlight); }}
QFrame#searchResult:focus {{ background: palette(alternate-base); }}
QLabel#searchResultTitle {{ font-weight: 600; }}
QLabel#searchResultRole {{ color: palette(dark); font-size: 11px; }}
QLabel#searchStatus {{ color: palette(dark); font-size: 11px; }}
QToolButton#searchAlsoIn {{ color: {ACCENT}; font-size: 11px; }}
QLabel#searchEmpty {{ color: palette(dark); padding: 8px; }}
QLabel#findCount {{ color: palette(dark); }}
QLineEdit#findField[notFound="true"] {{ background: #fdecea; }}
QFrame#forkBanner {{
    background: #e8f0fe;
    border-bottom: 1px solid #c6d7f5;
}}
QLabel#forkBannerText {{ color: #1b3a73; }}
QLabel#sessionState {{ background: #fff4d6; color: #5c4200; }}
QFrame#noticeRow {{ border-left: 4px solid palette(mid); background: palette(base); }}
QFrame#noticeRow[level="error"] {{ border-left-color: #b3261e; background: #fdecea; }}
QFrame#noticeRow[level="warning"] {{ border-left-color: #b26a00; background: #fff4e0; }}
QFrame#noticeRow[level="success"] {{ border-left-color: #1e7f3c; background: #e8f5ec; }}
QLabel#noticeDetail {{ color: palette(dark); font-size: 11px; }}
QLabel#emptyState {{ color: palette(dark); font-size: 15px; }}
QLabel[error="true"] {{ color: #b3261e; }}
"""


def apply_style(app: QApplication) -> None:
    """Fusion with the app's stylesheet and icon."""
    app.setStyle("Fusion")
    app.setStyleSheet(STYLESHEET)
    app.setWindowIcon(app_icon())


def app_icon(size: int = 256) -> QIcon:
    """The Branchwise mark (a forking path on a rounded square), drawn at any size."""
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor(ACCENT))
    painter.drawRoundedRect(QRectF(0, 0, size, size), size * 0.22, size * 0.22)
    pen = QPen(QColor("white"), size * 0.07)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    painter.setPen(pen)
    painter.setBrush(Qt.BrushStyle.NoBrush)
    s = size
    path = QPainterPath(QPointF(s * 0.36, s * 0.8))
    path.lineTo(QPointF(s * 0.36, s * 0.2))
    path.moveTo(QPointF(s * 0.36, s * 0.62))
    path.cubicTo(
        QPointF(s * 0.36, s * 0.42), QPointF(s * 0.66, s * 0.46), QPointF(s * 0.66, s * 0.2)
    )
    painter.drawPath(path)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor("white"))
    for x, y in ((0.36, 0.8), (0.36, 0.2), (0.66, 0.2)):
        painter.drawEllipse(QPointF(s * x, s * y), s * 0.075, s * 0.075)
    painter.end()
    return QIcon(pixmap)
