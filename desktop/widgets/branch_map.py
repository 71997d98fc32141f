"""Conversation ▸ Branch map: one conversation family, turn by turn, as a graph.

The root's turns run left to right on the top lane; every branch gets a lane
below, starting in the column after the turn it left from, with an edge
labelled by how it left (a branch, an edit, a regeneration, a child
conversation) and a merge drawn as an arrow back into the parent's turn.
The conversation the map was opened from is tinted and its turn outlined;
an answering turn is marked ●, a damaged conversation ⚠ with a dashed
outline.

The widget only shows: the host reads and lays the map out off the UI thread
(:mod:`branchwise.desktop.host.branch_map`) and this view paints only the
nodes in view, so a family of a thousand branches paints as fast as a small
one. Keys (Loom's tree moves): ← the turn before (where a branch left from),
→ the next turn (or the first branch leaving here), ↑/↓ the previous/next
alternative at the same point, Enter opens the conversation at that turn;
+/- and Ctrl+wheel zoom, dragging pans. A mini map appears once the family
does not fit.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPalette,
    QPen,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QGraphicsItem,
    QGraphicsScene,
    QGraphicsView,
    QLabel,
    QPushButton,
    QStyleOptionGraphicsItem,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.i18n.language import N_, _
from branchwise.core.i18n.reasons import fill
from branchwise.desktop.host.branch_map import (
    LANE,
    MARGIN,
    NODE_HEIGHT,
    NODE_WIDTH,
    Key,
    MapLayout,
    PlacedNode,
    Rect,
)
from branchwise.desktop.widgets.turn_widget import untitled

EDGE_WORDS = {
    "fork": N_("Branched"),
    "edit": N_("Edited"),
    "regenerate": N_("Regenerated"),
    "child": N_("Child conversation"),
    "merge": N_("Brought back"),
}
"""The word on each kind of edge."""

ZOOM_STEP = 1.25
MIN_ZOOM, MAX_ZOOM = 0.05, 4.0


def node_text(placed: PlacedNode) -> str:
    """What a node reads: its turn number and its branch's label (a root's title), with marks."""
    node = placed.node
    text = f"{node.turn_index} · {node.label or untitled(node.title)}"
    if node.kind == "running":
        text = "● " + text
    elif node.kind == "damaged":
        text = "⚠ " + text
    return text


def node_description(placed: PlacedNode) -> str:
    """A node in words (its tooltip and the view's accessible description while selected)."""
    node = placed.node
    if node.kind == "empty":
        # TRANSLATORS: a branch that has no turns of its own yet; {title} is its title.
        text = fill(_("{title}: no turns of its own yet"), {"title": untitled(node.title)})
    else:
        # TRANSLATORS: {n} is a turn number, {title} a conversation's title.
        text = fill(_("Turn {n} of {title}"), {"n": node.turn_index, "title": untitled(node.title)})
    if node.label and node.label != node.title:
        text += f" · {node.label}"
    marks = []
    if node.kind == "running":
        marks.append(_("answering"))
    if node.kind == "damaged":
        marks.append(_("damaged: its history cannot be read whole"))
    if placed.focus_turn:
        marks.append(_("the turn you are reading"))
    elif placed.in_focus_member:
        marks.append(_("the open conversation"))
    return text + "".join(f" ({mark})" for mark in marks)


class _Canvas(QGraphicsItem):
    """The whole map as one item that paints only what is exposed (never one item per node)."""

    def __init__(self, view: BranchMapView) -> None:
        super().__init__()
        self._view = view
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption, True)

    def boundingRect(self) -> QRectF:  # noqa: N802 (Qt's name)
        layout = self._view.layout_shown
        if layout is None:
            return QRectF()
        return QRectF(0, 0, layout.width, layout.height)

    def paint(  # noqa: D102
        self,
        painter: QPainter,
        option: QStyleOptionGraphicsItem,
        widget: QWidget | None = None,
    ) -> None:
        layout = self._view.layout_shown
        if layout is None:
            return
        exposed = option.exposedRect  # type: ignore[attr-defined]
        view = Rect(exposed.x(), exposed.y(), exposed.width(), exposed.height())
        self._view.paint_map(painter, layout, view)


