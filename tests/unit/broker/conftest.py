from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from orbitmq.transport.connection import RemotingClient


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    remoting = RemotingClient()
    try:
        yield remoting
    finally:
        await remoting.close()
