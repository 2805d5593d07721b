"""The dashboard web app: Starlette routes, server-rendered Jinja2 pages, one vendored chart library.

Lifecycle (Starlette lifespan): start an :class:`AdminClient`, a pull consumer (group
``TOOLS_CONSUMER``, for message search; it commits nothing) and a producer (test messages,
dead-letter resends), then a sampler task that records the last hour of TPS and lag every
``sample_interval_s``; stop them in reverse on shutdown.

Pages and what they call are in ``data.py`` (cluster, topics, groups) and ``messages.py``
(search, detail, trace, sends); the dead-letter pages in ``dlq_pages.py``, the broker, producer,
ACL and name-server pages in ``ops_pages.py``; the clients and settings in ``state.py``; request
parameters are checked in ``params.py`` (400 and 404 pages, never a traceback); CSRF checks and
security headers in ``security.py``. Forms POST and redirect (no client-side state); the only
script (``static/app.js``) draws the charts. With ``auth`` set every request needs HTTP basic
credentials (rocketmq-dashboard's ``loginRequired``); with ACL credentials for the brokers
(``access_key``/``secret_key``) the command line insists on it, since whoever reaches the pages
acts with those credentials.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import math
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from markupsafe import Markup, escape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from orbitmq.client.dead_letters import DeadLetters
from orbitmq.dashboard.data import TOPIC_KINDS, describe_error, topic_kind
from orbitmq.dashboard.dlq_pages import dlq_routes
from orbitmq.dashboard.messages import PAGE_MAX, format_ms
from orbitmq.dashboard.ops_pages import ops_routes
from orbitmq.dashboard.pages import Pages
from orbitmq.dashboard.params import (
    BadRequest,
    NotFound,
    group_name,
    int_param,
    parse_time_ms,
    time_input,
    topic_name,
)
from orbitmq.dashboard.security import CSRF_FIELD, RateLimitedLog, SecurityMiddleware
from orbitmq.dashboard.state import DashboardConfig, DashboardState
from orbitmq.errors import OrbitError, SubscriptionGroupNotExistError, TopicNotExistError
from orbitmq.protocol.names import shorten

__all__ = ["DashboardConfig", "create_app"]

logger = logging.getLogger(__name__)

_HERE = Path(__file__).parent
TOPICS_PER_PAGE = 200
GROUPS_PER_PAGE = 50


def create_app(config: DashboardConfig) -> Starlette:
    """The ASGI app of one dashboard (serve it with uvicorn)."""
    templates = Jinja2Templates(directory=str(_HERE / "templates"))
    templates.env.globals.update(format_ms=format_ms, quote=quote, kinds=TOPIC_KINDS)
    templates.env.filters["urlencode_params"] = _with_params
    templates.env.globals["csrf_input"] = _csrf_input
    state = DashboardState(config)
    failures = RateLimitedLog(logger)
    pages = Pages(templates)
    page, back = pages.page, pages.back

    async def cluster(request: Request) -> Response:
        brokers = await state.data.brokers()
        return page(request, "cluster.html", brokers=brokers, sample_error=state.sample_error)

    async def history(request: Request) -> Response:
        return JSONResponse(state.history.series())

    async def topics(request: Request) -> Response:
        kind = request.query_params.get("kind", "")
        search = request.query_params.get("q", "").strip()
        rows = await state.data.topics()
        counts = {name: sum(1 for row in rows if row.kind == name) for name in TOPIC_KINDS}
        shown = [row for row in rows if (not kind or row.kind == kind) and search.lower() in row.name.lower()]
        number, pages, shown = _paginate(request, shown, TOPICS_PER_PAGE)
        return page(
            request, "topics.html", rows=shown, counts=counts, kind=kind, q=search, total=len(rows),
            page_number=number, pages=pages,
        )  # fmt: skip

    async def topic_save(request: Request) -> Response:
        form = await request.form()
        name = str(form.get("topic", "")).strip()
        try:
            queues = int(str(form.get("queues", "8")))
            perm = int(str(form.get("perm", "6")))
            await state.admin.create_topic(name, queues, perm=perm, order=form.get("order") == "on")
        except (OrbitError, ValueError) as exc:
            return back("/topics", problem=f"Topic {name} was not saved: {describe_error(exc)}")
        return back(f"/topics/{quote(name, safe='')}", notice=f"Topic {name} saved with {queues} queues.")

    async def topic_detail(request: Request) -> Response:
        topic = topic_name(request.path_params["topic"])
        try:
            route = await state.admin.topic_route(topic)
        except TopicNotExistError:
            raise NotFound(
                "No such topic", f"Topic {topic} does not exist: the name server has no route for it."
            ) from None
        status, consumers = await asyncio.gather(
            state.data.topic_status(topic), state.data.consumers_of(topic)
        )
        return page(
            request, "topic.html", topic=topic, kind=topic_kind(topic), route=route, status=sorted(status.items()),
            consumers=consumers, total=sum(s.max_offset - s.min_offset for s in status.values()),
        )  # fmt: skip

    async def topic_delete(request: Request) -> Response:
        topic = request.path_params["topic"]
        form = await request.form()
        if form.get("confirm") != "on":
            return back(f"/topics/{quote(topic, safe='')}", problem="Tick the box to confirm the deletion.")
        try:
            await state.admin.delete_topic(topic)
        except OrbitError as exc:
            return back(f"/topics/{quote(topic, safe='')}", problem=describe_error(exc))
        return back("/topics", notice=f"Topic {topic} deleted.")

    async def topic_send(request: Request) -> Response:
        topic = request.path_params["topic"]
        form = await request.form()
        try:
            msg_id = await state.search.send_test(
                topic, str(form.get("body", "")), str(form.get("tags", "")), str(form.get("keys", ""))
            )
        except OrbitError as exc:
            return back(f"/topics/{quote(topic, safe='')}", problem=f"Send failed: {describe_error(exc)}")
        return back(f"/topics/{quote(topic, safe='')}", notice=f"Sent message {msg_id}.")

    async def groups(request: Request) -> Response:
        search = request.query_params.get("q", "").strip()
        system = request.query_params.get("system") == "on"
        rows = [row for row in await state.data.groups(system) if search.lower() in row.name.lower()]
        number, pages, shown = _paginate(request, rows, GROUPS_PER_PAGE)
        await state.data.fill_group_rows(shown)
        return page(
            request, "groups.html", rows=shown, q=search, total=len(rows), page_number=number, pages=pages,
            system=system,
        )  # fmt: skip

    async def group_detail(request: Request) -> Response:
        group = group_name(request.path_params["group"])
        lags, members = await state.data.group_detail(group)
        if not lags and not any(members.values()) and not await state.admin.broker_knows_group(group):
            raise NotFound(
                "No such consumer group",
                f"Consumer group {group} does not exist: no broker has its subscription config, "
                "an offset committed by it or an online member of it.",
            )
        dead = await DeadLetters(state.admin).page(group, page_size=1)
        clients = await state.data.clients(group)
        now_ms = int(time.time() * 1000)
        return page(
            request,
            "group.html",
            group=group,
            lags=lags,
            members=members,
            now_input=time_input(now_ms - 3_600_000),
            dlq_total=dead.total,
            clients=clients,
        )

    async def group_reset(request: Request) -> Response:
        group = request.path_params["group"]
        form = await request.form()
        topic = str(form.get("topic", ""))
        skip = form.get("skip") == "on"
        try:
            timestamp_ms = int(time.time() * 1000) if skip else parse_time_ms(str(form.get("time", "")), 0)
            offsets = await state.data.reset_offsets(group, topic, timestamp_ms)
        except (OrbitError, ValueError) as exc:
            return back(f"/groups/{quote(group, safe='')}", problem=f"Reset failed: {describe_error(exc)}")
        what = "skipped to the newest message" if skip else f"reset to {format_ms(timestamp_ms)}"
        moved = ", ".join(
            f"q{mq.queue_id}@{mq.broker_name}→{offset}" for mq, offset in sorted(offsets.items())
        )
        return back(
            f"/groups/{quote(group, safe='')}",
            notice=f"{group} on {topic} {what}: {moved}.",
        )

    async def messages(request: Request) -> Response:
        params = request.query_params
        mode = params.get("mode", "time")
        topic = params.get("topic", "").strip()
        if topic:
            topic_name(topic)
        now_ms = int(time.time() * 1000)
        begin_ms = parse_time_ms(params.get("begin"), now_ms - 3_600_000, "begin")
        end_ms = parse_time_ms(params.get("end"), now_ms + 60_000, "end")
        number = int_param(params.get("page"), 1, "page")
        if mode not in ("time", "key", "id"):
            raise BadRequest(f"mode {mode[:20]!r} is not time, key or id")
        if mode == "time" and topic.startswith("%DLQ%"):
            query = urlencode({"begin": begin_ms, "end": end_ms})
            return RedirectResponse(f"/dlq/{quote(topic[5:], safe='')}?{query}", status_code=303)
        result = None
        if (mode == "id" and params.get("id", "").strip()) or (mode != "id" and topic):
            if mode == "key":
                result = await state.search.by_key(topic, params.get("key", "").strip())
            elif mode == "id":
                result = await state.search.by_id(topic, params.get("id", ""))
            else:
                result = await state.search.by_time(topic, begin_ms, end_ms, number)
        return page(
            request, "messages.html", mode=mode, topic=topic, key=params.get("key", ""), msg_id=params.get("id", ""),
            begin=time_input(begin_ms), end=time_input(end_ms), result=result, page_max=PAGE_MAX,
            begin_ms=begin_ms, end_ms=end_ms,
        )  # fmt: skip

    async def message_detail(request: Request) -> Response:
        topic, msg_id = topic_name(request.path_params["topic"]), request.path_params["msg_id"]
        detail = await state.search.detail(topic, msg_id)
        if detail is None:
            raise NotFound("No such message", f"No message {msg_id} in topic {topic}.")
        return page(request, "message.html", topic=topic, detail=detail, m=detail.message)

    error_page = pages.error

    async def on_error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, TopicNotExistError | SubscriptionGroupNotExistError):
            return error_page(request, 404, "Not found", exc.remark or str(exc))
        failures.note(f"{request.method} {shorten(request.url.path, 200)} failed: {shorten(exc, 300)}")
        return error_page(
            request, 502, "The cluster did not answer", describe_error(exc),
            "Check that the name server address given to orbitmq dashboard --namesrv is reachable "
            "and that its brokers are running.",
        )  # fmt: skip

    async def on_bad_request(request: Request, exc: Exception) -> Response:
        return error_page(request, 400, "Bad request", str(exc))

    async def on_not_found(request: Request, exc: Exception) -> Response:
        title = exc.title if isinstance(exc, NotFound) else "Not found"
        return error_page(request, 404, title, str(exc))

    async def on_http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        if status == 404:
            return error_page(
                request, 404, "Not found", f"The dashboard has no page {request.url.path[:200]}."
            )
        return PlainTextResponse(str(getattr(exc, "detail", "")) or "error", status_code=status)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await state.start()
        sampler = asyncio.create_task(state.sample_forever(), name="dashboard-sampler")
        try:
            yield
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
            await state.stop()

    routes = [
        Route("/", cluster),
        Route("/api/history", history),
        Route("/topics", topics),
        Route("/topics", topic_save, methods=["POST"]),
        Route("/topics/{topic}", topic_detail),
        Route("/topics/{topic}/delete", topic_delete, methods=["POST"]),
        Route("/topics/{topic}/send", topic_send, methods=["POST"]),
        Route("/groups", groups),
        Route("/groups/{group}", group_detail),
        Route("/groups/{group}/reset", group_reset, methods=["POST"]),
        Route("/messages", messages),
        Route("/messages/{topic}/{msg_id}", message_detail),
        *dlq_routes(state, pages),
        *ops_routes(state, pages),
        Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
    ]
    middleware = [Middleware(SecurityMiddleware)]
    if config.auth:
        middleware.append(Middleware(BaseHTTPMiddleware, dispatch=_basic_auth(config.auth)))
    handlers: dict[Any, Any] = {
        OrbitError: on_error,
        BadRequest: on_bad_request,
        NotFound: on_not_found,
        HTTPException: on_http_error,
    }
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan, exception_handlers=handlers)


def _csrf_input(request: Request) -> Markup:
    """The hidden field every POST form carries (see :mod:`orbitmq.dashboard.security`)."""
    token = getattr(request.state, "csrf_token", "")
    return Markup(f'<input type="hidden" name="{CSRF_FIELD}" value="{escape(token)}">')


def _with_params(params: Any, **changes: object) -> str:
    """A query string: ``params`` (a request's) with ``changes`` applied."""
    merged = {key: str(value) for key, value in dict(params).items()}
    merged.update({key: str(value) for key, value in changes.items()})
    return urlencode(merged)


def _paginate(request: Request, rows: list[Any], per_page: int) -> tuple[int, int, list[Any]]:
    pages = max(1, math.ceil(len(rows) / per_page))
    try:
        number = min(max(int(request.query_params.get("page", "1")), 1), pages)
    except ValueError:
        number = 1
    return number, pages, rows[(number - 1) * per_page : number * per_page]


def _basic_auth(
    credentials: str | None,
) -> Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]:
    expected = f"Basic {base64.b64encode((credentials or '').encode()).decode()}"

    async def dispatch(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        given = request.headers.get("authorization", "")
        try:
            valid = secrets.compare_digest(given.encode(), expected.encode())
        except (TypeError, binascii.Error):
            valid = False
        if not valid:
            return PlainTextResponse(
                "login required",
                status_code=401,
                headers={"WWW-Authenticate": 'Basic realm="OrbitMQ dashboard"'},
            )
        return await call_next(request)

    return dispatch
