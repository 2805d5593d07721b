"""The NameServer: brokers register their topics here and clients look up routes.

``route_table`` holds the state (pure, no I/O), ``handlers`` answers requests over it, ``app``
wires both to a remoting server, and ``python -m orbitmq.namesrv`` runs it.
"""

from orbitmq.namesrv.app import NamesrvApp
from orbitmq.namesrv.config import NamesrvConfig, load_namesrv_config
from orbitmq.namesrv.handlers import NamesrvHandlers
from orbitmq.namesrv.route_table import BrokerLiveInfo, RegisterResult, RouteTable

__all__ = [
    "BrokerLiveInfo",
    "NamesrvApp",
    "NamesrvConfig",
    "NamesrvHandlers",
    "RegisterResult",
    "RouteTable",
    "load_namesrv_config",
]
