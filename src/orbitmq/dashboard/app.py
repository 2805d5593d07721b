"""The dashboard web app: Starlette routes, server-rendered Jinja2 pages, one vendored chart library.

Lifecycle (Starlette lifespan): start an :class:`AdminClient`, a pull consumer (group
``TOOLS_CONSUMER``, for message search; it commits nothing) and a producer (test messages,
dead-letter resends), then a sampler task that records the last hour of TPS and lag every
``sample_interval_s``; stop them in reverse on shutdown.

Pages and what they call are in ``data.py`` (cluster, topics, groups) and ``messages.py``
(search, detail, trace, sends). Forms POST and redirect (no client-side state); the only
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
import datetime
import logging
import math
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
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

from orbitmq.client import Producer, PullConsumer
from orbitmq.client.acl_admin import AclAdminClient
from orbitmq.client.admin import TOOLS_CONSUMER_GROUP, AdminClient
from orbitmq.client.dead_letters import DeadLetters, export_csv, export_json, message_row
from orbitmq.dashboard.data import TOPIC_KINDS, ClusterData, describe_error, topic_kind
from orbitmq.dashboard.history import History, Point
from orbitmq.dashboard.messages import PAGE_MAX, TRACE_TOPIC_DEFAULT, MessageSearch, format_ms
from orbitmq.dashboard.security import CSRF_FIELD, RateLimitedLog, SecurityMiddleware
from orbitmq.errors import OrbitError, SubscriptionGroupNotExistError, TopicNotExistError
from orbitmq.protocol.acl_commands import AclConfigBody
from orbitmq.protocol.names import group_name_problem, shorten, topic_name_problem

__all__ = ["DashboardConfig", "create_app"]

logger = logging.getLogger(__name__)

_HERE = Path(__file__).parent
TOPICS_PER_PAGE = 200
GROUPS_PER_PAGE = 50


@dataclass(frozen=True, slots=True)
class DashboardConfig:
    """Settings of one dashboard."""

    # Name servers, "host:port;host:port".
    namesrv_addr: str
    # Seconds between two samples of the TPS and lag charts.
    sample_interval_s: float = 10.0
    # "user:password" asked for every page (HTTP basic); None = no login.
    auth: str | None = None
    # Topic the message page reads traces from.
    trace_topic: str = TRACE_TOPIC_DEFAULT
    # ACL credentials the dashboard's clients sign requests with (brokers with aclEnable=true).
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)


class _State:
    def __init__(self, config: DashboardConfig) -> None:
        self.config = config
        keys: dict[str, Any] = (
            {"access_key": config.access_key, "secret_key": config.secret_key} if config.access_key else {}
        )
        stamp = time.time_ns()
        self.admin = AdminClient(config.namesrv_addr, instance_name=f"dashboard-{stamp}", **keys)
        self.pull = PullConsumer(
            TOOLS_CONSUMER_GROUP, config.namesrv_addr, instance_name=f"dashboard-pull-{stamp}", **keys
        )
        self.producer = Producer(
            "DASHBOARD_PRODUCER", config.namesrv_addr, instance_name=f"dashboard-send-{stamp}", **keys
        )
        self.data = ClusterData(self.admin)
        self.search = MessageSearch(self.admin, self.pull, self.producer, config.trace_topic)
        self.history = History()
        self.sample_error = ""

    async def sample_forever(self) -> None:
        while True:
            try:
                brokers = await self.data.brokers()
                lag = await self.data.total_lag()
                self.history.add(
                    Point(
                        int(time.time() * 1000),
                        sum(row.produce_tps for row in brokers if row.broker_id == 0),
                        sum(row.consume_tps for row in brokers),
                        lag,
                    )
                )
                self.sample_error = ""
            except OrbitError as exc:
                if not self.sample_error:
                    logger.warning("chart sample failed: %s", exc)
                self.sample_error = describe_error(exc)
            await asyncio.sleep(self.config.sample_interval_s)


class BadRequest(Exception):
    """A request the dashboard cannot answer as asked: a 400 page saying what was wrong."""


class NotFound(Exception):
    """A topic, group or message that does not exist: a 404 page saying so."""

    def __init__(self, title: str, text: str) -> None:
        super().__init__(text)
        self.title = title


def _parse_time_ms(text: str | None, default_ms: int, name: str = "time") -> int:
    """``YYYY-MM-DDTHH:MM[:SS]`` in UTC (an HTML datetime-local value), or epoch ms.

    Raises:
        BadRequest: neither.
    """
    if not text:
        return default_ms
    if text.isdigit() and len(text) <= 16:
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.UTC)
        return int(moment.timestamp() * 1000)
    except (ValueError, OverflowError, OSError):
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise BadRequest(
            f"{name} {shown!r} is not a time: give YYYY-MM-DDTHH:MM (UTC) or epoch milliseconds"
        ) from None


def _topic_name(name: str) -> str:
    """``name`` when it is a legal topic name (RocketMQ's rule).

    Raises:
        BadRequest: it is not; the cluster is not asked.
    """
    problem = topic_name_problem(name)
    if problem is not None:
        raise BadRequest(problem)
    return name


def _group_name(name: str) -> str:
    """``name`` when it is a legal consumer group name (or a ``%DLQ%`` topic's).

    Raises:
        BadRequest: it is not.
    """
    problem = group_name_problem(name.removeprefix("%DLQ%"))
    if problem is not None:
        raise BadRequest(problem)
    return name


def _int_param(text: str | None, default: int, name: str) -> int:
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise BadRequest(f"{name} {text[:40]!r} is not a whole number") from None


def _time_input(timestamp_ms: int) -> str:
    return datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M")


def create_app(config: DashboardConfig) -> Starlette:
    """The ASGI app of one dashboard (serve it with uvicorn)."""
    templates = Jinja2Templates(directory=str(_HERE / "templates"))
    templates.env.globals.update(format_ms=format_ms, quote=quote, kinds=TOPIC_KINDS)
    templates.env.filters["urlencode_params"] = _with_params
    templates.env.globals["csrf_input"] = _csrf_input
    state = _State(config)
    failures = RateLimitedLog(logger)

    def page(request: Request, name: str, **context: Any) -> Response:
        context.setdefault("notice", request.query_params.get("notice", ""))
        context.setdefault("problem", request.query_params.get("problem", ""))
        return templates.TemplateResponse(request, name, context)

    def back(url: str, **params: str) -> RedirectResponse:
        query = urlencode({key: value for key, value in params.items() if value})
        return RedirectResponse(f"{url}?{query}" if query else url, status_code=303)

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
        topic = _topic_name(request.path_params["topic"])
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
        group = _group_name(request.path_params["group"])
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
            now_input=_time_input(now_ms - 3_600_000),
            dlq_total=dead.total,
            clients=clients,
        )

    async def group_reset(request: Request) -> Response:
        group = request.path_params["group"]
        form = await request.form()
        topic = str(form.get("topic", ""))
        skip = form.get("skip") == "on"
        try:
            timestamp_ms = int(time.time() * 1000) if skip else _parse_time_ms(str(form.get("time", "")), 0)
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
            _topic_name(topic)
        now_ms = int(time.time() * 1000)
        begin_ms = _parse_time_ms(params.get("begin"), now_ms - 3_600_000, "begin")
        end_ms = _parse_time_ms(params.get("end"), now_ms + 60_000, "end")
        number = _int_param(params.get("page"), 1, "page")
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
            begin=_time_input(begin_ms), end=_time_input(end_ms), result=result, page_max=PAGE_MAX,
            begin_ms=begin_ms, end_ms=end_ms,
        )  # fmt: skip

    async def message_detail(request: Request) -> Response:
        topic, msg_id = _topic_name(request.path_params["topic"]), request.path_params["msg_id"]
        detail = await state.search.detail(topic, msg_id)
        if detail is None:
            raise NotFound("No such message", f"No message {msg_id} in topic {topic}.")
        return page(request, "message.html", topic=topic, detail=detail, m=detail.message)

    async def broker_detail(request: Request) -> Response:
        addr = request.path_params["addr"]
        members = {member.address: member for member in await state.admin.cluster_members()}
        member = members.get(addr)
        if member is None:
            raise NotFound(
                "No such broker", f"No broker registered with the name server listens on {addr[:100]}."
            )
        runtime, config = await asyncio.gather(
            state.admin.broker_runtime_info(addr), state.admin.broker_config(addr)
        )
        return page(
            request,
            "broker.html",
            member=member,
            runtime=sorted(runtime.items()),
            config=sorted(config.items()),
        )

    async def acl(request: Request) -> Response:
        acl_admin = AclAdminClient(state.admin)
        brokers: list[tuple[str, AclConfigBody | None, str]] = []
        for addr in await acl_admin.brokers():
            try:
                config = (await acl_admin.list_config(broker_addr=addr))[addr]
            except OrbitError as exc:
                brokers.append((addr, None, describe_error(exc)))
            else:
                brokers.append((addr, config, ""))
        return page(request, "acl.html", brokers=brokers)

    async def producers(request: Request) -> Response:
        group = request.query_params.get("group", "").strip()
        topic = request.query_params.get("topic", "").strip()
        connections = None
        if group:
            _group_name(group)
            if topic:
                _topic_name(topic)
            try:
                connections = await state.admin.producer_connection(group, topic or None)
            except OrbitError as exc:
                return page(
                    request,
                    "producers.html",
                    group=group,
                    topic=topic,
                    connections=[],
                    problem=describe_error(exc),
                )
        return page(request, "producers.html", group=group, topic=topic, connections=connections)

    async def dlq(request: Request) -> Response:
        rows = [row for row in await state.data.topics() if row.kind == "dlq"]
        return page(request, "dlq.html", rows=rows)

    def dlq_range(params: Any) -> tuple[int, int]:
        now_ms = int(time.time() * 1000)
        return (
            _parse_time_ms(params.get("begin"), 0, "begin"),
            _parse_time_ms(params.get("end"), now_ms + 60_000, "end"),
        )

    async def dlq_group(request: Request) -> Response:
        group = _group_name(request.path_params["group"])
        params = request.query_params
        begin_ms, end_ms = dlq_range(params)
        number = _int_param(params.get("page"), 1, "page")
        size = _int_param(params.get("size"), PAGE_MAX, "size")
        result = await DeadLetters(state.admin).page(
            group, begin_ms=begin_ms, end_ms=end_ms, page=number, page_size=size
        )
        return page(
            request, "dlq_group.html", group=group, page=result, begin=_time_input(begin_ms) if begin_ms else "",
            end=_time_input(end_ms), begin_ms=begin_ms, end_ms=end_ms,
            export_query=urlencode({"begin": begin_ms, "end": end_ms}),
        )  # fmt: skip

    async def dlq_export(request: Request) -> Response:
        group = _group_name(request.path_params["group"])
        begin_ms, end_ms = dlq_range(request.query_params)
        kind = request.query_params.get("format", "json")
        if kind not in ("json", "csv"):
            raise BadRequest(f"format {kind[:20]!r} is not json or csv")
        dead = DeadLetters(state.admin)
        try:
            rows = [
                message_row(m)
                async for batch in dead.every(group, begin_ms=begin_ms, end_ms=end_ms)
                for m in batch
            ]
        except TopicNotExistError:
            rows = []
        name = f"dlq-{group}.{kind}".replace('"', "")
        headers = {"Content-Disposition": f'attachment; filename="{quote(name)}"'}
        if kind == "csv":
            return Response(export_csv(rows), media_type="text/csv; charset=utf-8", headers=headers)
        return Response(export_json(rows), media_type="application/json", headers=headers)

    async def dlq_group_resend(request: Request) -> Response:
        group = request.path_params["group"]
        form = await request.form()
        target = f"/dlq/{quote(group, safe='')}"
        dead = DeadLetters(state.admin)
        try:
            if form.get("which") == "all":
                begin_ms, end_ms = dlq_range(form)
                chosen = [
                    m async for batch in dead.every(group, begin_ms=begin_ms, end_ms=end_ms) for m in batch
                ]
            else:
                chosen = []
                for msg_id in form.getlist("msg_id"):
                    found = await dead.find(group, str(msg_id))
                    if found is None:
                        return back(target, problem=f"No dead letter {msg_id} in %DLQ%{group}.")
                    chosen.append(found)
            if not chosen:
                return back(target, problem="Tick the dead letters to resend, or resend all.")
            done = []
            for message in chosen:
                if form.get("to") == "direct":
                    client_id, answer = await dead.consume_directly(group, message)
                    done.append(f"{message.msg_id}: {answer.consume_result} on {client_id}")
                else:
                    done.append(f"{message.msg_id} as {await dead.resend(state.producer, message)}")
        except (OrbitError, LookupError, BadRequest) as exc:
            return back(target, problem=f"Resend failed: {describe_error(exc)}")
        shown = "; ".join(done[:5]) + (f"; and {len(done) - 5} more" if len(done) > 5 else "")
        return back(target, notice=f"Resent {len(done)} dead letters: {shown}.")

    async def dlq_resend(request: Request) -> Response:
        form = await request.form()
        topic, msg_id = str(form.get("topic", "")), str(form.get("msg_id", ""))
        target = f"/messages/{quote(topic, safe='')}/{quote(msg_id, safe='')}"
        try:
            new_id = await state.search.resend_dead_letter(topic, msg_id)
        except (OrbitError, LookupError) as exc:
            return back(target, problem=f"Resend failed: {describe_error(exc)}")
        return back(target, notice=f"Resent to its original topic as message {new_id}.")

    def error_page(request: Request, status: int, title: str, text: str, hint: str = "") -> Response:
        context = {"title": title, "text": text, "hint": hint, "notice": "", "problem": ""}
        return templates.TemplateResponse(request, "error.html", context, status_code=status)

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
        await state.admin.start()
        await state.pull.start()
        await state.producer.start()
        sampler = asyncio.create_task(state.sample_forever(), name="dashboard-sampler")
        try:
            yield
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
            await state.producer.shutdown()
            await state.pull.shutdown()
            await state.admin.close()

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
        Route("/brokers/{addr}", broker_detail),
        Route("/producers", producers),
        Route("/acl", acl),
        Route("/dlq", dlq),
        Route("/dlq/resend", dlq_resend, methods=["POST"]),
        Route("/dlq/{group}", dlq_group),
        Route("/dlq/{group}/export", dlq_export),
        Route("/dlq/{group}/resend", dlq_group_resend, methods=["POST"]),
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
