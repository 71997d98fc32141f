"""The search index on real logs and a real SQLite file: languages, branches, catch-up, damage."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest
from helpers.forking import fork_at
from helpers.sessions import complete_turn, read_only

from branchwise.core.errors import InvalidSearch, SearchIndexUnavailable
from branchwise.core.projection import events as ev
from branchwise.core.search import query as search_query
from branchwise.core.search.index import INDEX_NAME, SCHEMA_VERSION, SearchIndex
from branchwise.core.search.query import SearchResult, plain_text
from branchwise.core.store.publish import replace_log
from branchwise.core.store.store import SessionStore


def say(store: SessionStore, session_id: str, turn_id: str, question: str, answer: str) -> None:
    """Commit one whole turn with the given texts."""
    with store.open_writer(session_id) as writer:
        writer.commit([ev.turn_start(turn_id), ev.user_message(f"u-{turn_id}", question)])
        writer.commit(
            [
                ev.assistant_message(f"a-{turn_id}", answer, "demo"),
                ev.turn_end(turn_id, "completed"),
            ]
        )


def new_session(store: SessionStore, title: str) -> str:
    with store.create(title) as writer:
        return writer.session_id


def found(index: SearchIndex, query: str, **options: object) -> set[str]:
    """The message ids (or ``title:<session>``) a search finds."""
    result = index.search(query, **options)  # type: ignore[arg-type]
    return {hit.message_id or f"title:{hit.session_id}" for hit in result.hits}


@pytest.fixture
def index(store: SessionStore) -> SearchIndex:
    with SearchIndex(store.root) as opened:
        yield opened  # type: ignore[misc]


@pytest.fixture
def mixed(store: SessionStore) -> str:
    """One session of English, code, Simplified and Traditional Chinese."""
    session_id = new_session(store, "Travel notes")
    say(store, session_id, "t1", "Where should we go in Spring?", "Branching lets you explore.")
    say(store, session_id, "t2", "我想去北京旅游", "北京的春天很美")
    say(store, session_id, "t3", "臺灣的臺北好玩嗎", "台北很好玩")
    say(store, session_id, "t4", "def parse_args(argv):", 'print("hello")')
    return session_id


def test_english_words_prefixes_and_case(
    store: SessionStore, index: SearchIndex, mixed: str
) -> None:
    index.catch_up_all(store)
    assert found(index, "spring") == {"u-t1"}
    assert found(index, "BRANCH") == {"a-t1"}  # a prefix, any case
    assert found(index, "bran expl") == {"a-t1"}  # every term must occur
    assert found(index, "travel") == {f"title:{mixed}"}
    assert found(index, "parse_args") == {"u-t4"}  # code is text too
    assert found(index, "go") == {"u-t1"}  # a two-letter word has no trigram
    assert found(index, "nowhere") == set()


def test_chinese_without_spaces_simplified_and_traditional_as_written(
    store: SessionStore, index: SearchIndex, mixed: str
) -> None:
    index.catch_up_all(store)
    assert found(index, "北京") == {"u-t2", "a-t2"}
    assert found(index, "臺") == {"u-t3"}  # Traditional as written
    assert found(index, "台北") == {"a-t3"}  # Simplified form: only where it is written so
    assert found(index, "臺北") == {"u-t3"}
    assert found(index, "春天很美") == {"a-t2"}
    hit = index.search("北京旅游").hits[0]
    assert hit.session_id == mixed and hit.turn_id == "t2" and hit.role == "user"
    assert hit.snippet == "我想去北京旅游" and hit.spans == ((3, 7),)


@pytest.mark.parametrize(
    "query",
    [
        '"hello"',
        "print(",
        "AND",
        "hello AND world",
        "*",
        "-",
        "NEAR(",
        'NEAR("a" "b")',
        "a OR b",
        "\0hello",
        "he\0llo",
        "^",
        "a:b",
        "{content}: x",
    ],
)
def test_query_syntax_is_searched_as_text(
    store: SessionStore, index: SearchIndex, mixed: str, query: str
) -> None:
    index.catch_up_all(store)
    assert isinstance(index.search(query), SearchResult)  # never an SQL error
    assert isinstance(index.search(f"{query} 北"), SearchResult)  # with a short term too


def test_quotes_and_operators_match_literally(store: SessionStore, index: SearchIndex) -> None:
    session_id = new_session(store, "syntax")
    say(store, session_id, "t1", 'say "hi" AND NEAR(x) -y *z', "nothing special")
    index.catch_up_all(store)
    assert found(index, '"hi"') == {"u-t1"}
    assert found(index, "NEAR(x)") == {"u-t1"}
    assert found(index, "AND") == {"u-t1"}
    assert found(index, "-y") == {"u-t1"}
    assert found(index, "*z") == {"u-t1"}
    assert found(index, '"nothing') == set()


def test_a_message_inherited_by_ten_branches_is_one_hit(
    store: SessionStore, index: SearchIndex
) -> None:
    root = new_session(store, "origin")
    say(store, root, "t1", "the quokka question", "a quokka answer")
    children = [fork_at(store, root, "t1", f"op-{n}").child_session_id for n in range(10)]
    index.catch_up_all(store)
    result = index.search("quokka question")
    assert result.total == 1 and len(result.hits) == 1
    hit = result.hits[0]
    assert hit.message_id == "u-t1" and len(hit.also_in) == 10
    assert {hit.session_id, *hit.also_in} == {root, *children}
    # credited where it was written, not in the newest branch that inherited it
    assert hit.session_id == root and hit.written_in == root
    newest_first = sorted(children, key=lambda c: (store.manifest(c).created_at, c), reverse=True)
    assert list(hit.also_in) == newest_first
    asked = index.search("quokka question", session_id=children[4]).hits[0]
    assert asked.session_id == children[4] and asked.written_in == root
    assert set(asked.also_in) == {root, *children} - {children[4]}
    # A branch's own turn belongs to it alone.
    say(store, children[3], "t2", "a quokka of its own", "yes")
    index.catch_up_all(store)
    own = index.search("quokka of its own").hits[0]
    assert own.session_id == children[3] and own.also_in == ()
    assert own.written_in == children[3]
    # a branch of that branch inherits it: still credited to the branch that wrote it
    grandchild = fork_at(store, children[3], "t2", "op-deeper").child_session_id
    index.catch_up_all(store)
    deeper = index.search("quokka of its own").hits[0]
    assert (deeper.session_id, deeper.also_in) == (children[3], (grandchild,))
    # In one conversation: what it inherited and what it wrote (rows far apart in the index).
    assert found(index, "quokka", session_id=children[3]) == {"u-t1", "a-t1", "u-t2"}
    assert found(index, "qu", session_id=children[3]) == {"u-t1", "a-t1", "u-t2"}
    assert found(index, "quokka", session_id=children[4]) == {"u-t1", "a-t1"}
    # Forgetting a branch drops it from also_in; its own messages go.
    index.forget(children[3])
    index.forget(grandchild)
    assert children[3] not in index.search("quokka question").hits[0].also_in
    assert found(index, "quokka of its own") == set()


def test_snippets_are_plain_text_without_markdown(store: SessionStore, index: SearchIndex) -> None:
    root = new_session(store, "marks")
    answer = (
        "## Branches\n\nA **branch** is a `pointer`, see [the docs](https://example.com).\n\n"
        "| Command | Does |\n| --- | :-: |\n| `git branch` | lists *them* |\n\n"
        "```sh\ngit switch -c quokka\n```\n> snake_case stays, 2*3*4 too"
    )
    say(store, root, "t1", "how do **quokka** branches work?", answer)
    index.catch_up_all(store)
    hits = {hit.role: hit for hit in index.search("quokka").hits}
    asked = hits["user"]
    assert asked.snippet == "how do quokka branches work?"
    assert [asked.snippet[a:b] for a, b in asked.spans] == ["quokka"]
    answered = hits["assistant"].snippet
    for mark in ("**", "`", "|", "##", "](", "```", "> "):
        assert mark not in answered, mark
    assert "git branch lists them git switch -c quokka snake_case stays, 2*3*4 too" in answered
    assert plain_text(answer).startswith(
        "Branches A branch is a pointer, see the docs. Command Does git branch lists them"
    )
    assert [answered[a:b] for a, b in hits["assistant"].spans] == ["quokka"]


def test_catch_up_reads_only_new_commits_and_updates_partial_texts(
    store: SessionStore, index: SearchIndex
) -> None:
    session_id = new_session(store, "growing")
    assert index.catch_up(store, session_id) == 1
    assert index.catch_up(store, session_id) == 0
    with store.open_writer(session_id) as writer:
        writer.commit([ev.turn_start("t1"), ev.user_message("u1", "tell me about penguins")])
        writer.commit([ev.assistant_message("a1", "Penguins live", "demo", partial=True)])
        assert index.catch_up(store, session_id) == 2
        assert found(index, "penguins") == {"u1", "a1"}
        writer.commit([ev.assistant_message("a1", "Penguins live in Antarctica", "demo")])
        writer.commit([ev.turn_end("t1", "completed")])
        assert index.catch_up(store, session_id) == 2
    assert found(index, "antarctica") == {"a1"}
    assert index.search("antarctica").hits[0].turn_id == "t1"
    assert index.search("penguins").total == 2  # the partial text was replaced in place
    with store.open_writer(session_id) as writer:
        writer.set_title("Birds of the south")
    index.catch_up(store, session_id)
    assert found(index, "birds") == {f"title:{session_id}"}
    assert found(index, "growing") == set()


def test_a_commit_never_indexed_is_found_by_the_next_search(
    store: SessionStore, index: SearchIndex
) -> None:
    session_id = new_session(store, "crash")
    say(store, session_id, "t1", "first walrus", "ok")
    index.catch_up_all(store)
    index.close()
    # A process committed and died before indexing: the store alone wrote this.
    say(store, session_id, "t2", "second walrus", "ok")
    with SearchIndex(store.root) as again:
        again.catch_up_all(store)
        assert found(again, "walrus") == {"u-t1", "u-t2"}


def test_a_deleted_index_is_rebuilt_with_the_same_answers(
    store: SessionStore, index: SearchIndex, mixed: str
) -> None:
    queries = ["北京", "臺", "branch", "go", "parse"]
    index.catch_up_all(store)
    before = [index.search(q).to_json() for q in queries]
    index.close()
    os.unlink(store.root / INDEX_NAME)
    with SearchIndex(store.root) as again:
        again.catch_up_all(store)
        assert [again.search(q).to_json() for q in queries] == before


def test_a_corrupt_index_is_moved_aside_and_rebuilt(
    store: SessionStore, index: SearchIndex, mixed: str
) -> None:
    index.catch_up_all(store)
    before = index.search("北京").to_json()
    index.close()
    path = store.root / INDEX_NAME
    size = path.stat().st_size
    path.write_bytes(os.urandom(max(size, 8192)))
    with SearchIndex(store.root) as again:
        again.catch_up_all(store)
        assert again.search("北京").to_json() == before
    aside = [p.name for p in store.root.iterdir() if p.name.startswith(f"{INDEX_NAME}.bad-")]
    assert len(aside) == 1


def test_damage_inside_an_open_index_is_rebuilt_on_search(store: SessionStore, mixed: str) -> None:
    with SearchIndex(store.root) as index:
        index.catch_up_all(store)
        before = index.search("explore").to_json()
    path = store.root / INDEX_NAME
    with sqlite3.connect(path) as conn:  # fold the WAL in, so the damage below is what is read
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = 4096
    for start in range(page, len(data), page):  # keep the header page, damage every other
        data[start : start + 64] = b"\xa5" * 64
    path.write_bytes(bytes(data))
    with SearchIndex(store.root) as index:
        assert index.search("explore").to_json() == before


def test_a_replaced_log_is_indexed_again(store: SessionStore, index: SearchIndex) -> None:
    session_id = new_session(store, "rewind")
    say(store, session_id, "t1", "keep this otter", "ok")
    say(store, session_id, "t2", "drop this beaver", "ok")
    index.catch_up_all(store)
    assert found(index, "beaver") == {"u-t2"}
    commits = [
        [{k: v for k, v in e.items() if k not in ("seq", "ts")} for e in frame.events]
        for frame in store.read(session_id).scan.frames[:3]
    ]
    commits.append([ev.user_message("u-new", "a new narwhal")])
    replace_log(store, session_id, commits)
    index.catch_up_all(store)
    assert found(index, "beaver") == set()
    assert found(index, "otter") == {"u-t1"}
    assert found(index, "narwhal") == {"u-new"}


def test_a_deleted_session_is_forgotten_by_catch_up_all(
    store: SessionStore, index: SearchIndex
) -> None:
    session_id = new_session(store, "ephemeral")
    say(store, session_id, "t1", "a lonely axolotl", "ok")
    index.catch_up_all(store)
    assert found(index, "axolotl") == {"u-t1"}
    import shutil

    shutil.rmtree(store.session_dir(session_id))
    index.catch_up_all(store)
    assert found(index, "axolotl") == set()


def test_limits_session_filter_totals_and_progress(store: SessionStore, index: SearchIndex) -> None:
    first, second = new_session(store, "one"), new_session(store, "two")
    for n in range(5):
        say(store, first, f"t{n}", f"llama number {n}", "ok")
    say(store, second, "t0", "llama elsewhere", "ok")
    calls: list[tuple[int, int]] = []
    index.catch_up_all(store, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 2), (2, 2)]
    result = index.search("llama", limit=2)
    assert len(result.hits) == 2 and result.total == 6
    assert index.search("llama", session_id=second).total == 1
    assert found(index, "ll", session_id=first) == {f"u-t{n}" for n in range(5)}
    with pytest.raises(InvalidSearch):
        index.search("   ")
    with pytest.raises(InvalidSearch):
        index.search("llama", limit=0)


def test_snippets_are_plain_text_around_the_match(store: SessionStore, index: SearchIndex) -> None:
    session_id = new_session(store, "long")
    text = "lorem ipsum " * 20 + "the Kestrel\nflies" + " dolor sit" * 30
    with store.open_writer(session_id) as writer:
        complete_turn(writer, "t1", text)
    index.catch_up_all(store)
    hit = index.search("kestrel").hits[0]
    assert "\n" not in hit.snippet and hit.snippet.startswith("…") and hit.snippet.endswith("…")
    assert [hit.snippet[a:b] for a, b in hit.spans] == ["Kestrel"]
    assert len(hit.snippet) <= 162


def test_a_read_only_data_folder_is_searched_in_memory(store: SessionStore, mixed: str) -> None:
    with read_only(store.root) as strict:
        if not strict:
            pytest.skip("the folder cannot be made read-only for this user")
        with SearchIndex(store.root) as index:
            index.catch_up_all(SessionStore(store.root))
            assert found(index, "北京") == {"u-t2", "a-t2"}
            assert index.in_memory
    assert not (store.root / INDEX_NAME).exists()


def test_index_path_is_a_cache_file_in_the_root(store: SessionStore, mixed: str) -> None:
    with SearchIndex(store.root) as index:
        index.catch_up_all(store)
    assert (store.root / INDEX_NAME).is_file()
    assert Path(store.root / INDEX_NAME).stat().st_size > 0


def test_short_queries_match_word_heads_and_single_characters(
    store: SessionStore, index: SearchIndex
) -> None:
    session_id = new_session(store, "short")
    say(store, session_id, "t1", "Going home ago", "ok")
    say(store, session_id, "t2", "ひらがなとカタカナ", "東京と北京")
    say(store, session_id, "t3", "a京 x-ray", "#hashtag 😀")
    index.catch_up_all(store)
    assert found(index, "go") == {"u-t1"}  # the head of "Going"; "ago" has no word "go…"
    assert found(index, "G") == {"u-t1"}  # one letter: a prefix, any case
    assert found(index, "GO") == {"u-t1"}
    assert found(index, "ag") == {"u-t1"}
    assert found(index, "京") == {"a-t2", "u-t3"}
    assert found(index, "北京") == {"a-t2"}
    assert found(index, "京北") == set()  # characters in the order written
    assert found(index, "カタ") == {"u-t2"}
    assert found(index, "a京") == {"u-t3"}
    assert found(index, "xr") == set() and found(index, "x-") == {"u-t3"}
    assert found(index, "#") == {"a-t3"}  # no letters: matched in the text itself
    assert found(index, "😀") == {"a-t3"}
    assert found(index, "go 北京") == set()  # every term must occur
    assert found(index, "home go") == {"u-t1"}  # a trigram term with a short one
    assert found(index, "# hashtag") == {"a-t3"}


def test_short_queries_do_not_scan_the_texts(store: SessionStore, index: SearchIndex) -> None:
    """The work a short query does depends on its matches, not on how many messages exist."""

    def steps(query: str) -> int:
        count = 0

        def tick() -> int:
            nonlocal count
            count += 1
            return 0

        conn = index._connection()
        conn.set_progress_handler(tick, 50)
        try:
            index.search(query)
        finally:
            conn.set_progress_handler(None, 0)
        return count

    session_id = new_session(store, "few")
    say(store, session_id, "t0", "北京 go", "ok")
    index.catch_up_all(store)
    before = {query: steps(query) for query in ("北京", "臺", "g")}
    with store.open_writer(session_id) as writer:
        for n in range(1, 400):
            writer.commit([ev.user_message(f"filler-{n}", f"filler text number {n} 上海")])
    index.catch_up_all(store)
    after = {query: steps(query) for query in ("北京", "臺", "g")}
    assert all(after[query] <= before[query] + 5 for query in before), (before, after)
    assert found(index, "北京") == {"u-t0"}


def test_ranked_by_bm25_newer_first_on_ties_and_bounded_candidates(
    store: SessionStore, index: SearchIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = new_session(store, "ranking")
    say(store, session_id, "t1", "walrus walrus walrus", "ok")
    say(store, session_id, "t2", "one walrus among more words", "ok")
    say(store, session_id, "t3", "one walrus among many words", "ok")
    index.catch_up_all(store)
    assert [hit.message_id for hit in index.search("walrus").hits] == ["u-t1", "u-t3", "u-t2"]
    assert [hit.message_id for hit in index.search("wa").hits] == ["u-t1", "u-t3", "u-t2"]
    # A query matching more than RANKED_CANDIDATES messages ranks the newest that many.
    monkeypatch.setattr(search_query, "RANKED_CANDIDATES", 2)
    result = index.search("walrus")
    assert [hit.message_id for hit in result.hits] == ["u-t3", "u-t2"] and result.total == 3
    assert [hit.message_id for hit in index.search("walrus", limit=1).hits] == ["u-t3"]


def test_an_index_of_another_version_is_emptied_and_refilled(
    store: SessionStore, mixed: str
) -> None:
    path = store.root / INDEX_NAME
    with sqlite3.connect(path) as old:  # what version 1 left: a meta table, user_version 0
        old.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        old.execute("INSERT INTO meta VALUES ('schema', '1')")
        old.execute("CREATE TABLE messages(id INTEGER PRIMARY KEY, content TEXT)")
        old.execute("CREATE VIRTUAL TABLE messages_fts USING fts5(content, tokenize='trigram')")
        old.execute("INSERT INTO messages_fts VALUES ('stale 北京')")
    with SearchIndex(store.root) as index:
        assert index.search("北京").total == 0  # emptied on open; the catch-up refills it
        index.catch_up_all(store)
        assert found(index, "北京") == {"u-t2", "a-t2"}
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert "meta" not in names and {"messages_fts", "messages_short"} <= names


def test_a_locked_index_is_a_typed_error_and_searches_still_answer(
    store: SessionStore, mixed: str
) -> None:
    with SearchIndex(store.root) as index:
        index.catch_up_all(store)
    say(store, mixed, "t5", "a later 北京 note", "ok")
    holder = sqlite3.connect(store.root / INDEX_NAME, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing, past our wait
    try:
        with SearchIndex(store.root, busy_timeout=0.1) as index:
            with pytest.raises(SearchIndexUnavailable) as caught:
                index.catch_up_all(store)
            assert caught.value.code == "search_index_unavailable"
            assert found(index, "北京") == {"u-t2", "a-t2"}  # readers are not blocked
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with SearchIndex(store.root) as index:
        index.catch_up_all(store)
        assert found(index, "北京") == {"u-t2", "a-t2", "u-t5"}


def test_searches_are_answered_while_a_catch_up_runs(
    store: SessionStore, index: SearchIndex
) -> None:
    for n in range(3):
        say(store, new_session(store, f"zoo {n}"), "t1", f"a tapir number {n}", "ok")
    answers: list[SearchResult] = []

    def progress(done: int, total: int) -> None:
        if done == 1:  # another thread searches while this catch-up has sessions to go
            other = threading.Thread(target=lambda: answers.append(index.search("tapir")))
            other.start()
            other.join(timeout=30)
            assert not other.is_alive(), "the search waited for the whole catch-up"

    index.catch_up_all(store, progress)
    assert answers[0].total == 1  # what was indexed so far
    assert index.search("tapir").total == 3


def test_terms_with_symbols_match_literally(store: SessionStore, index: SearchIndex) -> None:
    session_id = new_session(store, "languages")
    say(store, session_id, "t1", "I write C# and F# daily", "ok")
    say(store, session_id, "t2", "cats can climb curtains", "fine")
    say(store, session_id, "t3", "C++ templates on .NET", "node.js too")
    say(store, session_id, "t4", "the internet of nodes", "js files")
    say(store, session_id, "t5", "a c-string in C", "fast")
    index.catch_up_all(store)
    assert found(index, "C#") == {"u-t1"}  # not every word beginning with "c"
    assert found(index, "c#") == {"u-t1"}
    assert found(index, "F#") == {"u-t1"}
    assert found(index, "C++") == {"u-t3"}
    assert found(index, ".NET") == {"u-t3"}  # not "internet"
    assert found(index, "node.js") == {"a-t3"}  # not "nodes" and "js"
    assert found(index, "c-") == {"u-t5"}
    assert found(index, "C# daily") == {"u-t1"}
    assert index.search("C#").hits[0].message_id == "u-t1"


def test_tool_calls_and_results_are_found_with_their_kind(
    store: SessionStore, index: SearchIndex
) -> None:
    session_id = new_session(store, "tools")
    with store.open_writer(session_id) as writer:
        writer.commit([ev.turn_start("t1"), ev.user_message("u-t1", "what is in the folder")])
        writer.commit(
            [
                ev.tool_call("call_0", "list_files", {"path": "/srv/quarterly"}),
                ev.tool_result("call_0", "budget.xlsx\nroadmap.md"),
                ev.tool_result("call_0", "archive.zip"),  # a second result of the same call
            ]
        )
        writer.commit([ev.assistant_message("a-t1", "Three files.", "demo")])
        writer.commit([ev.turn_end("t1", "completed")])
        writer.commit([ev.turn_start("t2"), ev.user_message("u-t2", "again")])
        writer.commit(  # the same call id in another turn is another call
            [ev.tool_call("call_0", "read_file", "notes.txt"), ev.tool_result("call_0", "kiwi")]
        )
        writer.commit([ev.turn_end("t2", "completed")])
    index.catch_up_all(store)

    def kinds(query: str) -> list[tuple[str, str | None, str]]:
        return sorted((h.role, h.turn_id, h.message_id) for h in index.search(query).hits)

    assert kinds("quarterly") == [("tool_call", "t1", "call_0")]
    assert kinds("list_files") == [("tool_call", "t1", "call_0")]
    assert kinds("roadmap") == [("tool_result", "t1", "call_0")]
    assert kinds("archive") == [("tool_result", "t1", "call_0")]
    assert kinds("notes.txt") == [("tool_call", "t2", "call_0")]
    assert kinds("kiwi") == [("tool_result", "t2", "call_0")]
    child = fork_at(store, session_id, "t2").child_session_id
    index.catch_up_all(store)
    (hit,) = index.search("roadmap", session_id=child).hits
    assert hit.session_id == child and hit.also_in == (session_id,)  # inherited: one hit


def test_the_index_files_are_private(store: SessionStore, index: SearchIndex, mixed: str) -> None:
    index.catch_up_all(store)
    files = sorted(store.root.glob(f"{INDEX_NAME}*"))
    assert {p.name for p in files} >= {INDEX_NAME, f"{INDEX_NAME}-wal", f"{INDEX_NAME}-shm"}
    assert {oct(p.stat().st_mode & 0o777) for p in files} == {"0o600"}
