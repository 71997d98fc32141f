"""Light and dark themes: the palette, the few colours a palette has no role for, and the switch.

The setting (``Settings.theme``) is ``system``, ``light`` or ``dark``. With
``system`` the app follows the system's colour scheme as Qt reports it
(``QStyleHints.colorScheme()``, Qt ≥ 6.5) and switches live when
``colorSchemeChanged`` fires; when the system reports no scheme, the
platform's own palette decides (a dark palette means dark). On Qt ≥ 6.8 the
choice is also passed to ``QStyleHints.setColorScheme`` so native dialogs
and title bars follow it.

Every colour in the app comes from the palette or from :class:`ThemeColors`
(notice backgrounds, the fork banner, flashes, search hits…); a tint is
always paired with a text colour chosen for it, so no notice is unreadable
in either theme.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from branchwise.core.settings import THEMES, ThemeChoice

#: The colour of the Branchwise mark (the app icon), the same in both themes.
BRAND = "#2f6fde"
THEME_OBJECT = "branchwiseTheme"


@dataclass(frozen=True)
class ThemeColors:
    """Colours a palette has no role for, per theme (``#rrggbb``)."""

    accent: str
    error_text: str
    error_background: str
    warning_border: str
    warning_background: str
    success_border: str
    success_background: str
    flash_background: str
    banner_background: str
    banner_border: str
    banner_text: str
    state_background: str
    state_text: str
    search_hit: str


LIGHT_COLORS = ThemeColors(
    accent="#2f6fde",
    error_text="#b3261e",
    error_background="#fdecea",
    warning_border="#b26a00",
    warning_background="#fff4e0",
    success_border="#1e7f3c",
    success_background="#e8f5ec",
    flash_background="#fff3b0",
    banner_background="#e8f0fe",
    banner_border="#c6d7f5",
    banner_text="#1b3a73",
    state_background="#fff4d6",
    state_text="#5c4200",
    search_hit="#ffe27a",
)

DARK_COLORS = ThemeColors(
    accent="#7aa7ff",
    error_text="#ff8a80",
    error_background="#3d2222",
    warning_border="#e0a040",
    warning_background="#3a2e16",
    success_border="#5cc27a",
    success_background="#1d3524",
    flash_background="#4a4120",
    banner_background="#1e2c45",
    banner_border="#33476b",
    banner_text="#c9dafc",
    state_background="#3d3317",
    state_text="#f5dfa0",
    search_hit="#6b5a12",
)


def _palette(colors: dict[QPalette.ColorRole, str], disabled_text: str) -> QPalette:
    palette = QPalette()
    for role, name in colors.items():
        palette.setColor(role, QColor(name))
    for role in (
        QPalette.ColorRole.WindowText,
        QPalette.ColorRole.Text,
        QPalette.ColorRole.ButtonText,
    ):
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor(disabled_text))
    return palette


def light_palette() -> QPalette:
    """Fusion's light palette, spelled out so it does not depend on the platform."""
    role = QPalette.ColorRole
    return _palette(
        {
            role.Window: "#efefef",
            role.WindowText: "#1c1c1c",
            role.Base: "#ffffff",
            role.AlternateBase: "#f5f5f5",
            role.ToolTipBase: "#ffffdc",
            role.ToolTipText: "#1c1c1c",
            role.PlaceholderText: "#6e6e6e",
            role.Text: "#1c1c1c",
            role.Button: "#efefef",
            role.ButtonText: "#1c1c1c",
            role.BrightText: "#ffffff",
            role.Light: "#ffffff",
            role.Midlight: "#e3e3e3",
            role.Mid: "#b8b8b8",
            role.Dark: "#9f9f9f",
            role.Shadow: "#767676",
            role.Highlight: "#3072c4",
            role.HighlightedText: "#ffffff",
            role.Link: "#2f6fde",
            role.LinkVisited: "#7a3fc4",
            role.Accent: "#2f6fde",
        },
        disabled_text="#9f9f9f",
    )


def dark_palette() -> QPalette:
    """A dark palette for Fusion: light text on near-black, the same roles as the light one."""
    role = QPalette.ColorRole
    return _palette(
        {
            role.Window: "#2b2b2b",
            role.WindowText: "#e6e6e6",
            role.Base: "#1f1f1f",
            role.AlternateBase: "#303030",
            role.ToolTipBase: "#3a3a3a",
            role.ToolTipText: "#e6e6e6",
            role.PlaceholderText: "#a0a0a0",
            role.Text: "#e6e6e6",
            role.Button: "#353535",
            role.ButtonText: "#e6e6e6",
            role.BrightText: "#ffffff",
            role.Light: "#4a4a4a",
            role.Midlight: "#3e3e3e",
            role.Mid: "#5a5a5a",
            role.Dark: "#1a1a1a",
            role.Shadow: "#101010",
            role.Highlight: "#3d6fd6",
            role.HighlightedText: "#ffffff",
            role.Link: "#7aa7ff",
            role.LinkVisited: "#b89cff",
            role.Accent: "#7aa7ff",
        },
        disabled_text="#7a7a7a",
    )


def is_dark(palette: QPalette) -> bool:
    """The palette's windows are dark."""
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def theme_colors(palette: QPalette | None = None) -> ThemeColors:
    """The theme colours that go with ``palette`` (the app's when none)."""
    return DARK_COLORS if is_dark(palette or QGuiApplication.palette()) else LIGHT_COLORS


