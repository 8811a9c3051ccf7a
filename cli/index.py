"""`rewardlab index`: build the search index of a corpus ahead of a run (``envs/search.py``)."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "index",
        help="Build the BM25 index the search tool reads.",
        description="Search indexes for the search and open tools of search agents.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser(
        "build",
        help="Index a corpus (id, title, text rows) with BM25.",
        description=(
            "Index CORPUS (JSONL, Parquet, a saved datasets folder or a hub dataset; rows with id, title and "
            "text) with bm25s. The index goes beside the corpus (CORPUS.bm25) unless -o/--output or --cache-dir "
            "says otherwise; the search tool finds it there. CORPUS is only read."
        ),
    )
    build.add_argument("corpus", metavar="CORPUS")
    build.add_argument("-o", "--output", help="index folder (default: CORPUS.bm25, or under --cache-dir)")
    # The flag's first spelling, kept working for existing scripts; every other command says -o/--output.
    build.add_argument("--out", dest="output", help=argparse.SUPPRESS)
    build.add_argument("--cache-dir", help="folder for indexes, named by their corpus")
    build.add_argument(
        "--method",
        default="lucene",
        choices=["lucene", "robertson", "atire", "bm25l", "bm25+"],
        help="BM25 variant",
    )
    build.add_argument("--k1", type=float, default=0.9)
    build.add_argument("--b", type=float, default=0.4)
    build.add_argument(
        "--no-stem", action="store_true", help="index words as they are (no Snowball stemming)"
    )
    build.set_defaults(func=run_build)


def run_build(args: argparse.Namespace) -> int:
    # lazy: start-up: `rewardlab --help` builds every parser, and this command alone needs it
    from rewardlab.envs.search import BM25Params, build_index, read_manifest

    params = BM25Params(method=args.method, k1=args.k1, b=args.b, stemmer=None if args.no_stem else "english")
    path = build_index(args.corpus, args.output, params, cache_dir=args.cache_dir)
    manifest = read_manifest(path)
    print(
        f"rewardlab index: {manifest['documents']} documents indexed in {manifest['seconds']:.2f} s -> {path} "
        f"(BM25 {params.method}, k1={params.k1:g}, b={params.b:g})"
    )
    return 0
