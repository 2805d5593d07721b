"""Run server apps until a signal: the lifecycle shared by every OrbitMQ command.

An app is anything with ``async startup()`` and ``async shutdown()``. :func:`run_apps` starts
the apps in order, serves until SIGINT or SIGTERM, then shuts them down in reverse order (the
standalone command runs a name server, then a broker that registers with it). A second SIGINT
while shutting down exits at once, as after a crash; the store recovers from that on its
next start.

The event loop is uvloop's when it is importable, else asyncio's own.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from orbitmq.errors import ConfigError, ListenError, StoreLockedError

__all__ = ["App", "new_event_loop", "run_app", "run_apps", "serve", "serve_apps"]

logger = logging.getLogger(__name__)

_FORCED_EXIT_CODE = 130
_CONFIG_ERROR_CODE = 2


class App(Protocol):
    """A server with a start and a stop."""

    async def startup(self) -> None: ...

    async def shutdown(self) -> None: ...


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A uvloop event loop when uvloop is installed, else a default asyncio loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def run_app(app: App, port_flags: Mapping[int, str] | None = None) -> int:
    """Run one app until SIGINT/SIGTERM; returns the process exit code."""
    return run_apps([app], port_flags)


def run_apps(apps: Sequence[App], port_flags: Mapping[int, str] | None = None) -> int:
    """Start ``apps`` in order, serve until a signal, shut them down in reverse; exit code.

    A start refused for an everyday reason (a port in use, a store directory another process
    holds or that cannot be created, a bad accounts file or certificate) is one logged line,
    no traceback. ``port_flags`` names the command-line flag that chose each port, so a port in
    use is reported against the flag that moves it rather than a config key.
    """
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        try:
            runner.run(serve_apps(apps))
        except KeyboardInterrupt:
            return _FORCED_EXIT_CODE
        except ListenError as exc:
            flag = (port_flags or {}).get(exc.port)
            if flag is None:
                logger.error("cannot start: %s", exc)
            else:
                logger.error(
                    "cannot start: cannot listen on %s:%d: %s (pass %s to choose another port)",
                    exc.host,
                    exc.port,
                    exc.reason,
                    flag,
                )
            return _CONFIG_ERROR_CODE
        except (ConfigError, StoreLockedError) as exc:
            # A bad accounts file or certificate: the operator needs the reason, not a traceback.
            logger.error("cannot start: %s", exc)
            return _CONFIG_ERROR_CODE
        except OSError as exc:
            # A directory that cannot be made or written, an address not of this host: the
            # system's own words name the file or the address.
            logger.error("cannot start: %s", exc)
            return 1
        except Exception:
            # Anything else is a fault of the server: the traceback is for its developers.
            logger.exception("server failed")
            return 1
    return 0


async def serve(app: App, stop: asyncio.Event | None = None, *, handle_signals: bool = True) -> None:
    """Start ``app``, wait for a signal or ``stop``, shut it down."""
    await serve_apps([app], stop, handle_signals=handle_signals)


async def serve_apps(
    apps: Sequence[App], stop: asyncio.Event | None = None, *, handle_signals: bool = True
) -> None:
    """Start ``apps`` in order, wait for a signal or ``stop``, shut them down in reverse.

    If one app fails to start, the ones already started are shut down and the error re-raised.
    """
    stop_event = stop if stop is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    installed = _install_signal_handlers(loop, stop_event) if handle_signals else []
    started: list[App] = []
    try:
        for app in apps:
            await app.startup()
            started.append(app)
        await stop_event.wait()
    finally:
        await _shutdown_all(reversed(started))
        for signum in installed:
            loop.remove_signal_handler(signum)


async def _shutdown_all(apps: Iterable[App]) -> None:
    for app in apps:
        try:
            await app.shutdown()
        except Exception:
            # Keep going: the apps started before this one still need their shutdown.
            logger.exception("shutdown of %s failed", type(app).__name__)


def _install_signal_handlers(loop: asyncio.AbstractEventLoop, stop_event: asyncio.Event) -> list[int]:
    def on_signal(signum: int) -> None:
        if stop_event.is_set():
            logger.warning("second %s: exiting without a clean shutdown", signal.Signals(signum).name)
            os._exit(_FORCED_EXIT_CODE)
        logger.info("%s received: shutting down", signal.Signals(signum).name)
        stop_event.set()

    installed: list[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, _bind(on_signal, signum))
        except (NotImplementedError, RuntimeError):
            # Not the main thread, or a platform without loop signal support: rely on `stop`.
            continue
        installed.append(signum)
    return installed


def _bind(callback: Callable[[int], None], signum: int) -> Callable[[], None]:
    return lambda: callback(signum)
