"""The ``/metrics`` endpoint: prometheus_client's HTTP server over one server's event loop.

A deliberate bend of the layering rule that only ``transport/`` opens sockets: the Prometheus
text format, its content negotiation and its HTTP server belong to prometheus_client, the
library made for the job, and re-implementing an HTTP responder in ``transport/`` would copy
it. The server runs on prometheus_client's own daemon thread and serves nothing but the
exposition.

A scrape runs on the server's event loop, a slice at a time (:class:`SlicedCollector`): the
families are built by steps of a bounded number of rows (``metrics.steps``), and after each few
milliseconds of them the loop serves whatever else waits. The scrape thread only waits, then
writes the bounded text. Building them on the scrape thread instead made every request wait:
that thread and the loop share the GIL, the loop got it back only every switch interval and lost
it again at each of its system calls, so with 50,000 topics a request waited up to a second while
a scrape ran. The name server's few families are one step (:func:`serve_metrics`). Scrapes run
one at a time: a second waits for the first, so concurrent scrapers cannot multiply the memory
a scrape takes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from enum import Enum
from typing import TypeVar
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from orbitmq.errors import ListenError
from orbitmq.metrics.steps import Steps, run_sliced, run_steps

__all__ = [
    "MetricsExporter",
    "MetricsExporterType",
    "SlicedCollector",
    "serve_metrics",
    "serve_metrics_in_steps",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


class MetricsExporterType(Enum):
    """RocketMQ 5.x's ``metricsExporterType``: OrbitMQ serves PROM; OTLP_GRPC and LOG are not offered."""

    DISABLE = "DISABLE"
    PROM = "PROM"


class SlicedCollector(Collector):
    """A collector whose families are built on ``loop`` a slice at a time (module docstring).

    Args:
        loop: the event loop that owns the tables.
        steps: makes the work of one scrape (``metrics.steps``); run on ``loop``.
        timeout_s: the longest a scrape waits for the loop to finish it.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        steps: Callable[[], Steps[list[Metric]]],
        timeout_s: float = 30.0,
    ) -> None:
        self._loop = loop
        self._steps = steps
        self._timeout_s = timeout_s
        self._one_at_a_time = threading.Lock()

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        if self._loop.is_closed():
            return iter(())
        if _running_loop() is self._loop:
            return iter(run_steps(self._steps()))
        with self._one_at_a_time:
            future = asyncio.run_coroutine_threadsafe(run_sliced(self._steps()), self._loop)
            try:
                return iter(future.result(self._timeout_s))
            except concurrent.futures.TimeoutError:
                future.cancel()
                raise


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class MetricsExporter:
    """Serves one collector's families as Prometheus text on ``http://host:port/metrics``.

    Args:
        host: bind address.
        port: TCP port; 0 picks a free one (read :attr:`port` after :meth:`start`).
        collector: the families to serve.
    """

    def __init__(self, host: str, port: int, collector: Collector) -> None:
        self.host = host
        self._requested_port = port
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (the requested one before :meth:`start`)."""
        return self._server.server_port if self._server is not None else self._requested_port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def start(self) -> None:
        """Bind and serve on a daemon thread.

        Raises:
            OSError: the port cannot be bound.
        """
        self._server, self._thread = start_http_server(self._requested_port, self.host, self.registry)
        logger.info("metrics exporter listening on %s", self.url)

    def stop(self) -> None:
        """Stop serving and close the socket."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def serve_metrics(
    host: str,
    port: int,
    capture: Callable[[], _T],
    render: Callable[[_T], Iterable[Metric]],
) -> MetricsExporter:
    """Serve ``render(capture())`` at ``http://host:port/metrics``, each run on the running loop
    in one step (for a few families; many rows want :func:`serve_metrics_in_steps`).

    Raises:
        ListenError: the port cannot be bound (names ``metricsPromExporterPort``).
    """

    def steps() -> Steps[list[Metric]]:
        captured = capture()
        yield None
        return list(render(captured))

    return serve_metrics_in_steps(host, port, steps)


def serve_metrics_in_steps(host: str, port: int, steps: Callable[[], Steps[list[Metric]]]) -> MetricsExporter:
    """Serve the families ``steps()`` builds at ``http://host:port/metrics``, built on the running
    loop a slice at a time (:class:`SlicedCollector`).

    Raises:
        ListenError: the port cannot be bound (names ``metricsPromExporterPort``).
    """
    exporter = MetricsExporter(host, port, SlicedCollector(asyncio.get_running_loop(), steps))
    try:
        exporter.start()
    except OSError as exc:
        raise ListenError.from_os_error("metricsPromExporterPort", host, port, exc) from exc
    return exporter
