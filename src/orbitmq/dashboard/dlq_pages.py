"""The dashboard's dead-letter pages (rocketmq-dashboard's DLQ page), over
:mod:`orbitmq.client.dead_letters`: the list of DLQ topics, a group's dead letters by time range a
page at a time, JSON and CSV export, resending the ticked ones or all (to the original topic or
to an online consumer), and the message page's one-message resend.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from orbitmq.client.dead_letters import DeadLetters, export_csv, export_json, message_row
from orbitmq.dashboard.data import describe_error
from orbitmq.dashboard.messages import PAGE_MAX
from orbitmq.dashboard.pages import Pages
from orbitmq.dashboard.params import BadRequest, group_name, int_param, parse_time_ms, time_input
from orbitmq.dashboard.state import DashboardState
from orbitmq.errors import OrbitError, TopicNotExistError

__all__ = ["dlq_routes"]


def dlq_routes(state: DashboardState, pages: Pages) -> list[Route]:
    """The routes under ``/dlq``."""

    async def dlq(request: Request) -> Response:
        rows = [row for row in await state.data.topics() if row.kind == "dlq"]
        return pages.page(request, "dlq.html", rows=rows)

    def dlq_range(params: Any) -> tuple[int, int]:
        now_ms = int(time.time() * 1000)
        return (
            parse_time_ms(params.get("begin"), 0, "begin"),
            parse_time_ms(params.get("end"), now_ms + 60_000, "end"),
        )

    async def dlq_group(request: Request) -> Response:
        group = group_name(request.path_params["group"])
        params = request.query_params
        begin_ms, end_ms = dlq_range(params)
        number = int_param(params.get("page"), 1, "page")
        size = int_param(params.get("size"), PAGE_MAX, "size")
        result = await DeadLetters(state.admin).page(
            group, begin_ms=begin_ms, end_ms=end_ms, page=number, page_size=size
        )
        return pages.page(
            request, "dlq_group.html", group=group, page=result, begin=time_input(begin_ms) if begin_ms else "",
            end=time_input(end_ms), begin_ms=begin_ms, end_ms=end_ms,
            export_query=urlencode({"begin": begin_ms, "end": end_ms}),
        )  # fmt: skip

    async def dlq_export(request: Request) -> Response:
        group = group_name(request.path_params["group"])
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
                        return pages.back(target, problem=f"No dead letter {msg_id} in %DLQ%{group}.")
                    chosen.append(found)
            if not chosen:
                return pages.back(target, problem="Tick the dead letters to resend, or resend all.")
            done = []
            for message in chosen:
                if form.get("to") == "direct":
                    client_id, answer = await dead.consume_directly(group, message)
                    done.append(f"{message.msg_id}: {answer.consume_result} on {client_id}")
                else:
                    done.append(f"{message.msg_id} as {await dead.resend(state.producer, message)}")
        except (OrbitError, LookupError, BadRequest) as exc:
            return pages.back(target, problem=f"Resend failed: {describe_error(exc)}")
        shown = "; ".join(done[:5]) + (f"; and {len(done) - 5} more" if len(done) > 5 else "")
        return pages.back(target, notice=f"Resent {len(done)} dead letters: {shown}.")

    async def dlq_resend(request: Request) -> Response:
        form = await request.form()
        topic, msg_id = str(form.get("topic", "")), str(form.get("msg_id", ""))
        target = f"/messages/{quote(topic, safe='')}/{quote(msg_id, safe='')}"
        try:
            new_id = await state.search.resend_dead_letter(topic, msg_id)
        except (OrbitError, LookupError) as exc:
            return pages.back(target, problem=f"Resend failed: {describe_error(exc)}")
        return pages.back(target, notice=f"Resent to its original topic as message {new_id}.")

    return [
        Route("/dlq", dlq),
        Route("/dlq/resend", dlq_resend, methods=["POST"]),
        Route("/dlq/{group}", dlq_group),
        Route("/dlq/{group}/export", dlq_export),
        Route("/dlq/{group}/resend", dlq_group_resend, methods=["POST"]),
    ]
