"""`rewardlab view`: look at the samples behind the numbers, in the browser."""

from __future__ import annotations

import argparse
import sys
import threading
import webbrowser

from rewardlab.cli.listen import listening_socket


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "view",
        help="Browse scored files, eval runs and RL runs in a local web page.",
        description=(
            "Serve a local web page for PATH: a scored file (rewardlab score), an eval run folder, an RL run "
            "folder, or a folder holding several. Tables page, filter and sort on the server; filters live "
            "in the URL. Reload to see new steps of a run in progress. Nothing is ever written to PATH."
        ),
    )
    parser.add_argument(
        "path", metavar="PATH", help="scored JSONL file, eval or RL run folder, or a folder of them"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (keep 127.0.0.1 unless you mean it)"
    )
    parser.add_argument("--port", type=int, default=0, help="port (0: a free one, printed)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    # lazy: pulls in fastapi
    from rewardlab.view.app import create_app

    app = create_app(args.path)
    sock, url = listening_socket(args.host, args.port)
    url += "/"
    count = len(app.state.viewer.sources)
    print(f"rewardlab view: {count} source{'' if count == 1 else 's'} under {args.path} at {url}", flush=True)
    print("  (Ctrl-C stops)", file=sys.stderr, flush=True)
    if not args.no_browser:
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    server.run(sockets=[sock])
    return 0
