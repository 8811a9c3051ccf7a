"""Retrieval for search agents: a BM25 index over a local corpus, and the ``search`` and ``open`` tools.

A corpus is rows with ``id``, ``title`` and ``text`` (a JSONL or Parquet file, a saved ``datasets`` folder
or a hub dataset). :func:`build_index` indexes it once with ``bm25s`` into a folder, by default beside the
corpus (``corpus.jsonl`` -> ``corpus.jsonl.bm25/``) or under a cache folder; every process that searches
memory-maps that folder read-only, so workers share one copy in the page cache.

The BM25 variant is Lucene's (Pyserini's, which Search-R1's BM25 retriever uses): idf
``log(1 + (N - df + 0.5) / (df + 0.5))``, ``k1 = 0.9``, ``b = 0.4`` (Pyserini's defaults). Text is lower-cased,
split on ``\\b\\w\\w+\\b``, English stop words removed and Snowball-stemmed (PyStemmer), for documents and
queries alike. A retriever is a registered class (:data:`RETRIEVERS`), so a dense one can join later.

A query is bounded before it runs: its length in characters, its number of terms (so its time: BM25 costs
one posting list per term). The tools see only the index, never the episode's record, so a gold answer
reaches the model only if the corpus itself holds it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardlab.data.loaders import read_rows
from rewardlab.envs.tools import Call, Tool, ToolResult
from rewardlab.errors import UserError
from rewardlab.extras import require
from rewardlab.registry import Registry

MANIFEST = "rewardlab-index.json"
"""The file in an index folder that says what it indexes and how (its absence: not an index)."""
INDEX_FORMAT = 1


@dataclass
class Passage:
    """One retrieved document."""

    id: str
    title: str
    text: str
    score: float = 0.0


class Retriever:
    """Base class of retrievers: ranked passages for a batch of queries, and a document by id."""

    name = "retriever"

    def terms(self, query: str) -> list[str]:
        """The query as the index's terms (what the term limit counts)."""
        raise NotImplementedError

    def search(self, queries: Sequence[list[str]], k: int) -> list[list[Passage]]:
        """The ``k`` best passages per query (given as :meth:`terms`), best first; passages that match no
        term are left out."""
        raise NotImplementedError

    def get(self, doc_id: str) -> Passage | None:
        raise NotImplementedError


RETRIEVERS: Registry[type[Retriever]] = Registry("retriever")


# ----------------------------------------------------------------------------------------------------------
# the BM25 index
# ----------------------------------------------------------------------------------------------------------
@dataclass
class BM25Params:
    """How a BM25 index scores (``bm25s`` names)."""

    method: str = "lucene"
    """``lucene`` (Pyserini), ``robertson`` (rank-bm25's ``BM25Okapi`` without its idf floor), ``atire``,
    ``bm25l``, ``bm25+``."""
    k1: float = 0.9
    b: float = 0.4
    delta: float = 0.5
    """``bm25l`` and ``bm25+`` only."""
    stemmer: str | None = "english"
    """A Snowball stemmer's language (PyStemmer), or ``None``."""
    stopwords: str | None = "en"


