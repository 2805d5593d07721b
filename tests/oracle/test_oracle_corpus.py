"""The remoting corpus covers every request code OrbitMQ's broker and name server serve.

A code added to a server without a scenario would never be compared with Apache's answer; this
test names it. It reads the servers' own handler tables, so it starts nothing.
"""

from __future__ import annotations

from orbitmq.broker.handler_table import build_handler_table
from orbitmq.broker.handlers.acl import AclHandlers
from orbitmq.broker.handlers.client_manage import ClientManageHandlers
from orbitmq.namesrv.admin_handlers import NamesrvAdminHandlers
from orbitmq.namesrv.handlers import NamesrvHandlers
from orbitmq.namesrv.route_table import RouteTable
from orbitmq.protocol.codes import RequestCode
from tests.oracle.scenarios import CODES


def _served_codes() -> set[int]:
    """Every code with a handler (the tables keep bound methods only: nothing is called)."""
    broker = set(build_handler_table(None, ClientManageHandlers(None)))  # type: ignore[arg-type]
    broker |= set(AclHandlers(None, None, str).handler_table())  # type: ignore[arg-type]
    namesrv = set(NamesrvHandlers(RouteTable()).table())
    namesrv |= set(NamesrvAdminHandlers(RouteTable(), lambda: None, lambda config: None).table())  # type: ignore[arg-type, return-value]
    return {int(code) for code in broker | namesrv}


def test_oracle_corpus_covers_every_request_code_served() -> None:
    covered = set().union(*CODES.values())
    missing = sorted(_served_codes() - covered)
    assert not missing, "no oracle scenario sends " + ", ".join(
        f"{RequestCode(code).name} ({code})" for code in missing
    )