def stylesheet(c: ThemeColors) -> str:
    """The app's stylesheet in theme colours ``c`` (widgets only name their parts)."""
    return f"""
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
    color: palette(placeholder-text);
    padding: 2px 10px;
}}
QLabel#turnStatus {{ color: palette(placeholder-text); padding: 0 10px; }}
QLabel#turnStatus[error="true"] {{ color: {c.error_text}; }}
QLabel#turnNumber {{ color: palette(placeholder-text); font-size: 11px; }}
QToolButton#branchButton {{ color: {c.accent}; }}
QToolButton#branchButton:disabled {{ color: palette(mid); }}
QToolButton#branchesButton {{ color: {c.accent}; font-size: 11px; }}
QFrame#turn {{ border-bottom: 1px solid palette(midlight); }}
QFrame#turn[flash="true"] {{ background: {c.flash_background}; }}
QFrame#turn[landed="true"] {{
    background: {c.banner_background};
    border-left: 3px solid {c.accent};
}}
QLabel#alternativesCounter {{ color: palette(placeholder-text); font-size: 11px; }}
QToolButton#previousAlternative, QToolButton#nextAlternative {{ color: {c.accent}; }}
QToolButton#previousAlternative:disabled, QToolButton#nextAlternative:disabled {{
    color: palette(mid);
}}
QFrame#searchResult {{ border-bottom: 1px solid palette(midlight); }}
QFrame#searchResult:focus {{ background: palette(alternate-base); }}
QLabel#searchResultTitle {{ font-weight: 600; }}
QLabel#searchResultRole {{ color: palette(placeholder-text); font-size: 11px; }}
QLabel#searchStatus {{ color: palette(placeholder-text); font-size: 11px; }}
QToolButton#searchAlsoIn {{ color: {c.accent}; font-size: 11px; }}
QLabel#searchEmpty {{ color: palette(placeholder-text); padding: 8px; }}
QLabel#findCount {{ color: palette(placeholder-text); }}
QLineEdit#findField[notFound="true"] {{ background: {c.error_background}; }}
QFrame#forkBanner {{
    background: {c.banner_background};
    border-bottom: 1px solid {c.banner_border};
}}
QLabel#forkBannerText {{ color: {c.banner_text}; }}
QLabel#sessionState {{ background: {c.state_background}; color: {c.state_text}; }}
QFrame#noticeRow {{ border-left: 4px solid palette(mid); background: palette(base); }}
QFrame#noticeRow[level="error"] {{
    border-left-color: {c.error_text};
    background: {c.error_background};
}}
QFrame#noticeRow[level="warning"] {{
    border-left-color: {c.warning_border};
    background: {c.warning_background};
}}
QFrame#noticeRow[level="success"] {{
    border-left-color: {c.success_border};
    background: {c.success_background};
}}
QFrame#noticeRow QLabel {{ color: palette(text); }}
QLabel#noticeDetail {{ color: palette(placeholder-text); font-size: 11px; }}
QLabel#emptyState {{ color: palette(placeholder-text); font-size: 15px; }}
QLabel[error="true"] {{ color: {c.error_text}; }}
"""


class Theme(QObject):
    """The app's current theme: applies the chosen one and follows the system's scheme.

    One per application (see :func:`theme_for`).
    """

    def __init__(self, app: QApplication) -> None:
        super().__init__(app)
        self.setObjectName(THEME_OBJECT)
        self._app = app
        self.choice: ThemeChoice = "system"
        # Captured before any palette of ours is set: what the platform gives.
        self._platform_dark = is_dark(app.palette())
        self._system_scheme = app.styleHints().colorScheme()
        app.styleHints().colorSchemeChanged.connect(self.system_scheme_changed)

    @property
    def dark(self) -> bool:
        """The dark theme is in use."""
        if self.choice != "system":
            return self.choice == "dark"
        if self._system_scheme == Qt.ColorScheme.Unknown:
            return self._platform_dark
        return self._system_scheme == Qt.ColorScheme.Dark

    def choose(self, choice: ThemeChoice) -> None:
        """Use ``choice`` (``system``, ``light`` or ``dark``) from now on."""
        if choice not in THEMES:
            choice = "system"
        self.choice = choice
        hints = self._app.styleHints()
        # Ask the platform too (Qt ≥ 6.8), so native dialogs match; a no-op where unsupported.
        if choice == "system":
            hints.unsetColorScheme()
        else:
            requested = Qt.ColorScheme.Dark if choice == "dark" else Qt.ColorScheme.Light
            if hints.colorScheme() != requested:
                hints.setColorScheme(requested)
        self.apply()

    def system_scheme_changed(self, scheme: Qt.ColorScheme) -> None:
        """The system switched between light and dark: follow it when set to ``system``."""
        if self.choice == "system":
            self._system_scheme = scheme
            self.apply()

    def apply(self) -> None:
        """Set the palette and the stylesheet of the current theme."""
        dark = self.dark
        palette = dark_palette() if dark else light_palette()
        if self._app.palette() != palette:
            self._app.setPalette(palette)
        sheet = stylesheet(DARK_COLORS if dark else LIGHT_COLORS)
        if self._app.styleSheet() != sheet:
            self._app.setStyleSheet(sheet)


def theme_for(app: QApplication) -> Theme:
    """The application's :class:`Theme` (made on first use)."""
    theme = app.findChild(Theme, THEME_OBJECT)
    if theme is None:
        theme = Theme(app)
    return theme
