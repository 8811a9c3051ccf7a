"""The viewer's web app (FastAPI): HTML pages from Jinja2 templates, JSON for the tables and curves.

Pages: ``/`` lists the sources; ``/s/N`` is source N (a table of scored rows, an eval run, an RL run);
``/s/N/row/I`` is one row. Every filter of a table page lives in its URL's query string (``?error=timeout``,
``?reward_max=0``), so a view is a link. The JSON API under ``/api/s/N/`` pages, filters and sorts on the
server (``rows.RowIndex``): the browser never holds a whole file; ``/api/s/N/criteria`` is the rubric summary
of rows carrying criteria (``criteria.py``). Nothing here writes to disk.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from rewardlab import __version__
from rewardlab.view.data import SourceData
from rewardlab.view.rows import Query
from rewardlab.view.sources import Source, discover

HERE = Path(__file__).parent
_KIND_LABEL = {"scored": "scored file", "eval": "eval run", "rl": "RL run"}


def _float(value: str | None) -> float | None:
    if value in (None, ""):
        return None
    try:
        return float(value)
    except ValueError:
        raise HTTPException(400, f"not a number: {value!r}") from None


def query_of(params: dict[str, str]) -> Query:
    """A table ``Query`` from a URL's query string (the names the pages put there)."""
    equals = {name: params[key] for key, name in (("problem", "id"), ("step", "step")) if params.get(key)}
    return Query(
        reward_min=_float(params.get("reward_min")),
        reward_max=_float(params.get("reward_max")),
        error=params.get("error") or None,
        verifier=params.get("verifier") or None,
        q=params.get("q") or None,
        equals=equals,
        sort=params.get("sort") or None,
        desc=params.get("dir") == "desc",
    )


class Viewer:
    """The sources under one path, each with its lazily indexed data."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.sources: list[Source] = discover(path)
        self.data = [SourceData(s) for s in self.sources]

    def get(self, sid: int) -> SourceData:
        if not 0 <= sid < len(self.data):
            raise HTTPException(404, f"no source {sid}: this viewer has {len(self.data)}")
        return self.data[sid]


def create_app(path: str | Path) -> FastAPI:
    """The app serving everything under ``path`` (raises FileNotFoundError when it does not exist)."""
    viewer = Viewer(path)
    if len(viewer.data) == 1:  # index while the server starts and the page loads
        threading.Thread(target=viewer.data[0].index, name="rewardlab-view-open", daemon=True).start()
    app = FastAPI(title="rewardlab view", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.viewer = viewer
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    templates = Jinja2Templates(directory=HERE / "templates")
    templates.env.filters["tojson_pretty"] = lambda v: json.dumps(
        v, indent=2, ensure_ascii=False, default=str
    )

    def page(request: Request, name: str, **context: Any) -> HTMLResponse:
        context.update(viewer=viewer, version=__version__, kind_label=_KIND_LABEL)
        return templates.TemplateResponse(request, name, context)

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request):
        if len(viewer.sources) == 1:  # the query string is the view's filter: a shared link keeps it
            query = request.url.query
            return RedirectResponse(f"/s/0?{query}" if query else "/s/0")
        return page(request, "index.html")

    @app.get("/s/{sid}", response_class=HTMLResponse)
    def source_page(request: Request, sid: int):
        data = viewer.get(sid)
        template = {"scored": "table.html", "eval": "eval.html", "rl": "rl.html"}[data.source.kind]
        return page(request, template, sid=sid, data=data, source=data.source)

    @app.get("/s/{sid}/row/{row}", response_class=HTMLResponse)
    def row_page(request: Request, sid: int, row: int):
        data = viewer.get(sid)
        view = data.row_view(row)
        if view is None:
            raise HTTPException(404, f"no row {row} in {data.source.name}")
        return page(request, "row.html", sid=sid, data=data, source=data.source, r=view)

    @app.get("/api/s/{sid}/rows")
    def rows(request: Request, sid: int, page: int = 1, size: int = 50):
        return _json(viewer.get(sid).page(query_of(dict(request.query_params)), max(page, 1), size))

    @app.get("/api/s/{sid}/facets")
    def facets(sid: int):
        return _json(viewer.get(sid).facets())

    @app.get("/api/s/{sid}/criteria")
    def criteria(sid: int):
        return _json(viewer.get(sid).criteria())

    @app.get("/api/s/{sid}/problems")
    def problems(sid: int):
        data = viewer.get(sid)
        return _json({"data": data.problems(), "summary": data.summary()})

    @app.get("/api/s/{sid}/metrics")
    def metrics(sid: int):
        return _json(viewer.get(sid).metrics())

    @app.get("/api/s/{sid}/steps")
    def steps(sid: int):
        return _json({"steps": viewer.get(sid).steps()})

    @app.get("/api/s/{sid}/samples")
    def samples(sid: int, step: int, sort: str | None = None):
        slowest_first = sort == "reward_time_s"
        return _json(
            {"step": step, "samples": viewer.get(sid).step_samples(step, slowest_first=slowest_first)}
        )

    return app


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _json(content: Any) -> JSONResponse:
    """JSON with NaN and infinities as null (a missing value): browsers' JSON.parse rejects them."""
    return JSONResponse(_clean(content))
