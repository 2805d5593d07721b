"""An in-process BrokerApp on 127.0.0.1 for the broker's service tests (schedule, timer, transactions)."""

from __future__ import annotations

from pathlib import Path

from orbitmq.broker.app import BrokerApp
from orbitmq.broker.config import load_broker_config

BASE_CONF = {
    "listenPort": "0",
    "brokerIP1": "127.0.0.1",
    "bindAddress": "127.0.0.1",
    "mapedFileSizeCommitLog": str(1 << 20),
}


async def start_broker_app(tmp_path: Path, **conf: str) -> BrokerApp:
    """A started broker (no nameserver) whose store lives under ``tmp_path``; ``conf`` adds keys."""
    broker_config, store_config = load_broker_config(
        None, {"storePathRootDir": str(tmp_path / "store"), **BASE_CONF, **conf}
    )
    app = BrokerApp(broker_config, store_config)
    await app.startup()
    return app
