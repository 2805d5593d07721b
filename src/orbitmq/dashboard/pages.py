"""Rendering shared by the dashboard's route modules: a page from its template, a redirect back."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

__all__ = ["Pages"]


class Pages:
    """Pages from ``templates``; forms POST and redirect back with a notice or a problem."""

    def __init__(self, templates: Jinja2Templates) -> None:
        self.templates = templates

    def page(self, request: Request, name: str, **context: Any) -> Response:
        context.setdefault("notice", request.query_params.get("notice", ""))
        context.setdefault("problem", request.query_params.get("problem", ""))
        return self.templates.TemplateResponse(request, name, context)

    def back(self, url: str, **params: str) -> RedirectResponse:
        query = urlencode({key: value for key, value in params.items() if value})
        return RedirectResponse(f"{url}?{query}" if query else url, status_code=303)

    def error(self, request: Request, status: int, title: str, text: str, hint: str = "") -> Response:
        context = {"title": title, "text": text, "hint": hint, "notice": "", "problem": ""}
        return self.templates.TemplateResponse(request, "error.html", context, status_code=status)
