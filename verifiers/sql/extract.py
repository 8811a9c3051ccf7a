"""Pulling the SQL query out of a model completion, and cheap lexical checks on it.

The lexer here only knows what it must: string literals ('...', "...", `...`, [...]), comments (``--`` and
``/* */``) and parentheses, so that semicolons, ``ORDER BY`` and keywords inside strings or subqueries are
not mistaken for top-level ones. Whether the query is valid SQL is left to the database engine itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# ```sql ... ``` (also sqlite/duckdb/postgresql tags, or no tag). The closing fence may be missing when the
# generation was cut at max_new_tokens; an unclosed final fence still counts.
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
SQL_FENCE_LANGS = ("sql", "sqlite", "sqlite3", "duckdb", "postgresql", "postgres", "mysql", "")


def extract_sql(text: str, *, mode: str = "last_fence", langs: tuple[str, ...] = SQL_FENCE_LANGS) -> str:
    """The SQL in ``text``.

    Args:
        text: The completion.
        mode: ``"last_fence"`` (default): the last fenced block whose language tag is in ``langs``, else the
            whole text; ``"first_fence"``: the first such block, else the whole text; ``"fence_only"``: the
            last such block, else ``""`` (no fence means no answer); ``"whole"``: the whole text.
        langs: Accepted fence language tags (lower case; ``""`` accepts an untagged fence).

    Returns:
        The query, stripped of surrounding whitespace and trailing semicolons.
    """
    if mode not in ("last_fence", "first_fence", "fence_only", "whole"):
        raise ValueError(f"unknown extraction mode {mode!r}")
    text = text or ""
    if mode != "whole":
        blocks = [body for lang, body in _FENCE.findall(text) if lang.lower() in langs]
        if blocks:
            text = blocks[0] if mode == "first_fence" else blocks[-1]
        elif mode == "fence_only":
            return ""
    return strip_sql(text)


def strip_sql(sql: str) -> str:
    """``sql`` without surrounding whitespace and trailing semicolons."""
    sql = sql.strip()
    while sql.endswith(";"):
        sql = sql[:-1].rstrip()
    return sql


def tokens(sql: str) -> Iterator[tuple[str, str, int]]:
    """Yields ``(kind, text, depth)`` for the top-level lexical items of ``sql``.

    ``kind`` is ``"word"``, ``"string"``, ``"punct"`` or ``"comment"``; ``depth`` is the parenthesis depth
    at that token. An unterminated string or comment runs to the end of the text.
    """
    i, n, depth = 0, len(sql), 0
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
        elif c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            yield "comment", sql[i:j], depth
            i = j
        elif c == "/" and sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            yield "comment", sql[i:j], depth
            i = j
        elif c in "'\"`[":
            close = "]" if c == "[" else c
            j = i + 1
            while j < n:
                if sql[j] == close:
                    if close != "]" and j + 1 < n and sql[j + 1] == close:  # doubled quote escapes itself
                        j += 2
                        continue
                    break
                j += 1
            yield "string", sql[i : j + 1], depth
            i = j + 1
        elif c.isalnum() or c == "_":
            j = i
            while j < n and (sql[j].isalnum() or sql[j] in "_$"):
                j += 1
            yield "word", sql[i:j], depth
            i = j
        else:
            if c == ")":
                depth = max(0, depth - 1)
            yield "punct", c, depth
            if c == "(":
                depth += 1
            i += 1


def split_statements(sql: str) -> list[str]:
    """``sql`` split at top-level semicolons (outside strings and comments); empty statements dropped."""
    parts: list[str] = []
    start = 0
    # Re-scan positions: tokens() does not report offsets, so find semicolons with the same rules here.
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j
        elif c == "/" and sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c in "'\"`[":
            close = "]" if c == "[" else c
            j = i + 1
            while j < n:
                if sql[j] == close:
                    if close != "]" and j + 1 < n and sql[j + 1] == close:
                        j += 2
                        continue
                    break
                j += 1
            i = j + 1
        elif c == ";":
            parts.append(sql[start:i])
            start = i + 1
            i += 1
        else:
            i += 1
    parts.append(sql[start:])
    return [p.strip() for p in parts if _has_code(p)]


def _has_code(sql: str) -> bool:
    return any(kind != "comment" for kind, _, _ in tokens(sql))


def first_keyword(sql: str) -> str:
    """The first word of ``sql`` outside comments and opening parentheses, upper-cased (``""`` if none)."""
    for kind, text, _ in tokens(sql):
        if kind == "comment" or text == "(":
            continue
        return text.upper() if kind == "word" else text
    return ""


def has_top_level_order_by(sql: str) -> bool:
    """True when ``sql`` has an ``ORDER BY`` outside any parenthesised subquery, string or comment.

    This decides whether row order matters. Spider's evaluation instead tests ``'order by' in
    sql.lower()``, which also fires on an ``ORDER BY ... LIMIT 1`` inside a subquery; see docs/sql.md.
    """
    prev = ""
    for kind, text, depth in tokens(sql):
        if kind == "comment":
            continue
        word = text.upper() if kind == "word" else ""
        if depth == 0 and prev == "ORDER" and word == "BY":
            return True
        prev = word if depth == 0 else ""
    return False
