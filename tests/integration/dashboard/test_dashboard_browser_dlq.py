"""Dead letters, error pages and paging in a real browser (Debian's Chromium through chromedriver).

Method as in ``test_dashboard_browser``: a standalone and a dashboard for the module, every step
through the pages' links and forms, the browser console free of errors. With
``ORBITMQ_DASHBOARD_SCREENSHOTS=<dir>`` the pages are saved as PNG files (docs/images/ holds
``dlq.png``, ``error-404.png``, ``error-400.png``, ``messages-paged.png`` and ``broker.png``).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from tests.integration.dashboard.conftest import Dashboard
from tests.integration.dashboard.test_dashboard_browser import (
    SHOTS,
    _by,
    click,
    console_errors,
    open_page,
    text_of,
    wait_for,
    wait_for_notice,
)
from tests.integration.dashboard.test_dashboard_dlq import DEAD, GROUP, _dead_letters, _many

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("dashboard")]


def shot(driver: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / f"{name}.png"))


def current_text(driver: Any, css: str) -> str:
    """The element's text, or "" while the next page is loading."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    try:
        return text_of(driver, css)
    except (NoSuchElementException, StaleElementReferenceException):
        return ""


def test_dashboard_dlq_page_browses_and_resends_in_the_browser(dashboard: Dashboard, chromium: Any) -> None:
    dead = asyncio.run(_dead_letters(dashboard.namesrv_addr))
    open_page(chromium, dashboard, f"/groups/{GROUP}")
    click(chromium, "#group-dlq")
    wait_for(lambda: chromium.find_elements(_by("CSS_SELECTOR"), "#dead-letters"))
    ids = [link.text for link in chromium.find_elements(_by("CSS_SELECTOR"), "#dead-letters a.msg-id")]
    assert sorted(ids) == sorted(dead)
    assert f"{DEAD} in the range" in text_of(chromium, "#dlq-total")
    shot(chromium, "dlq")
    chromium.find_elements(_by("CSS_SELECTOR"), "#dead-letters input.pick")[0].click()
    click(chromium, "#resend-picked")
    wait_for_notice(chromium, "Resent 1 dead letters")
    # Paging: two a page.
    open_page(chromium, dashboard, f"/dlq/{GROUP}?size=2")
    assert "Page 1 of 3" in text_of(chromium, "#dlq-pages")
    seen = [link.text for link in chromium.find_elements(_by("CSS_SELECTOR"), "#dead-letters a.msg-id")]
    for number in (2, 3):
        click(chromium, "#page-next")
        wait_for(lambda n=number: f"Page {n} of 3" in current_text(chromium, "#dlq-pages"))
        seen += [link.text for link in chromium.find_elements(_by("CSS_SELECTOR"), "#dead-letters a.msg-id")]
    assert sorted(seen) == sorted(dead)
    assert not console_errors(chromium)


def test_dashboard_error_pages_in_the_browser(dashboard: Dashboard, chromium: Any) -> None:
    chromium.get(dashboard.url + "/topics/NoSuchTopicHere")
    wait_for(lambda: "No such topic" in chromium.title)
    assert "Topic NoSuchTopicHere does not exist" in text_of(chromium, "#error-text")
    shot(chromium, "error-404")
    chromium.get(dashboard.url + "/groups/CG_NOBODY")
    wait_for(lambda: "No such consumer group" in chromium.title)
    chromium.get(dashboard.url + "/messages?mode=time&topic=TBW102&begin=garbage")
    wait_for(lambda: "Bad request" in chromium.title)
    assert "begin 'garbage' is not a time" in text_of(chromium, "#error-text")
    shot(chromium, "error-400")
    assert "Traceback" not in dashboard.server.log()
    # The browser logs each error page's status as a failed load; nothing else.
    assert all(re.search(r"status of 40[04]", entry) for entry in console_errors(chromium))


def test_dashboard_time_search_pages_in_the_browser(dashboard: Dashboard, chromium: Any) -> None:
    asyncio.run(_many(dashboard.namesrv_addr, 150))
    open_page(chromium, dashboard, "/messages?mode=time&topic=PagedTopic&begin=0")
    assert "150 messages in the range" in text_of(chromium, "#result-count")
    seen: list[str] = []
    for number in (1, 2, 3):
        wait_for(lambda n=number: f"Page {n} of 3" in current_text(chromium, "#message-pages"))
        seen += [link.text for link in chromium.find_elements(_by("CSS_SELECTOR"), "#results tbody a")]
        if number == 2:
            shot(chromium, "messages-paged")
        if number < 3:
            click(chromium, "#page-next")
    assert len(seen) == 150 and len(set(seen)) == 150
    assert all(re.fullmatch(r"[0-9A-F]{32}", msg_id) for msg_id in seen)
    assert not console_errors(chromium)


def test_dashboard_operator_pages_in_the_browser(dashboard: Dashboard, chromium: Any) -> None:
    open_page(chromium, dashboard, "/")
    click(chromium, "a.broker-link")
    wait_for(lambda: chromium.find_elements(_by("CSS_SELECTOR"), "#config"))
    assert "brokerName" in text_of(chromium, "#config")
    shot(chromium, "broker")
    open_page(chromium, dashboard, "/producers?group=DASHBOARD_PRODUCER")
    assert "DASHBOARD_PRODUCER" in chromium.page_source
    open_page(chromium, dashboard, "/acl")
    assert chromium.find_elements(_by("CSS_SELECTOR"), ".acl-off")
    open_page(chromium, dashboard, "/ops")
    assert text_of(chromium, "#current-namesrv") == dashboard.namesrv_addr
    open_page(chromium, dashboard, "/groups")
    click(chromium, "#group-system")
    click(chromium, ".filters button")
    wait_for(lambda: "system=on" in chromium.current_url)
    assert not console_errors(chromium)
