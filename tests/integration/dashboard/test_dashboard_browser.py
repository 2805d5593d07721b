"""The dashboard in a real browser: Debian's Chromium, driven by Selenium, against a live standalone.

Method: one ``orbitmq standalone`` and one ``orbitmq dashboard`` for the module; every page is
opened in headless Chromium and the browser's console must stay free of errors. Then the
operator's everyday flow, through the forms only: create a topic, send a message with a key,
find it by that key, open its detail (properties, body, delivery, and the trace a traced
producer would have written), and skip a group's accumulated messages. Each step is checked
in the page and, where it changes the cluster, with the admin client as well.

With ``ORBITMQ_DASHBOARD_SCREENSHOTS=<dir>`` the main pages are also saved as PNG files
(docs/images/ holds the ones shown in the README).
"""

from __future__ import annotations

import asyncio
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from orbitmq.client import Message, Producer, PullConsumer
from orbitmq.client.admin import AdminClient
from orbitmq.model.message import MessageQueue
from tests.integration.dashboard.conftest import Dashboard, start_dashboard

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("dashboard")]

SHOTS = os.environ.get("ORBITMQ_DASHBOARD_SCREENSHOTS")
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


def _by(kind: str) -> Any:
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


def open_page(driver: Any, dashboard: Dashboard, path: str, shot: str | None = None) -> None:
    driver.get(dashboard.url + path)
    # On a busy machine the title can be read a moment before the browser reports it.
    try:
        wait_for(lambda: "OrbitMQ dashboard" in driver.title, 10)
    except AssertionError:
        raise AssertionError(f"{path}: title {driver.title!r}\n{driver.page_source[:2000]}") from None
    if SHOTS and shot:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / f"{shot}.png"))


def console_errors(driver: Any) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def text_of(driver: Any, css: str) -> str:
    return str(driver.find_element(_by("CSS_SELECTOR"), css).text)


def fill(driver: Any, css: str, value: str) -> None:
    element = driver.find_element(_by("CSS_SELECTOR"), css)
    element.clear()
    element.send_keys(value)


def click(driver: Any, css: str) -> None:
    driver.find_element(_by("CSS_SELECTOR"), css).click()


def wait_for_notice(driver: Any, expected: str) -> str:
    """The ``#notice`` text once it contains ``expected``.

    A form's submit leaves the old page, whose own notice may still be found (and then go
    stale) until the browser has loaded the answer.
    """
    from selenium.common.exceptions import StaleElementReferenceException

    def current() -> str | None:
        try:
            texts = [str(element.text) for element in driver.find_elements(_by("CSS_SELECTOR"), "#notice")]
        except StaleElementReferenceException:
            return None
        return next((text for text in texts if expected in text), None)

    return str(wait_for(current))


