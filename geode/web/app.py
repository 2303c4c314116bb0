"""The Starlette app: the pages (Jinja2) and the JSON API under ``/api/`` that the pages use.

Reads are GET, changes are POST (``geode.services.loopback_guard.Guard`` refuses anything else, and
checks the token, the Host and the CSRF token first). The only changes are the queue's own:
approve, reject, undo (one, or many by filter after a preview) and refresh (file a proposal
again over the files as they are now), plus ``doctor``, which runs the agents and writes a
probe row. docs/WEB.md documents every route and shape.

Why one write lock per server: ``geode.queue.apply.queue_lock`` is an ``flock`` made
re-entrant per *process*, so two threads of this server approving at once would both pass it;
decisions are serialised here before they reach it.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from geode.recall.results import SHOWN_FLOOR
from geode.services.loopback_guard import Guard, csrf_token_for
from geode.services.request_bounds import RequestBounds
from geode.web import diffview, humane, queue_decide, queue_detail
from geode.web import health as H
from geode.web import queue as WQ
from geode.web.render import note_href
from geode.web.store import Store, StoreError

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("geode")
    except PackageNotFoundError:  # a checkout that was never installed
        return "dev"


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, default=str)


class JSON(JSONResponse):
    def render(self, content) -> bytes:
        return _dumps(content).encode("utf-8")


class Web:
    """What the routes share: settings, the records engine, the store, who decides."""

    def __init__(self, settings, who: str, token: str, bound: str, port: int):
        from geode.agents import contract
        from geode.queue import apply as A
        from geode.queue import proposals as Q

        self.settings = settings
        self.who = who
        self.token = token
        self.bound = bound
        self.port = port
        self.csrf = csrf_token_for(token)
        self.engine = Q.open_queue(settings)
        contract.ensure_tables(self.engine)
        self.reconciled = A.reconcile(settings, self.engine, who)  # settle a crash's leftovers first
        self.store = Store(settings, self.engine)
        self.write_lock = threading.Lock()
        self.version = _version()


def _page_url(path: str, params: dict, **over) -> str:
    p = {k: v for k, v in dict(params, **over).items() if v not in (None, "", [])}
    return path + ("?" + urlencode(p, doseq=True) if p else "")


def create_app(settings, *, token: str, bound: str, port: int, who: str) -> RequestBounds:
    """The app for one server start (the token and port are this start's)."""
    import jinja2

    w = Web(settings, who, token, bound, port)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["tojson_attr"] = _dumps
    env.filters["when"] = humane.when
    env.filters["detail_table"] = humane.detail_table
    env.globals.update(
        split_rows=diffview.split_rows,
        note_href=note_href,
        page_url=_page_url,
        shown_floor=SHOWN_FLOOR,
        version=w.version,
        who=w.who,
        csrf=w.csrf,
        domains=list(settings.domains),
    )
    templates = Jinja2Templates(env=env)

    def page(request: Request, name: str, ctx: dict, status: int = 200) -> Response:
        return templates.TemplateResponse(request, name, dict(ctx, nav=name.split(".")[0]), status_code=status)

    def error_page(request: Request, exc: Exception, status: int) -> Response:
        return page(request, "error.html", {"message": str(exc), "status": status}, status)

    def error_json(exc: Exception, status: int, extra: dict | None = None) -> Response:
        return JSON(dict({"error": str(exc)}, **(extra or {})), status_code=status)

    async def body_of(request: Request) -> dict:
        raw = await request.body()
        if not raw:
            return {}
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise WQ.QueueError(f"the request body is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise WQ.QueueError("the request body must be a JSON object")
        return data

    def _int(v, name: str, default: int) -> int:
        if v in (None, ""):
            return default
        try:
            return int(v)
        except (TypeError, ValueError):
            raise WQ.QueueError(f"{name} must be a whole number, got {v!r}") from None

    # -- pages ---------------------------------------------------------------------------------
    async def home(request: Request):
        return RedirectResponse("/queue", 303)

    async def queue_page(request: Request):
        qp = request.query_params
        try:
            flt = WQ.QueueFilter.from_params(qp)
            page_no = _int(qp.get("page"), "page", 1)
            data = await run_in_threadpool(WQ.page_of, w.engine, flt, page_no)
            menus = await run_in_threadpool(WQ.choices, w.engine)
        except WQ.QueueError as exc:
            return error_page(request, exc, exc.status)
        return page(
            request,
            "queue.html",
            {"data": data, "menus": menus, "flt": flt.as_params(), "kinds": WQ.Q.KINDS, "statuses": WQ.Q.STATUSES},
        )

    async def proposal_page(request: Request):
        pid = request.path_params["pid"]
        try:
            p = await run_in_threadpool(queue_detail.detail, w.settings, w.engine, pid)
        except WQ.QueueError as exc:
            return error_page(request, exc, exc.status)
        return page(request, "proposal.html", {"p": p})

    async def history_page(request: Request):
        qp = request.query_params
        try:
            pid = qp.get("proposal")
            data = await run_in_threadpool(
                WQ.history,
                w.engine,
                _int(qp.get("page"), "page", 1),
                WQ.PER_PAGE,
                _int(pid, "proposal", 0) or None,
                qp.get("who") or None,
            )
        except WQ.QueueError as exc:
            return error_page(request, exc, exc.status)
        return page(request, "history.html", {"data": data, "params": dict(qp)})

    async def store_page(request: Request):
        qp = request.query_params
        searching = any(
            qp.get(k) for k in ("q", "domain", "type", "status", "tag", "where", "filter", "after", "as_of")
        )
        try:
            res = await run_in_threadpool(w.store.search, qp) if searching else None
            facets = res["facets"] if res else await run_in_threadpool(w.store.facets, {})
            recent = await run_in_threadpool(w.store.recent, qp.get("period") or "week", None, 15)
        except StoreError as exc:
            return error_page(request, exc, exc.status)
        params = {
            k: qp.getlist(k) if k in ("tag", "where", "domain", "type", "status") else v
            for k, v in qp.items()
            if k != "page"
        }
        return page(
            request,
            "store.html",
            {"res": res, "facets": facets, "recent": recent, "params": params, "q": qp.get("q") or ""},
        )

    async def note_page(request: Request):
        a = request.query_params.get("a") or ""
        try:
            n = await run_in_threadpool(w.store.note, a)
        except StoreError as exc:
            return error_page(request, exc, exc.status)
        return page(request, "note.html", {"n": n})

    async def health_page(request: Request):
        data = await run_in_threadpool(H.nights, w.engine, 7, w.settings.upkeep.visibility_timeout)
        return page(request, "health.html", {"nights": data})

    # -- API: the queue --------------------------------------------------------------------------
    async def api_proposals(request: Request):
        qp = request.query_params
        try:
            flt = WQ.QueueFilter.from_params(qp)
            data = await run_in_threadpool(
                WQ.page_of,
                w.engine,
                flt,
                _int(qp.get("page"), "page", 1),
                _int(qp.get("per_page"), "per_page", WQ.PER_PAGE),
            )
        except WQ.QueueError as exc:
            return error_json(exc, exc.status)
        return JSON(data)

    async def api_proposal(request: Request):
        try:
            return JSON(await run_in_threadpool(queue_detail.detail, w.settings, w.engine, request.path_params["pid"]))
        except WQ.QueueError as exc:
            return error_json(exc, exc.status)

    def _decide(pid: int, action: str, reason: str) -> dict:
        with w.write_lock:
            if action == "refresh":
                return queue_decide.refresh(w.settings, w.engine, pid, w.who)
            return queue_decide.decide(w.settings, w.engine, pid, action, w.who, reason)

    async def api_decide(request: Request):
        action = request.path_params["action"]
        if action not in ("approve", "reject", "undo", "refresh"):
            return error_json(ValueError(f"no action {action!r}"), 404)
        try:
            body = await body_of(request)
            r = await run_in_threadpool(_decide, request.path_params["pid"], action, str(body.get("reason") or ""))
        except WQ.QueueError as exc:
            return error_json(exc, exc.status, exc.extra)
        return JSON(r, status_code=200 if r.get("ok") else 409)

    async def api_bulk_preview(request: Request):
        qp = request.query_params
        try:
            flt = WQ.QueueFilter.from_params(qp)
            if flt.empty():
                raise WQ.QueueError(
                    "a bulk action needs at least one filter (agent, kind, domain, status, path or night)"
                )
            data = await run_in_threadpool(queue_decide.bulk_preview, w.settings, w.engine, qp.get("action") or "", flt)
        except WQ.QueueError as exc:
            return error_json(exc, exc.status)
        return JSON(data)

    def _bulk(action: str, flt, ids, reason: str) -> dict:
        with w.write_lock:
            return queue_decide.bulk_decide(w.settings, w.engine, action, flt, ids, w.who, reason)

    async def api_bulk(request: Request):
        try:
            body = await body_of(request)
            filt = body.get("filter") or {}
            if not isinstance(filt, dict):
                raise WQ.QueueError("filter must be an object")
            flt = WQ.QueueFilter.from_params(filt)
            r = await run_in_threadpool(
                _bulk, str(body.get("action") or ""), flt, body.get("ids"), str(body.get("reason") or "")
            )
        except WQ.QueueError as exc:
            return error_json(exc, exc.status, exc.extra)
        return JSON(r)

    async def api_actions(request: Request):
        qp = request.query_params
        try:
            data = await run_in_threadpool(
                WQ.history,
                w.engine,
                _int(qp.get("page"), "page", 1),
                _int(qp.get("per_page"), "per_page", WQ.PER_PAGE),
                _int(qp.get("proposal"), "proposal", 0) or None,
                qp.get("who") or None,
            )
        except WQ.QueueError as exc:
            return error_json(exc, exc.status)
        return JSON(data)

    # -- API: the store ---------------------------------------------------------------------------
    async def api_search(request: Request):
        try:
            return JSON(await run_in_threadpool(w.store.search, request.query_params))
        except StoreError as exc:
            return error_json(exc, exc.status)

    async def api_note(request: Request):
        try:
            n = await run_in_threadpool(w.store.note, request.path_params["address"])
        except StoreError as exc:
            return error_json(exc, exc.status)
        return JSON(n)

    async def api_context(request: Request):
        qp = request.query_params
        try:
            depth = _int(qp.get("depth"), "depth", 2)
            mx = _int(qp.get("max_related"), "max_related", 10)
            return JSON(await run_in_threadpool(w.store.context, request.path_params["address"], depth, mx))
        except (StoreError, WQ.QueueError) as exc:
            return error_json(exc, exc.status)

    async def api_recent(request: Request):
        qp = request.query_params
        try:
            limit = max(1, min(_int(qp.get("limit"), "limit", 50), 1000))
            return JSON(
                await run_in_threadpool(w.store.recent, qp.get("period") or "week", qp.get("domain") or None, limit)
            )
        except (StoreError, WQ.QueueError) as exc:
            return error_json(exc, exc.status)

    # -- API: health -----------------------------------------------------------------------------
    async def api_status(request: Request):
        counts = await run_in_threadpool(w.store.counts)
        queue = await run_in_threadpool(WQ.counts_by_status, w.engine)
        return JSON(
            {
                "version": w.version,
                "who": w.who,
                "home": w.settings.home,
                "domains": w.settings.domains,
                "default_domain": w.settings.default_domain,
                "bound": {"host": w.bound, "port": w.port},
                "notes": counts,
                "proposals": queue,
                "reconciled_at_start": w.reconciled,
            }
        )

    async def api_nights(request: Request):
        try:
            limit = max(1, min(_int(request.query_params.get("limit"), "limit", 7), 100))
        except WQ.QueueError as exc:
            return error_json(exc, exc.status)
        return JSON(
            {"nights": await run_in_threadpool(H.nights, w.engine, limit, w.settings.upkeep.visibility_timeout)}
        )

    async def api_stats(request: Request):
        from geode.evidence.stats import render_stats

        d = await run_in_threadpool(H.stats, w.settings, w.engine)
        return JSON({**d, "text": render_stats(d)})

    async def api_study(request: Request):
        from geode.evidence.study import render_study

        d = await run_in_threadpool(H.study, w.settings, w.engine)
        return JSON({**d, "text": render_study(d)})

    def _doctor(skip_model: bool) -> dict:
        with w.write_lock:
            return H.doctor(w.settings, skip_model)

    async def api_doctor(request: Request):
        try:
            body = await body_of(request)
        except WQ.QueueError as exc:
            return error_json(exc, exc.status)
        return JSON(await run_in_threadpool(_doctor, bool(body.get("skip_model", True))))

    routes = [
        Route("/", home),
        Route("/queue", queue_page),
        Route("/proposals/{pid:int}", proposal_page),
        Route("/history", history_page),
        Route("/store", store_page),
        Route("/note", note_page),
        Route("/health", health_page),
        Route("/api/status", api_status),
        Route("/api/proposals", api_proposals),
        Route("/api/proposals/{pid:int}", api_proposal),
        Route("/api/proposals/{pid:int}/{action}", api_decide, methods=["POST"]),
        Route("/api/bulk", api_bulk_preview, methods=["GET"]),
        Route("/api/bulk", api_bulk, methods=["POST"]),
        Route("/api/actions", api_actions),
        Route("/api/search", api_search),
        Route("/api/notes/{address:path}", api_note),
        Route("/api/context/{address:path}", api_context),
        Route("/api/recent", api_recent),
        Route("/api/nights", api_nights),
        Route("/api/stats", api_stats),
        Route("/api/study", api_study),
        Route("/api/doctor", api_doctor, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=str(STATIC)), name="static"),
    ]
    app = Starlette(routes=routes)
    app.state.web = w
    # outermost: an oversized path, parameter or body is refused before the guard or a route reads it
    return RequestBounds(Guard(app, token, bound, port))