def default_index_dir(corpus: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where the index of ``corpus`` lives: ``<corpus>.bm25`` beside it, or under ``cache_dir`` (named by
    the corpus's resolved path, so two corpora never share one)."""
    path = Path(corpus)
    if cache_dir is None:
        return path.with_name(path.name + ".bm25")
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return Path(cache_dir) / f"{path.name}-{digest}.bm25"


def _stemmer(language: str | None) -> Any:
    if not language:
        return None
    stemmer = require("Stemmer", extra="search", what="the search index's stemmer")
    return stemmer.Stemmer(language)


def _document_text(row: dict[str, Any]) -> str:
    return f"{row['title']}\n{row['text']}" if row["title"] else row["text"]


def read_corpus(corpus: str | os.PathLike) -> list[dict[str, str]]:
    """The corpus's rows as ``{"id", "title", "text"}`` strings (``title`` may be missing: empty); an id
    missing or repeated, or a row without text, is a :class:`UserError` naming the row."""
    try:
        rows = read_rows(str(corpus))
    except (ValueError, OSError) as exc:
        raise UserError(f"cannot read the corpus {corpus}: {exc}") from None
    out, seen = [], set()
    for n, row in enumerate(rows, 1):
        if not isinstance(row.get("text"), str) or row.get("id") in (None, ""):
            raise UserError(f"corpus {corpus}, row {n}: needs an 'id' and a 'text' string")
        doc_id = str(row["id"])
        if doc_id in seen:
            raise UserError(f"corpus {corpus}, row {n}: id {doc_id!r} repeats")
        seen.add(doc_id)
        out.append({"id": doc_id, "title": str(row.get("title") or ""), "text": row["text"]})
    if not out:
        raise UserError(f"corpus {corpus} has no rows")
    return out


def build_index(
    corpus: str | os.PathLike,
    out: str | os.PathLike | None = None,
    params: BM25Params | None = None,
    *,
    cache_dir: str | os.PathLike | None = None,
    replace: bool = True,
) -> Path:
    """Indexes ``corpus`` into ``out`` (default: :func:`default_index_dir`) and returns the folder. The
    folder is written beside and then renamed into place, so a reader never sees half an index. With
    ``replace=False`` an index another process put there meanwhile is kept (and this one dropped): workers
    that all find no index build at once, but none deletes one another may be reading."""
    bm25s = require("bm25s", extra="search", what="building a search index")

    params = params or BM25Params()
    rows = read_corpus(corpus)
    target = Path(out) if out is not None else default_index_dir(corpus, cache_dir)
    started = time.perf_counter()
    tokens = bm25s.tokenize(
        [_document_text(r) for r in rows],
        stopwords=params.stopwords,
        stemmer=_stemmer(params.stemmer),
        show_progress=False,
    )
    model = bm25s.BM25(method=params.method, k1=params.k1, b=params.b, delta=params.delta)
    model.index(tokens, show_progress=False)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    model.save(str(partial), corpus=rows, show_progress=False)
    manifest = {
        "format": INDEX_FORMAT,
        "retriever": "bm25",
        "corpus": str(Path(corpus).resolve()) if Path(corpus).exists() else str(corpus),
        "documents": len(rows),
        "params": vars(params),
        "bm25s": bm25s.__version__,
        "seconds": round(time.perf_counter() - started, 3),
    }
    (partial / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    if replace and target.exists():
        shutil.rmtree(target)
    try:
        partial.rename(target)  # onto a folder that holds files: OSError
    except OSError:
        if replace or not target.is_dir():
            raise
        shutil.rmtree(partial)  # another process's index got there first: it is kept
    return target


def read_manifest(index: str | os.PathLike) -> dict[str, Any]:
    """The index folder's manifest; a missing folder, or one that is not a whole index, is a
    :class:`UserError` in one line."""
    path = Path(index)
    if not path.is_dir():
        raise UserError(f"no search index at {path} (build one: rewardlab index build CORPUS)")
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{path} is not a search index, or a corrupt one ({type(exc).__name__}); rebuild it"
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != INDEX_FORMAT:
        raise UserError(f"{path}: an index of another format; rebuild it (rewardlab index build)")
    return manifest


class BM25Retriever(Retriever):
    """A saved BM25 index, memory-mapped read-only (see the module docstring)."""

    name = "bm25"

    def __init__(self, index: str | os.PathLike) -> None:
        bm25s = require("bm25s", extra="search", what="the search tool's BM25 index")

        self.path = Path(index)
        manifest = read_manifest(self.path)
        self.params = BM25Params(**manifest["params"])
        try:
            self.model = bm25s.BM25.load(str(self.path), mmap=True, load_corpus=True, show_progress=False)
        except Exception as exc:  # a file missing or cut short: the index is unusable, say so in one line
            raise UserError(
                f"{self.path}: corrupt search index ({type(exc).__name__}: {exc}); rebuild it"
            ) from None
        if len(self.model.corpus) != manifest["documents"]:
            raise UserError(f"{self.path}: corrupt search index (its corpus is cut short); rebuild it")
        self._stemmer = _stemmer(self.params.stemmer)
        self._ids: dict[str, int] | None = None
        self._lock = threading.Lock()

    def terms(self, query: str) -> list[str]:
        import bm25s

        return bm25s.tokenize(
            query,
            stopwords=self.params.stopwords,
            stemmer=self._stemmer,
            return_ids=False,
            show_progress=False,
        )[0]

    def search(self, queries: Sequence[list[str]], k: int) -> list[list[Passage]]:
        asked = [q for q in queries if q]
        found: list[list[Passage]] = []
        if asked:
            with self._lock:  # bm25s keeps per-call state on the model
                docs, scores = self.model.retrieve(
                    list(asked), k=min(k, len(self.model.corpus)), show_progress=False, n_threads=1
                )
            found = [
                [self._passage(d, float(s)) for d, s in zip(row_docs, row_scores, strict=True) if s > 0]
                for row_docs, row_scores in zip(docs, scores, strict=True)
            ]
        answers = iter(found)
        return [next(answers) if q else [] for q in queries]

    def get(self, doc_id: str) -> Passage | None:
        if self._ids is None:
            self._ids = {self.model.corpus[i]["id"]: i for i in range(len(self.model.corpus))}
        i = self._ids.get(doc_id)
        return None if i is None else self._passage(self.model.corpus[i], 0.0)

    @staticmethod
    def _passage(row: dict[str, Any], score: float) -> Passage:
        return Passage(str(row["id"]), row.get("title", ""), row["text"], score)


RETRIEVERS.register("bm25", "rewardlab.envs.search:BM25Retriever")

_OPEN: dict[tuple[str, str], Retriever] = {}
_OPEN_LOCK = threading.Lock()


def open_retriever(
    corpus: str | None = None,
    index: str | None = None,
    *,
    retriever: str = "bm25",
    cache_dir: str | None = None,
) -> Retriever:
    """The retriever over ``index`` (or over ``corpus``'s index, built the first time), one per process and
    folder: the ``search`` and ``open`` tools of every environment share it."""
    if index is None and corpus is None:
        raise UserError("the search tools need a corpus or an index (tool_options: {search: {corpus: PATH}})")
    path = Path(index) if index is not None else default_index_dir(corpus, cache_dir)  # type: ignore[arg-type]
    key = (retriever, str(path.resolve()))
    with _OPEN_LOCK:
        if key not in _OPEN:
            if index is None and not path.exists():
                if not Path(corpus).exists():  # type: ignore[arg-type]
                    raise UserError(f"corpus not found: {corpus}")
                build_index(corpus, path, replace=False)  # type: ignore[arg-type]
            _OPEN[key] = RETRIEVERS.get(retriever)(path)
        return _OPEN[key]


# ----------------------------------------------------------------------------------------------------------
# the tools
# ----------------------------------------------------------------------------------------------------------
def format_passages(passages: Sequence[Passage], max_words: int) -> str:
    """Search-R1's observation text (``Doc 1(Title: ...) text``, one per line), cut to ``max_words``
    whitespace-separated words in all (the last passage shown is cut, later ones left out)."""
    lines, left = [], max_words
    for i, p in enumerate(passages, 1):
        if left <= 0:
            break
        words = p.text.split()
        shown = " ".join(words[:left]) + (" ..." if len(words) > left else "")
        left -= len(words)
        lines.append(f"Doc {i}(Title: {p.title}) {shown}")
    return "\n".join(lines)


class CorpusTool(Tool):
    """A tool over a local corpus's retriever, one per process and index (:func:`open_retriever`).

    Args:
        corpus: The corpus (its index found or built beside it, or under ``cache_dir``).
        index: An index folder instead (``rewardlab index build``); missing or corrupt: an error at start.
        cache_dir: Where ``corpus``'s index lives, if not beside it.
        max_words: Most words of passage text per observation, all passages together.
        retriever: A registered retriever (:data:`RETRIEVERS`).
        name: What the model calls it (default: the tool's own name).
    """

    def __init__(
        self,
        *,
        corpus: str | None = None,
        index: str | None = None,
        cache_dir: str | None = None,
        max_words: int = 300,
        retriever: str = "bm25",
        name: str | None = None,
    ) -> None:
        if max_words < 1:
            raise ValueError(f"{self.name}: max_words must be at least 1")
        self.retriever = open_retriever(corpus, index, retriever=retriever, cache_dir=cache_dir)
        self.max_words, self.name = max_words, name or self.name


class SearchTool(CorpusTool):
    """Top-``k`` passages of a local corpus for a query (see the module docstring); options as
    :class:`CorpusTool`'s, and:

    Args:
        k: Passages per query.
        max_query_chars: Longest query run; a longer one is answered ``too_large`` without being read.
        max_query_terms: Most index terms in a query (stop words do not count); more: ``too_large``.
    """

    name = "search"
    primary = "query"
    description = "Searches the knowledge base; returns the best passages for a query."

    def __init__(
        self, *, k: int = 3, max_query_chars: int = 1000, max_query_terms: int = 32, **options: Any
    ) -> None:
        super().__init__(**options)
        if k < 1 or max_query_chars < 1 or max_query_terms < 1:
            raise ValueError("search: k, max_query_chars and max_query_terms must be at least 1")
        self.k, self.max_query_chars, self.max_query_terms = k, max_query_chars, max_query_terms

    def run(self, calls: Sequence[Call], timeout: float) -> list[ToolResult]:
        out: list[ToolResult | None] = [None] * len(calls)
        queries: dict[int, list[str]] = {}
        for i, (_, args) in enumerate(calls):
            checked = self._terms(args.get(self.primary))
            if isinstance(checked, ToolResult):
                out[i] = checked
            else:
                queries[i] = checked
        found = self.retriever.search(list(queries.values()), self.k)
        for i, passages in zip(queries, found, strict=True):
            text = format_passages(passages, self.max_words)
            out[i] = ToolResult(text or "no results")
        return out  # type: ignore[return-value]

    def _terms(self, query: Any) -> list[str] | ToolResult:
        if not isinstance(query, str):
            return ToolResult(f"error: {self.name} needs a string argument '{self.primary}'", "bad_arguments")
        if len(query) > self.max_query_chars:
            return ToolResult(
                f"error: the query is {len(query)} characters long (at most {self.max_query_chars})",
                "too_large",
            )
        terms = self.retriever.terms(query)
        if not terms:
            return ToolResult("error: the query has no searchable words", "empty_query")
        if len(terms) > self.max_query_terms:
            return ToolResult(
                f"error: the query has {len(terms)} search terms (at most {self.max_query_terms})",
                "too_large",
            )
        return terms


class OpenTool(CorpusTool):
    """A whole document of the corpus by its id (the ids ``search`` results do not show: a corpus whose
    passages cite ids, or a model told them); options as :class:`CorpusTool`'s, ``max_words`` cutting the
    document."""

    name = "open"
    primary = "id"
    description = "Returns a document of the knowledge base by its id."

    def run(self, calls: Sequence[Call], timeout: float) -> list[ToolResult]:
        out = []
        for _, args in calls:
            doc_id = args.get(self.primary)
            if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool):
                out.append(
                    ToolResult(
                        f"error: {self.name} needs a string argument '{self.primary}'", "bad_arguments"
                    )
                )
                continue
            passage = self.retriever.get(str(doc_id).strip())
            if passage is None:
                out.append(ToolResult("no document with that id", "not_found"))
            else:
                out.append(ToolResult(format_passages([passage], self.max_words)))
        return out


__all__ = [
    "RETRIEVERS",
    "BM25Params",
    "BM25Retriever",
    "CorpusTool",
    "OpenTool",
    "Passage",
    "Retriever",
    "SearchTool",
    "build_index",
    "default_index_dir",
    "open_retriever",
    "read_corpus",
    "read_manifest",
]
