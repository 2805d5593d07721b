"""The gRPC proxy: RocketMQ 5.x's ``apache.rocketmq.v2.MessagingService``, so 5.x SDKs work unchanged.

Where it sits. The proxy speaks the remoting protocol to name servers and brokers through
``orbitmq.client``, exactly as any 4.x client does (``proxy.gateway``); it serves gRPC on
grpc.aio (``proxy.app``, ``proxy.service``). In the import-linter layers it is a sibling of
``orbitmq.spark`` above ``orbitmq.client`` (and so above ``orbitmq.broker``, whose pure POP
pieces it reuses: the auto-renew policy). Nothing below imports it; the two places that run it
are ``orbitmq proxy`` (cluster mode: its own process) and the CLI's ``broker`` and
``standalone`` commands, which run it beside the broker (local mode, ``grpcServerPort``).

The stubs in ``proxy._pb`` are generated from apache/rocketmq-apis' protos (vendored under
``proto/``) and checked in; ``make proto`` regenerates them. Checked in, so installing OrbitMQ
needs neither protoc nor grpcio-tools, and the code that runs is the code that was reviewed.
Ruff and mypy skip ``_pb`` (see pyproject.toml); mypy still types every use of it through the
generated ``.pyi`` files.

grpcio and protobuf are base dependencies: ``orbitmq standalone`` serves gRPC by default, so a
5.x SDK works against a fresh install without extras.
"""

from orbitmq.proxy.app import ProxyApp
from orbitmq.proxy.config import ProxyConfig, load_proxy_config

__all__ = ["ProxyApp", "ProxyConfig", "load_proxy_config"]
