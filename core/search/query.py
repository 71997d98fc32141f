"""Searching the index: what a person typed, as a query of the FTS5 tables, and its hits.

Why the ``trigram`` tokenizer: Chinese is written without spaces, so a word
tokenizer (``unicode61``) makes a whole run of Han characters one token and
"北京" would never match inside "我在北京工作". The trigram tokenizer indexes
every three-character substring, case-insensitively, so any query of three
or more characters is a substring match: English words and prefixes
("bran" finds "Branching"), code fragments and Chinese alike, Simplified and
Traditional each as written (no conversion between them).

Terms of one or two characters ("北京", "臺", "go") have no trigram. A second
FTS5 table, ``messages_short``, answers them from an index instead of a scan
of every text: its text is the message rewritten by :func:`short_query_text`
as one token per Han or kana character and the first two letters of every
other word, tokenized by ``unicode61`` (case folded, diacritics kept as
written). "北京" is then the phrase ``北 京`` (adjacent characters, as
written: "台" never finds "臺"), "go" the token ``go`` (every word beginning
with "go", any case), "g" the prefix ``g*`` from the table's one-character
prefix index. Why not ``unicode61`` over the whole words with
``prefix='1 2'``: that stores every word plus two prefix entries for it,
while the heads store one short token per word, and a short query never
needs more than the first two letters. A term with no letter, digit or Han
character ("#", "-", an emoji) is matched in the texts themselves. A short
term that mixes letters with symbols ("C#", "F#", "x-") is both: its heads
find the candidates and the term itself, as written, must occur in the text,
so "C#" finds C# and never every word that begins with "c". Longer terms
with symbols ("C++", ".NET", "node.js") are trigram substrings, which keep
their symbols, so they match literally too.

User text is searched as text, never as FTS5 query syntax: every term is
wrapped in double quotes (inner quotes doubled), so ``"``, ``AND``, ``*``,
``-`` or ``NEAR(`` are looked for literally and never surface as SQL errors.
Terms are separated by white space and must all occur (in any order); hits
are ordered by FTS5's bm25 rank, newer messages first on ties. A query
matching more than :data:`RANKED_CANDIDATES` messages ranks its newest that
many: scoring and sorting every one of 100,000 matches of a common word
costs more than a search may, and says little. ``total`` counts matching
messages exactly up to :data:`TOTAL_CAP`.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from branchwise.core.errors import InvalidSearch

MAX_LIMIT = 1000
"""The most hits one search returns."""
TOTAL_CAP = 10_000
"""``total`` is exact up to this many matching messages, and this number beyond."""
SNIPPET_BEFORE = 40
SNIPPET_LENGTH = 160
RANKED_CANDIDATES = 2000
"""A query matching more messages than this ranks its newest this many (see :func:`_search`)."""


# Scripts written without spaces between words: each character is a token of its own.
_UNSPACED = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3100-\u312f\u31a0-\u31bf"  # Bopomofo
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Han, extension A, compatibility ideographs
    "\U00020000-\U0003134f"  # Han extensions B to G
)
_SHORT_TOKEN = re.compile(f"[{_UNSPACED}]|(?:(?![{_UNSPACED}])[^\\W_])+")
_UNSPACED_CHAR = re.compile(f"[{_UNSPACED}]")


def short_query_text(text: str) -> str:
    """What the short-query table indexes: unspaced characters one by one, words by their heads.

    ``"Branching lets you 去北京"`` becomes ``"Br le yo 去 北 京"``. A query of
    one or two characters is then a lookup of whole tokens (FTS5 folds the
    case), never a scan: ``"北京"`` is the phrase ``北 京``, ``"go"`` the head
    ``go`` (the words beginning with "go"), ``"g"`` the prefix ``g*`` (the
    table's one-character prefix index).
    """
    return " ".join(token[:2] for token in _SHORT_TOKEN.findall(text))


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One matching message (or title), shown once however many branches hold it.

    Attributes:
        session_id: the conversation the hit is shown in: the one asked for,
            else the one that wrote the message (:attr:`written_in`).
        title: that conversation's title.
        turn_id: the message's turn (``None`` for titles and imported history).
        message_id: the message's id (``""`` for a title hit).
        role: ``user``, ``assistant``, ``tool_call``, ``tool_result`` or ``title``.
        snippet: plain text around the first match (Markdown taken out: no ``**``,
            backticks, table pipes or heading marks, see :func:`plain_text`).
        spans: ``(start, end)`` character offsets of the matches inside ``snippet``.
        also_in: the other conversations containing the same message, newest first.
        written_in: the conversation that wrote the message: of the conversations
            holding it, the first created (branches inherit their ancestors'
            messages and are created after them); "" when not known.
    """

    session_id: str
    title: str
    turn_id: str | None
    message_id: str
    role: str
    snippet: str
    spans: tuple[tuple[int, int], ...]
    also_in: tuple[str, ...]
    written_in: str = ""

    def to_json(self) -> dict[str, Any]:
        """``{"sessionId", "title", "turnId", "messageId", "role", "snippet", "alsoIn",
        "writtenIn"}``."""
        return {
            "sessionId": self.session_id,
            "title": self.title,
            "turnId": self.turn_id,
            "messageId": self.message_id,
            "role": self.role,
            "snippet": self.snippet,
            "alsoIn": list(self.also_in),
            "writtenIn": self.written_in or self.session_id,
        }


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The best hits of one search and how many messages matched in all.

    Attributes:
        hits: best first (bm25 rank, newer first on ties), at most the limit.
        total: matching messages, exact up to :data:`TOTAL_CAP`.
    """

    hits: tuple[SearchHit, ...]
    total: int

    def to_json(self) -> dict[str, Any]:
        """``{"hits": [...], "total": N}``."""
        return {"hits": [hit.to_json() for hit in self.hits], "total": self.total}


def query_terms(query: str, limit: int) -> tuple[str, ...]:
    """The distinct white-space separated terms of ``query``, checked with ``limit``.

    Raises:
        InvalidSearch: an empty query or a limit out of range.
    """
    # NUL ends an FTS5 string early (an SQL error): it separates terms like a space.
    terms = tuple(dict.fromkeys(query.replace("\0", " ").split()))
    if not terms:
        raise InvalidSearch("the search query is empty", query=query)
    if isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidSearch(f"the limit must be between 1 and {MAX_LIMIT}", limit=limit)
    return terms


def _fts_phrase(term: str) -> str:
    """``term`` as one FTS5 string (text, never syntax): quoted, inner quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


def _short_phrase(term: str) -> str | None:
    """A term of one or two characters as an FTS5 phrase of ``messages_short``, if it has tokens.

    Han and kana characters are whole tokens; a letter or digit ending the
    term is a prefix (``"g"`` → ``"g"*``: the words beginning with g). A term
    of punctuation or symbols only has no token: ``None``.
    """
    tokens = [token[:2] for token in _SHORT_TOKEN.findall(term)]
    if not tokens:
        return None
    phrase = '"' + " ".join(tokens) + '"'  # tokens are letters, digits and Han: no quotes
    last = tokens[-1]
    return phrase + "*" if len(last) == 1 and not _UNSPACED_CHAR.fullmatch(last) else phrase


def _has_symbol(term: str) -> bool:
    """Whether ``term`` holds a character its heads drop (``#`` of "C#", ``-`` of "x-")."""
    return "".join(_SHORT_TOKEN.findall(term)) != term


def _scan_condition(term: str) -> tuple[str, str]:
    """A condition matching a term of punctuation or symbols as a substring, and its argument.

    Only such terms (``"-"``, ``"#"``, an emoji, and the short terms that mix
    letters with them, ``"C#"``) are looked for in the texts themselves; with
    other terms they only filter those terms' matches.
    ``LIKE`` folds ASCII case; a term without case uses ``instr``.
    """
    if term.lower() == term.upper():
        return "instr(m.content, ?) > 0", term
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return "m.content LIKE ? ESCAPE '\\'", f"%{escaped}%"


def run_query(
    conn: sqlite3.Connection, terms: tuple[str, ...], limit: int, session_id: str | None
) -> SearchResult:
    """Every term must occur; best first by bm25, newer first on ties.

    Terms of three or more characters are matched by ``messages_fts``
    (trigram substrings), shorter ones by ``messages_short``, and the first
    of the two a query has drives it. The matches are first read newest
    first, up to :data:`TOTAL_CAP` row ids (that is ``total``). bm25 is then
    computed for the newest :data:`RANKED_CANDIDATES` of them only (one
    rowid range for FTS5), so a common word costs the same as a rare one;
    below that many matches, every match is ranked, as before. Texts,
    snippets and ``alsoIn`` are read for the returned page only.
    """
    long_terms = [term for term in terms if len(term) >= 3]
    short_phrases: list[str] = []
    scanned: list[str] = []
    for term in terms:
        if len(term) < 3:
            phrase = _short_phrase(term)
            if phrase is not None:
                short_phrases.append(phrase)
            if phrase is None or _has_symbol(term):
                scanned.append(term)
    where: list[str] = []
    args: list[Any] = []
    table: str | None = None
    if long_terms:
        table = "messages_fts"
        where.append("messages_fts MATCH ?")
        args.append(" ".join(_fts_phrase(term) for term in long_terms))
        if short_phrases:
            # "+": a filter on the trigram matches, never a row-by-row lookup plan.
            where.append(
                "+messages_fts.rowid IN "
                "(SELECT rowid FROM messages_short WHERE messages_short MATCH ?)"
            )
            args.append(" ".join(short_phrases))
    elif short_phrases:
        table = "messages_short"
        where.append("messages_short MATCH ?")
        args.append(" ".join(short_phrases))
    row = f"{table}.rowid" if table is not None else "m.id"
    if table is None:
        source = "messages m"
    elif scanned:
        source = f"{table} JOIN messages m ON m.id = {table}.rowid"
    else:
        source = table
    for term in scanned:
        condition, argument = _scan_condition(term)
        where.append(condition)
        args.append(argument)
    if session_id is not None:
        # The matches are read in order, only between the session's first and last rows, and
        # kept when the session holds them ("+": looking each of the session's messages up in
        # the index instead costs milliseconds apiece).
        first, last = conn.execute(
            "SELECT min(message), max(message) FROM message_sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        where.append(
            f"{row} BETWEEN ? AND ? AND "
            f"+{row} IN (SELECT message FROM message_sessions WHERE session_id = ?)"
        )
        args.extend((first, last, session_id))
    clause = " AND ".join(where)
    matches = [
        found
        for (found,) in conn.execute(
            f"SELECT {row} FROM {source} WHERE {clause} ORDER BY {row} DESC LIMIT ?",
            (*args, TOTAL_CAP),
        )
    ]
    if table is None or not matches:
        page = matches[:limit]
    else:
        floor = matches[min(len(matches), RANKED_CANDIDATES) - 1]
        page = [
            found
            for (found,) in conn.execute(
                f"SELECT {row} FROM {source} WHERE {clause} AND {row} >= ? "
                f"ORDER BY {table}.rank, {row} DESC LIMIT ?",
                (*args, floor, limit),
            )
        ]
    hits = _hits(conn, page, terms, session_id)
    return SearchResult(tuple(hits), max(len(matches), len(hits)))


def _hits(
    conn: sqlite3.Connection, page: list[int], terms: tuple[str, ...], session_id: str | None
) -> list[SearchHit]:
    """The page's rows as hits: text, snippet, and the conversations holding each (two reads)."""
    if not page:
        return []
    marks = ", ".join("?" * len(page))
    rows = {
        found[0]: found[1:]
        for found in conn.execute(
            f"SELECT id, message_id, role, turn_id, content FROM messages WHERE id IN ({marks})",
            page,
        )
    }
    holders: dict[int, list[tuple[str, str]]] = {}
    for message, holder, title in conn.execute(
        "SELECT ms.message, s.session_id, s.title FROM message_sessions ms "
        f"JOIN sessions s ON s.session_id = ms.session_id WHERE ms.message IN ({marks}) "
        "ORDER BY s.created_at DESC, s.session_id DESC",
        page,
    ):
        holders.setdefault(message, []).append((holder, title))
    hits = []
    for row_id in page:
        found, held = rows.get(row_id), holders.get(row_id)
        if found is None or not held:
            continue  # indexed rows of a session whose first catch-up is not committed yet
        message_id, role, turn_id, content = found
        writer = held[-1]  # the first created holder: the others inherited it from it
        shown = next((h for h in held if h[0] == session_id), writer)
        text = plain_text(content) if role in ("user", "assistant") else content
        snippet, spans = _snippet(text, terms)
        hits.append(
            SearchHit(
                session_id=shown[0],
                title=shown[1],
                turn_id=turn_id,
                message_id=message_id,
                role=role,
                snippet=snippet,
                spans=spans,
                also_in=tuple(h[0] for h in held if h[0] != shown[0]),
                written_in=writer[0],
            )
        )
    return hits


_FENCE = re.compile(r"^[ \t]*(?:```|~~~).*$", re.MULTILINE)
_RULE_CELL = r"[ \t]*:?-+:?[ \t]*"
_TABLE_RULE = re.compile(rf"^[ \t]*\|?{_RULE_CELL}(?:\|{_RULE_CELL})*\|?[ \t]*$", re.MULTILINE)
_LINE_MARK = re.compile(r"^[ \t]*(?:#{1,6}[ \t]+|>[ \t]?|[-*+][ \t]+(?=\S))", re.MULTILINE)
_IMAGE_OR_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", re.DOTALL)
_EMPHASIS = re.compile(r"(?<![\w*])([*_])(?=\S)([^*_\n]+?)(?<=\S)\1(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_CODE = re.compile(r"`+([^`\n]*?)`+")
_CELL_PIPE = re.compile(r"[ \t]*\|[ \t]*")
_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|>~])")
_SPACES = re.compile(r"[ \t\r\n]+")
_ESCAPE_BASE = 0xE000
_KEPT = re.compile("[\ue000-\ue07f]")


def plain_text(markdown: str) -> str:
    r"""A message's words without its Markdown: what a snippet shows.

    A snippet is plain text (highlighted, never rendered), so marks would be
    shown as they are: ``**bold**``, ``\`code\```, ``| a | b |``, ``# Title``.
    Code keeps its text without fences or backticks, a table its cells (a
    row's cells separated by spaces, its rule dropped), a link its words;
    emphasis, headings, quotes and bullets lose their marks; lines become
    one line. What only looks like a mark inside words (``snake_case``,
    ``2*3*4``) stays.
    """
    # An escaped mark is text: kept aside (as a private-use character) until the marks are gone.
    text = _ESCAPED.sub(lambda m: chr(_ESCAPE_BASE + ord(m.group(1))), markdown)
    text = _FENCE.sub("", text)
    text = _TABLE_RULE.sub("", text)
    text = _LINE_MARK.sub("", text)
    text = _IMAGE_OR_LINK.sub(r"\1", text)
    text = _CODE.sub(r"\1", text)
    text = _STRONG.sub(r"\2", text)
    text = _EMPHASIS.sub(r"\2", text)
    text = _STRIKE.sub(r"\1", text)
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("|") or stripped.endswith("|"):
            line = _CELL_PIPE.sub("  ", stripped.strip("|"))
        lines.append(line)
    text = _KEPT.sub(lambda m: chr(ord(m.group()) - _ESCAPE_BASE), "\n".join(lines))
    return _SPACES.sub(" ", text).strip()


def _snippet(content: str, terms: Iterable[str]) -> tuple[str, tuple[tuple[int, int], ...]]:
    """Plain text around the first match and the match offsets inside it."""
    pattern = re.compile("|".join(re.escape(term) for term in terms), re.IGNORECASE)
    first = pattern.search(content)
    start = max(0, (first.start() if first else 0) - SNIPPET_BEFORE)
    end = min(len(content), start + SNIPPET_LENGTH)
    if first is not None and first.end() > end:
        end = min(len(content), first.end())
    piece = content[start:end]
    # Line breaks become spaces (same length: the offsets hold).
    prefix = "…" if start > 0 else ""
    snippet = (
        prefix + piece.replace("\r", " ").replace("\n", " ") + ("…" if end < len(content) else "")
    )
    spans = tuple(
        (len(prefix) + match.start(), len(prefix) + match.end())
        for match in pattern.finditer(piece)
        if match.end() > match.start()
    )
    return snippet, spans
