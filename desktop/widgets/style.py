"""The app's look: Fusion in the chosen theme, and a drawn icon."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPainterPath, QPen, QPixmap
from PySide6.QtWidgets import QApplication, QWidget

from branchwise.core.settings import ThemeChoice
from branchwise.desktop.widgets.theme import BRAND, theme_for


def apply_style(app: QApplication, theme: ThemeChoice = "system") -> None:
    """Fusion in the ``theme`` (see desktop/widgets/theme.py), and the app's icon."""
    app.setStyle("Fusion")
    theme_for(app).choose(theme)
    app.setWindowIcon(app_icon())


def set_style_property(widget: QWidget, name: str, value: object) -> None:
    """Set a property the stylesheet selects on (``[error="true"]``) and restyle if it changed.

    Qt applies a stylesheet's property selectors when a widget is polished, so a
    property changed later shows only after something else re-polishes it (a
    restart, for a turn that failed while the app ran) unless it is re-polished here.
    """
    if widget.property(name) == value:
        return
    widget.setProperty(name, value)
    style = widget.style()
    style.unpolish(widget)
    style.polish(widget)
    widget.update()


def app_icon(size: int = 256) -> QIcon:
    """The Branchwise mark (a forking path on a rounded square), drawn at any size."""
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor(BRAND))
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
