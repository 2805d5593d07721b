"""Debian's Chromium driven by Selenium through Debian's chromedriver: nothing is downloaded.

``.ci/run`` installs the ``chromium`` and ``chromium-driver`` packages; where they are absent
the browser tests skip with :data:`MISSING` as the reason. The flags keep Chromium off the
network (this machine's network is closed: without them Chromium stalls on its background
connections) and give every browser a fresh profile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)


def missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    absent = [path for path in (CHROMIUM, CHROMEDRIVER) if not Path(path).exists()]
    if absent:
        return (
            f"{' and '.join(absent)} not installed: apt-get install -y --no-install-recommends "
            "chromium chromium-driver (.ci/run does)"
        )
    return None


def start_chromium(profile_dir: Path) -> Any:
    """A headless Chromium with browser console logging on; the caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    return driver
