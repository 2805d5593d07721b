"""asyncio glue between sockets and the sans-IO protocol: server, client and app runner.

This is the only package that opens sockets; handlers above it receive decoded commands
and return commands, and never touch a socket.
"""

from orbitmq.transport.connection import ClientRequestHandler, RemotingClient, split_address
from orbitmq.transport.runner import App, new_event_loop, run_app, run_apps, serve, serve_apps
from orbitmq.transport.server import Handler, RemotingServer, RequestContext, ServerConnection

__all__ = [
    "App",
    "ClientRequestHandler",
    "Handler",
    "RemotingClient",
    "RemotingServer",
    "RequestContext",
    "ServerConnection",
    "new_event_loop",
    "run_app",
    "run_apps",
    "serve",
    "serve_apps",
    "split_address",
]
