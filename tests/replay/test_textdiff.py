"""Where two texts differ, and the windows the report prints around the change."""

from __future__ import annotations

from otel_replay.replay import Change
from otel_replay.replay._textdiff import Excerpt, excerpts, spot

PROMPT = (
    "You are Ada, the customer-support assistant of Northwind Electronics. Be concise and "
    "friendly. Use the tools to look up orders, check the weather at the delivery address and "
    "issue refunds; never invent order details."
)


def test_equal_texts_have_no_spot() -> None:
    assert spot(PROMPT, PROMPT) is None
    assert excerpts(PROMPT, PROMPT) is None


def test_the_span_takes_in_whole_words_on_both_sides() -> None:
    new = PROMPT.replace("order details", "delivery dates")
    where = spot(PROMPT, new)
    assert where is not None
    assert where.first == PROMPT.index("order details")
    assert PROMPT[where.start : where.recorded_end] == "order details."
    assert new[where.start : where.replayed_end] == "delivery dates."


def test_the_first_differing_character_inside_a_word() -> None:
    where = spot("status, items", "status and items")
    assert where is not None
    assert where.first == 6 and where.start == 0  # the word 'status,' against 'status'
    windows = excerpts("status, items", "status and items")
    assert windows == (
        Excerpt("", "status,", " items", "status"),
        Excerpt("", "status and", " items", "status"),
    )


def test_windows_keep_context_each_side_and_cut_long_spans_in_the_middle() -> None:
    recorded = "a " * 50 + "X" * 200 + " z" * 50
    replayed = "a " * 50 + "Y" * 10 + " z" * 50
    windows = excerpts(recorded, replayed, context=10, width=30)
    assert windows is not None
    old, new = windows
    assert old.before == new.before == "…a a a a a "
    assert old.changed == "X" * 20 + "…" + "X" * 9
    assert new.changed == "Y" * 10
    assert old.after == new.after == " z z z z z…"


def test_an_insertion_and_a_deletion() -> None:
    assert excerpts("one two", "one big two") == (
        Excerpt("one ", "", "two", ""),
        Excerpt("one ", "big ", "two", ""),
    )
    assert excerpts("one big two", "one two") == (
        Excerpt("one ", "big ", "two", ""),
        Excerpt("one ", "", "two", ""),
    )


def test_whitespace_changes_stay_visible_on_one_line() -> None:
    windows = excerpts("line one\nline two", "line one\n\nline two")
    assert windows is not None
    assert str(windows[0]) == "line one\\nline two"
    assert str(windows[1]) == "line one\\n\\nline two"


def test_a_change_carries_whole_values_and_describes_the_window() -> None:
    new = PROMPT.replace("order details", "delivery dates")
    change = Change("system instructions", "changed", PROMPT, new)
    assert change.differs_at == PROMPT.index("order details")
    assert change.to_json() == {
        "field": "system instructions",
        "kind": "changed",
        "recorded": PROMPT,
        "replayed": new,
        "differs_at": PROMPT.index("order details"),
    }
    assert change.describe() == (
        f"system instructions: differs from character {PROMPT.index('order details') + 1} "
        f"({len(PROMPT)} → {len(new)} characters): …refunds; never invent order details. → "
        "…refunds; never invent delivery dates."
    )
    short = Change("model", "changed", "gpt-4o-mini", "gpt-4o")
    assert short.describe() == "model: gpt-4o-mini → gpt-4o"