def wait_for(predicate: Any, timeout_s: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not true within {timeout_s} s: {predicate}")


def test_dashboard_pages_load_without_console_errors(dashboard: Dashboard, chromium: Any) -> None:
    for path in ("/", "/topics", "/topics?kind=system", "/groups", "/messages", "/dlq", "/topics/TBW102"):
        open_page(chromium, dashboard, path)
        assert not console_errors(chromium), path
    open_page(chromium, dashboard, "/")
    # The charts draw from /api/history once the sampler has points (every second here).
    wait_for(lambda: chromium.execute_script("return document.querySelectorAll('#chart-tps canvas').length"))
    rows = chromium.find_elements(_by("CSS_SELECTOR"), "#brokers tbody tr")
    assert len(rows) == 1 and "broker-a" in rows[0].text and "ASYNC_MASTER" in rows[0].text
    assert not console_errors(chromium)


async def _write_trace(namesrv: str, topic: str, msg_id: str, keys: str) -> None:
    """A producer's Pub trace record as a traced Java client writes it (operations-features §1.5)."""
    now_ms = int(time.time() * 1000)
    fields = ["Pub", str(now_ms), "DefaultRegion", "PG_TRACED", topic, msg_id, "browser", keys,
              "127.0.0.1:10911", "12", "3", "0", "", "true"]  # fmt: skip
    trace = Message(TRACE_TOPIC, ("\x01".join(fields) + "\x02").encode())
    trace.keys = [msg_id, keys]
    async with Producer("PG_TRACE_WRITER", namesrv) as producer:
        await producer.send(trace)


def test_dashboard_creates_topic_sends_and_finds_message_with_trace(
    dashboard: Dashboard, chromium: Any
) -> None:
    open_page(chromium, dashboard, "/topics")
    click(chromium, "#create-topic summary")
    fill(chromium, "#new-topic", "BrowserOrders")
    click(chromium, "#create-topic-submit")
    wait_for(lambda: "/topics/BrowserOrders" in chromium.current_url)
    wait_for_notice(chromium, "Topic BrowserOrders saved")
    assert len(chromium.find_elements(_by("CSS_SELECTOR"), "#status tbody tr")) == 8

    fill(chromium, "#send-keys", "browser-key-1")
    fill(chromium, "#send-tags", "TagB")
    fill(chromium, "#send-body", "hello from a real browser")
    click(chromium, "#send-submit")
    notice = wait_for_notice(chromium, "Sent message ")
    msg_id = notice.removeprefix("Sent message ").rstrip(".")
    assert len(msg_id) == 32, notice
    asyncio.run(_write_trace(dashboard.namesrv_addr, "BrowserOrders", msg_id, "browser-key-1"))

    open_page(chromium, dashboard, "/messages?mode=key", shot=None)
    fill(chromium, "#search-topic", "BrowserOrders")
    fill(chromium, "#search-key", "browser-key-1")
    click(chromium, "#search-submit")
    links = wait_for(lambda: chromium.find_elements(_by("CSS_SELECTOR"), "#results tbody a"))
    assert [link.text for link in links] == [msg_id]
    if SHOTS:
        chromium.save_screenshot(str(Path(SHOTS) / "messages.png"))
    links[0].click()
    wait_for(lambda: chromium.find_elements(_by("CSS_SELECTOR"), "#message-id"))
    assert text_of(chromium, "#message-id") == msg_id
    assert text_of(chromium, "#message-keys") == "browser-key-1"
    assert text_of(chromium, "#message-body") == "hello from a real browser"
    trace_rows = chromium.find_elements(_by("CSS_SELECTOR"), "#trace tbody tr")
    assert len(trace_rows) == 1 and "Pub" in trace_rows[0].text and "PG_TRACED" in trace_rows[0].text
    if SHOTS:
        chromium.execute_script("document.getElementById('deliveries').scrollIntoView()")
        chromium.save_screenshot(str(Path(SHOTS) / "message.png"))
    assert not console_errors(chromium)

    # A key nobody used: the page says why nothing was found.
    open_page(chromium, dashboard, "/messages?mode=key&topic=BrowserOrders&key=nobody-used-this")
    assert "No message of topic BrowserOrders is indexed under key" in text_of(chromium, "#empty-result")
    open_page(chromium, dashboard, "/messages?mode=time&topic=BrowserOrders&begin=0&end=1000")
    assert "No message of topic BrowserOrders was stored between" in text_of(chromium, "#empty-result")
    assert "holds 1 messages" in text_of(chromium, "#empty-result")


async def _lagging(namesrv: str, topic: str, group: str) -> None:
    """``topic`` with 20 messages in 2 queues; ``group`` committed offset 0 on both (lag 20)."""
    async with AdminClient(namesrv) as admin:
        await admin.create_topic(topic, queue_nums=2)
    async with Producer("PG_BROWSER_LAG", namesrv) as producer:
        for index in range(20):
            await producer.send(Message(topic, b"lag %d" % index))
    consumer = PullConsumer(group, namesrv)
    await consumer.start()
    try:
        await consumer.commit_sync({MessageQueue(topic, "broker-a", q): 0 for q in range(2)})
    finally:
        await consumer.shutdown()


async def _committed(namesrv: str) -> dict[int, int | None]:
    async with AdminClient(namesrv) as admin:
        return {
            mq.queue_id: await admin.committed_offset("CG_BROWSER", mq)
            for mq in await admin.fetch_queues("BrowserLag")
        }


def test_dashboard_skips_a_groups_accumulation(dashboard: Dashboard, chromium: Any) -> None:
    asyncio.run(_lagging(dashboard.namesrv_addr, "BrowserLag", "CG_BROWSER"))
    open_page(chromium, dashboard, "/groups", shot="groups")
    row = next(
        r for r in chromium.find_elements(_by("CSS_SELECTOR"), "#groups tbody tr") if "CG_BROWSER" in r.text
    )
    assert row.find_element(_by("CSS_SELECTOR"), ".lag").text == "20"
    row.find_element(_by("LINK_TEXT"), "CG_BROWSER").click()
    wait_for(lambda: chromium.find_elements(_by("CSS_SELECTOR"), "#group-name"))
    assert sum(int(cell.text) for cell in chromium.find_elements(_by("CSS_SELECTOR"), "td.lag")) == 20
    if SHOTS:
        chromium.save_screenshot(str(Path(SHOTS) / "group.png"))
    fill(chromium, "#reset-topic", "BrowserLag")
    click(chromium, "#reset-skip")
    click(chromium, "#reset-submit")
    wait_for_notice(chromium, "skipped to the newest message")
    lags = [int(cell.text) for cell in chromium.find_elements(_by("CSS_SELECTOR"), "td.lag")]
    assert lags == [0, 0]
    committed = asyncio.run(_committed(dashboard.namesrv_addr))
    assert sum(offset or 0 for offset in committed.values()) == 20
    assert not console_errors(chromium)


def test_dashboard_screenshots_of_the_main_pages(dashboard: Dashboard, chromium: Any) -> None:
    """The cluster, topics and topic pages render their tables (and are saved when asked)."""
    asyncio.run(_lagging(dashboard.namesrv_addr, "BrowserShots", "CG_SHOTS"))
    open_page(chromium, dashboard, "/", shot=None)
    wait_for(lambda: chromium.execute_script("return document.querySelectorAll('#chart-lag canvas').length"))
    time.sleep(1.5)  # one more sample, so the charts have a line
    if SHOTS:
        chromium.save_screenshot(str(Path(SHOTS) / "cluster.png"))
    open_page(chromium, dashboard, "/topics", shot="topics")
    assert chromium.find_elements(_by("LINK_TEXT"), "BrowserShots")
    open_page(chromium, dashboard, "/topics/BrowserShots", shot="topic")
    assert "CG_SHOTS" in text_of(chromium, "#consumers")
    assert text_of(chromium, "#consumers .lag") == "20"
    assert not console_errors(chromium)


def test_dashboard_login_is_required_when_auth_is_set(dashboard: Dashboard, tmp_path: Path) -> None:
    server = start_dashboard(tmp_path, dashboard.namesrv_addr, "--auth", "ops:s3cret")
    try:
        url = f"http://127.0.0.1:{server.port}/topics"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10)
        assert refused.value.code == 401
        refused.value.close()
        request = urllib.request.Request(url, headers={"Authorization": "Basic b3BzOnMzY3JldA=="})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200 and b"Topics" in response.read()
    finally:
        server.stop()


def test_dashboard_with_acl_credentials_refuses_to_start_without_a_login(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "orbitmq.dashboard", "--port", "0", "--access-key", "dashboardAK", "--secret-key", "dashboardSK"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert "requires a login: add --auth USER:PASSWORD" in done.stderr
