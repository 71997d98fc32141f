"""Token and speed figures as people read them: a turn's footer and the status bar.

As LM Studio shows them: per answer, prompt and answer tokens, tokens per
second and the time to the first token; per conversation, its own total and,
where the model's server states its context length, how full the context
window is. Counts the server did not report are estimates and say so (a
"≈" and a tooltip). The texts are built here from the host's values
(:class:`~branchwise.core.projection.figures.AnswerFigures`,
:class:`~branchwise.desktop.host.usage.ConversationUsage`) so the footer, the
status bar and the tests read one wording.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from branchwise.core.i18n.language import _, format_number, ngettext
from branchwise.core.i18n.reasons import fill
from branchwise.core.projection.figures import AnswerFigures
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.conversation import ConversationRef
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.usage import ConversationUsage

SEPARATOR = " · "


def _count(n: int, estimated: bool) -> str:
    return ("≈" if estimated else "") + format_number(n)


def figures_text(figures: AnswerFigures) -> str:
    """One answer's footer line, e.g. ``Prompt 12 · answer 345 tokens · 41.2 tokens/s · …``."""
    counts = fill(
        ngettext(
            "Prompt {prompt} · answer {answer} token",
            "Prompt {prompt} · answer {answer} tokens",
            figures.output_tokens,
        ),
        {
            "prompt": _count(figures.input_tokens, figures.estimated),
            "answer": _count(figures.output_tokens, figures.estimated),
        },
    )
    parts = [counts]
    speed = figures.tokens_per_second
    if speed is not None:
        parts.append(fill(_("{speed} tokens/s"), {"speed": format_number(round(speed, 1))}))
    if figures.first_token_ms is not None:
        seconds = format_number(round(figures.first_token_ms / 1000, 2))
        parts.append(fill(_("{seconds} s to first token"), {"seconds": seconds}))
    return SEPARATOR.join(parts)


def figures_tooltip(figures: AnswerFigures) -> str:
    """Where an answer's figures come from."""
    lines = [
        _("The server did not report token counts: they are estimated from the text.")
        if figures.estimated
        else _("Token counts as the server reported them.")
    ]
    if figures.inherited:
        lines.append(_("This answer was inherited: it counts in the conversation it came from."))
    return "\n".join(lines)


def usage_text(usage: ConversationUsage) -> str:
    """The status bar's line for a conversation: its own total, and the context fill if known."""
    parts = [
        fill(
            ngettext(
                "This conversation: {tokens} token",
                "This conversation: {tokens} tokens",
                usage.total,
            ),
            {"tokens": _count(usage.total, usage.estimated)},
        )
    ]
    fill_share = usage.fill
    if fill_share is not None and usage.context_length is not None:
        parts.append(
            fill(
                _("Context: {percent} of {length}"),
                {
                    "percent": format_number(round(fill_share * 100)) + "%",
                    "length": format_number(usage.context_length),
                },
            )
        )
    return SEPARATOR.join(parts)


def usage_tooltip(usage: ConversationUsage) -> str:
    """What the status bar's figures count."""
    lines = [
        fill(
            _("Prompt {prompt} and answer {answer} tokens of this conversation's own turns."),
            {
                "prompt": _count(usage.input_tokens, usage.estimated),
                "answer": _count(usage.output_tokens, usage.estimated),
            },
        ),
        _("A branch counts only its own turns, not the ones it inherited."),
    ]
    if usage.estimated:
        lines.append(_("Some counts are estimated: the server did not report them."))
    if usage.context_length is None:
        lines.append(_("The model's server does not state its context length."))
    elif usage.context_used is not None:
        lines.append(
            fill(
                _("The last answer used {used} of the model's {length} tokens of context."),
                {
                    "used": _count(usage.context_used, usage.context_estimated),
                    "length": format_number(usage.context_length),
                },
            )
        )
    return "\n".join(lines)


class UsageLabel(QLabel):
    """The status bar's figures for the conversation in front (empty when none is).

    Args:
        host: where the figures are read.
    """

    def __init__(self, host: Host, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("usageLabel")
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.host = host
        self.ref: ConversationRef | None = None
        self.refresh()

    def show_for(self, ref: ConversationRef | None) -> None:
        """Show the figures of ``ref`` (``None``: no conversation in front)."""
        self.ref = ref
        self.refresh()

    def apply_changes(self, changes: Changes) -> None:
        """Re-render when the conversation in front, or the settings, changed."""
        if self.ref is not None and (changes.settings or changes.touches(self.ref.session_id)):
            self.refresh()

    def refresh(self) -> None:
        """Read the figures again and show them."""
        usage = self.host.usage_at(self.ref) if self.ref is not None else None
        if usage is None:
            self.setText("")
            self.setToolTip("")
            self.hide()
            return
        self.setText(usage_text(usage))
        self.setToolTip(usage_tooltip(usage))
        self.setAccessibleName(self.text())
        self.show()

    def retranslate_ui(self) -> None:
        """Re-render in the new language."""
        self.refresh()