class _MiniMap(QWidget):
    """The whole family in small, with the part in view framed; a click moves the view there."""

    SIZE = 160

    def __init__(self, view: BranchMapView) -> None:
        super().__init__(view)
        self.setObjectName("branchMapMiniMap")
        self._view = view
        self.setFixedSize(self.SIZE, self.SIZE * 3 // 4)
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def _scale(self) -> float:
        layout = self._view.layout_shown
        if layout is None or not layout.width or not layout.height:
            return 1.0
        return min(self.width() / layout.width, self.height() / layout.height)

    def paintEvent(self, event: QEvent) -> None:  # noqa: N802, D102
        layout = self._view.layout_shown
        if layout is None:
            return
        painter = QPainter(self)
        palette = self.palette()
        painter.fillRect(self.rect(), palette.color(QPalette.ColorRole.Base))
        painter.setPen(QPen(palette.color(QPalette.ColorRole.Mid)))
        painter.drawRect(self.rect().adjusted(0, 0, -1, -1))
        scale = self._scale()
        pen = QPen(palette.color(QPalette.ColorRole.Text))
        pen.setWidthF(1.0)
        painter.setPen(pen)
        for lane, first, last in layout.lane_spans():
            y = (MARGIN + lane * LANE + NODE_HEIGHT / 2) * scale
            right = max(last * scale, first * scale + 1)
            painter.drawLine(QPointF(first * scale, y), QPointF(right, y))
        seen = self._view.mapToScene(self._view.viewport().rect()).boundingRect()
        painter.setPen(QPen(palette.color(QPalette.ColorRole.Highlight), 1.5))
        painter.drawRect(
            QRectF(seen.x() * scale, seen.y() * scale, seen.width() * scale, seen.height() * scale)
        )
        painter.end()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802, D102
        scale = self._scale()
        self._view.centerOn(event.position().x() / scale, event.position().y() / scale)


class BranchMapView(QGraphicsView):
    """The map itself (shows only): nodes, edges, the selection, keys, zoom and the mini map.

    Args:
        open_turn: opens a conversation at a turn (``None``: at its end).
    """

    opened = Signal(str, object)
    """A node was opened: its session id and turn id (``None`` for a turnless one)."""

    def __init__(
        self, open_turn: Callable[[str, str | None], None], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("branchMapView")
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self._open_turn = open_turn
        self.layout_shown: MapLayout | None = None
        self.selected: Key | None = None
        self._scene = QGraphicsScene(self)
        self._canvas = _Canvas(self)
        self._scene.addItem(self._canvas)
        self.setScene(self._scene)
        self.mini_map = _MiniMap(self)
        self.mini_map.hide()
        self.setMouseTracking(True)
        self.retranslate_ui()

    # -- what the UI exposes -------------------------------------------------

    def show_layout(self, layout: MapLayout, *, keep_selection: bool = False) -> None:
        """Show a laid-out map and select the turn it was opened at (or, redrawn, keep
        the selected one while it is still drawn)."""
        kept = self.selected if keep_selection else None
        self._canvas.prepareGeometryChange()
        self.layout_shown = layout
        self._scene.setSceneRect(QRectF(0, 0, layout.width, layout.height))
        self.select(kept if layout.placed(kept) is not None else layout.focus_key())
        self._place_mini_map()
        self._canvas.update()

    def node(self, key: Key | None) -> PlacedNode | None:
        """The node at ``key``, if the map has it."""
        if key is None or self.layout_shown is None:
            return None
        return self.layout_shown.placed(key)

    def selected_text(self) -> str:
        """What the selected node reads on screen ("" for none)."""
        placed = self.node(self.selected)
        return node_text(placed) if placed is not None else ""

    def node_texts(self) -> list[str]:
        """Every node's text, in the map's order (what scrolling through the map shows)."""
        layout = self.layout_shown
        return [node_text(p) for p in layout.nodes] if layout is not None else []

    def edge_texts(self) -> list[str]:
        """Every edge's word, in the map's order."""
        layout = self.layout_shown
        return [_(EDGE_WORDS[e.edge.kind]) for e in layout.edges] if layout is not None else []

    def select(self, key: Key | None) -> None:
        """Select a node, bring it into view, and say it to assistive technology."""
        placed = self.node(key)
        if placed is None:
            return
        self.selected = key
        rect = placed.rect
        self.ensureVisible(QRectF(rect.x, rect.y, rect.width, rect.height), 40, 40)
        self.setAccessibleDescription(node_description(placed))
        self.setToolTip(node_description(placed))
        self._canvas.update()
        self.mini_map.update()

    def open_selected(self) -> None:
        """Enter: open the selected node's conversation at its turn."""
        placed = self.node(self.selected)
        if placed is not None:
            self._open_turn(placed.node.session_id, placed.node.turn_id)
            self.opened.emit(placed.node.session_id, placed.node.turn_id)

    def zoom_by(self, factor: float) -> None:
        """Zoom in (> 1) or out, within bounds."""
        current = self.transform().m11()
        factor = max(MIN_ZOOM / current, min(factor, MAX_ZOOM / current))
        self.scale(factor, factor)
        self._place_mini_map()

    @property
    def zoom(self) -> float:
        """The current scale (1: actual size)."""
        return self.transform().m11()

    def retranslate_ui(self) -> None:
        """Re-render every localized text (the canvas words itself when it paints)."""
        self.setAccessibleName(_("Branch map"))
        self.mini_map.setAccessibleName(_("Mini map of the branch map"))
        placed = self.node(self.selected)
        if placed is not None:
            self.setAccessibleDescription(node_description(placed))
            self.setToolTip(node_description(placed))
        self._canvas.update()

    # -- painting (only what is exposed) -------------------------------------------

    def paint_map(self, painter: QPainter, layout: MapLayout, view: Rect) -> None:
        """Paint the edges and nodes that intersect ``view``."""
        palette = self.palette()
        text = palette.color(QPalette.ColorRole.Text)
        base = palette.color(QPalette.ColorRole.Base)
        highlight = palette.color(QPalette.ColorRole.Highlight)
        mid = palette.color(QPalette.ColorRole.Mid)
        tint = QColor(highlight)
        tint.setAlpha(40)
        font = painter.font()
        small = painter.font()
        small.setPointSizeF(max(font.pointSizeF() * 0.85, 6.0))
        painter.setFont(small)
        for placed_edge in layout.edges_in(view):
            kind = placed_edge.edge.kind
            pen = QPen(mid if kind != "merge" else highlight, 1.5)
            if kind in ("merge", "child"):
                pen.setStyle(Qt.PenStyle.DashLine)
            painter.setPen(pen)
            path = QPainterPath(QPointF(*placed_edge.points[0]))
            for point in placed_edge.points[1:]:
                path.lineTo(QPointF(*point))
            painter.drawPath(path)
            end, before = placed_edge.points[-1], placed_edge.points[-2]
            self._arrow_head(painter, before, end)
            painter.setPen(QPen(text))
            # The word sits in the gap above the node the edge leads to (a merge: by its corner).
            if kind == "merge":
                anchor = (placed_edge.points[1][0] + 4, placed_edge.points[1][1] - 4)
            else:
                anchor = (end[0] + 2, end[1] - NODE_HEIGHT / 2 - 5)
            painter.drawText(QPointF(*anchor), _(EDGE_WORDS[kind]))
        painter.setFont(font)
        metrics = painter.fontMetrics()
        for placed in layout.nodes_in(view):
            rect = QRectF(placed.rect.x, placed.rect.y, NODE_WIDTH, NODE_HEIGHT)
            fill_colour = tint if placed.in_focus_member else base
            painter.setBrush(QBrush(fill_colour))
            pen = QPen(highlight if placed.focus_turn else mid, 2.5 if placed.focus_turn else 1.0)
            if placed.node.kind in ("damaged", "empty"):
                pen.setStyle(Qt.PenStyle.DashLine)
            if placed.node.kind == "damaged":
                pen.setColor(QColor("#c0392b"))
            painter.setPen(pen)
            painter.drawRoundedRect(rect, 6, 6)
            if placed.node.key == self.selected:
                ring = QPen(highlight, 1.5, Qt.PenStyle.DotLine)
                painter.setPen(ring)
                painter.setBrush(Qt.BrushStyle.NoBrush)
                painter.drawRoundedRect(rect.adjusted(-4, -4, 4, 4), 8, 8)
            painter.setPen(QPen(text))
            words = metrics.elidedText(
                node_text(placed), Qt.TextElideMode.ElideRight, int(NODE_WIDTH - 12)
            )
            painter.drawText(rect.adjusted(6, 0, -6, 0), Qt.AlignmentFlag.AlignVCenter, words)

    @staticmethod
    def _arrow_head(
        painter: QPainter, before: tuple[float, float], end: tuple[float, float]
    ) -> None:
        dx, dy = end[0] - before[0], end[1] - before[1]
        length = max((dx * dx + dy * dy) ** 0.5, 1e-6)
        ux, uy = dx / length, dy / length
        size = 7.0
        left = QPointF(end[0] - ux * size - uy * size / 2, end[1] - uy * size + ux * size / 2)
        right = QPointF(end[0] - ux * size + uy * size / 2, end[1] - uy * size - ux * size / 2)
        painter.drawLine(QPointF(*end), left)
        painter.drawLine(QPointF(*end), right)

    # -- input -------------------------------------------------------------------

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802, D102
        layout, key = self.layout_shown, self.selected
        pressed = event.key()
        if pressed in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.zoom_by(ZOOM_STEP)
        elif pressed == Qt.Key.Key_Minus:
            self.zoom_by(1 / ZOOM_STEP)
        elif layout is None or key is None:
            super().keyPressEvent(event)
        elif pressed == Qt.Key.Key_Left:
            self.select(layout.parent(key))
        elif pressed == Qt.Key.Key_Right:
            children = layout.children(key)
            self.select(children[0] if children else None)
        elif pressed == Qt.Key.Key_Up:
            self.select(layout.sibling(key, -1))
        elif pressed == Qt.Key.Key_Down:
            self.select(layout.sibling(key, 1))
        elif pressed in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.open_selected()
        else:
            super().keyPressEvent(event)

    def node_at(self, scene_x: float, scene_y: float) -> PlacedNode | None:
        """The node under a scene point, if any."""
        if self.layout_shown is None:
            return None
        return next(iter(self.layout_shown.nodes_in(Rect(scene_x, scene_y, 1, 1))), None)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802, D102
        super().mouseReleaseEvent(event)
        pressed_at = getattr(self, "_pressed_at", None)
        if event.button() != Qt.MouseButton.LeftButton or pressed_at is None:
            return
        moved = (event.position() - pressed_at).manhattanLength()
        if moved > 4:  # a drag that panned, not a click
            return
        point = self.mapToScene(event.position().toPoint())
        placed = self.node_at(point.x(), point.y())
        if placed is not None:
            self.select(placed.node.key)
            self.open_selected()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802, D102
        self._pressed_at = event.position()
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802, D102
        super().mouseMoveEvent(event)
        point = self.mapToScene(event.position().toPoint())
        placed = self.node_at(point.x(), point.y())
        self.viewport().setToolTip(node_description(placed) if placed is not None else "")

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802, D102
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            self.zoom_by(ZOOM_STEP if event.angleDelta().y() > 0 else 1 / ZOOM_STEP)
            event.accept()
            return
        super().wheelEvent(event)
        self.mini_map.update()

    def scrollContentsBy(self, dx: int, dy: int) -> None:  # noqa: N802, D102
        super().scrollContentsBy(dx, dy)
        self.mini_map.update()

    def resizeEvent(self, event: QEvent) -> None:  # noqa: N802, D102
        super().resizeEvent(event)  # type: ignore[arg-type]
        self._place_mini_map()

    def _place_mini_map(self) -> None:
        """Show the mini map (bottom right) only once the family does not fit in view."""
        layout = self.layout_shown
        if layout is None:
            self.mini_map.hide()
            return
        seen = self.mapToScene(self.viewport().rect()).boundingRect()
        fits = seen.width() >= layout.width and seen.height() >= layout.height
        self.mini_map.setVisible(not fits)
        port = self.viewport().geometry()
        self.mini_map.move(
            port.right() - self.mini_map.width() - 8, port.bottom() - self.mini_map.height() - 8
        )
        self.mini_map.raise_()
        self.mini_map.update()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802, D102
        if event.type() == QEvent.Type.LanguageChange:
            self.retranslate_ui()
        super().changeEvent(event)


class BranchMapDialog(QDialog):
    """The map in its own window (non-modal), headed by the family's root.

    "Move to Trash with its branches" prunes the selected node's conversation
    and its subtree (the window asks the host; a server's map cannot).
    """

    prune_requested = Signal(str)
    """The session id whose subtree the user chose to move to the Trash."""
    language_changed = Signal()
    """The labels are words of the old language: the window reads the map again."""

    def __init__(
        self, open_turn: Callable[[str, str | None], None], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("branchMapDialog")
        self.resize(960, 600)
        self.header = QLabel(self)
        self.header.setObjectName("branchMapHeader")
        self.header.setTextFormat(Qt.TextFormat.PlainText)
        self.header.setWordWrap(True)
        self.view = BranchMapView(open_turn, self)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        self.prune_button = QPushButton(self)
        self.prune_button.setObjectName("pruneButton")
        self.prune_button.clicked.connect(self._prune)
        buttons.addButton(self.prune_button, QDialogButtonBox.ButtonRole.ActionRole)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addWidget(self.view, 1)
        layout.addWidget(buttons)
        self._root_title = ""
        self._can_prune = True
        self.retranslate_ui()

    def show_layout(
        self, layout: MapLayout, *, can_prune: bool = True, keep_selection: bool = False
    ) -> None:
        """Show a family's map (replacing the one shown) and give the map the keyboard.

        ``can_prune`` is ``False`` for a server's family (pruning there is not offered).
        """
        self._root_title = layout.nodes[0].node.title if layout.nodes else ""
        self._can_prune = can_prune
        self.view.show_layout(layout, keep_selection=keep_selection)
        self.retranslate_ui()
        self.view.setFocus()

    def _prune(self) -> None:
        placed = self.view.node(self.view.selected)
        if placed is not None and self._can_prune:
            self.prune_requested.emit(placed.node.session_id)

    def retranslate_ui(self) -> None:
        """Re-render every localized text."""
        self.setWindowTitle(_("Branch map"))
        self.header.setText(
            # TRANSLATORS: the keys of the branch map; key names stay as printed on the keys.
            fill(
                _(
                    "Every branch of {title}, turn by turn. ← → before and after, "
                    "↑ ↓ other branches at the same point, Enter opens, +/- zoom."
                ),
                {"title": untitled(self._root_title)},
            )
        )
        self.prune_button.setText(_("Move to Trash with its branches"))
        self.prune_button.setEnabled(self._can_prune)
        self.prune_button.setToolTip(
            _("Move the selected conversation and every branch below it to the Trash; one Undo")
            if self._can_prune
            else _("Conversations on a server are deleted from the server's list, one at a time")
        )

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802, D102
        if event.type() == QEvent.Type.LanguageChange:
            self.retranslate_ui()
            self.language_changed.emit()
        super().changeEvent(event)
