"""The name server's admin requests beyond routes and KV config: write permission and config.

=============================  ==================================================================
request                        answer
=============================  ==================================================================
WIPE_WRITE_PERM_OF_BROKER 205  takes write off every queue data of ``brokerName`` (the broker
                               stops getting sends while it drains); ``wipeTopicCount``
ADD_WRITE_PERM_OF_BROKER 327   gives it back; ``addTopicCount``
GET_NAMESRV_CONFIG 319         every key of the name server's config as ``key=value`` lines
                               (Java's ``MixAll.properties2String``), current values
UPDATE_NAMESRV_CONFIG 318      the same form; only :data:`LIVE_KEYS` change while the name server
                               runs, in memory (put them in namesrv.conf to keep them); a request
                               naming any other key changes nothing and says which keys need a
                               restart (NO_PERMISSION, as RocketMQ refuses its black-listed keys);
                               an unknown key or a bad value is INVALID_PARAMETER naming it
=============================  ==================================================================

The write-permission changes last, as in RocketMQ, until the broker publishes its topics again
(see :meth:`~orbitmq.namesrv.route_table.RouteTable.set_write_perm`).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import typing
from collections.abc import Callable

from orbitmq.conf import coerce_value, config_keys
from orbitmq.errors import ConfigError
from orbitmq.namesrv.config import NamesrvConfig
from orbitmq.namesrv.route_table import RouteTable
from orbitmq.protocol.admin_headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.server import Handler, RequestContext

__all__ = ["LIVE_KEYS", "NamesrvAdminHandlers", "render_config"]

logger = logging.getLogger(__name__)

LIVE_KEYS = frozenset(
    {"brokerChannelExpiredTime", "scanNotActiveBrokerInterval", "maxTopicsPerBroker", "maxBrokers"}
)
"""namesrv.conf keys whose new value takes effect at once (read per scan or per registration)."""


def render_config(config: NamesrvConfig) -> str:
    """Every key of ``config`` as ``key=value`` lines, sorted; unset optional values left out."""
    lines = []
    for item in dataclasses.fields(config):
        key = item.metadata.get("key")
        value = getattr(config, item.name)
        if key is None or value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, enum.Enum):
            text = str(value.name)
        else:
            text = str(value)
        lines.append(f"{key}={text}\n")
    return "".join(sorted(lines))


def _parse_properties(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, separator, value = line.partition("=")
        if not separator or not key.strip():
            raise ConfigError(f"expected 'key=value', got {line!r}")
        values[key.strip()] = value.strip()
    return values


class NamesrvAdminHandlers:
    """WIPE/ADD_WRITE_PERM_OF_BROKER and GET/UPDATE_NAMESRV_CONFIG (see the module docstring).

    Args:
        route_table: the name server's routes.
        get_config: the config now in force.
        set_config: swaps in a changed config (the app applies it to whatever reads it).
    """

    def __init__(
        self,
        route_table: RouteTable,
        get_config: Callable[[], NamesrvConfig],
        set_config: Callable[[NamesrvConfig], None],
    ) -> None:
        self.route_table = route_table
        self._get_config = get_config
        self._set_config = set_config

    def table(self) -> dict[int, Handler]:
        return {
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            RequestCode.GET_NAMESRV_CONFIG: self.get_config,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_config,
        }

    async def wipe_write_perm(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = WipeWritePermOfBrokerRequestHeader.from_ext(request.ext_fields)
        count = self.route_table.set_write_perm(header.broker_name, writable=False)
        logger.info("write permission of broker %s wiped on %d topics", header.broker_name, count)
        return request.response(
            ResponseCode.SUCCESS, None, WipeWritePermOfBrokerResponseHeader(count).to_ext()
        )

    async def add_write_perm(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = AddWritePermOfBrokerRequestHeader.from_ext(request.ext_fields)
        count = self.route_table.set_write_perm(header.broker_name, writable=True)
        logger.info("write permission of broker %s added on %d topics", header.broker_name, count)
        return request.response(
            ResponseCode.SUCCESS, None, AddWritePermOfBrokerResponseHeader(count).to_ext()
        )

    async def get_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, None, None, render_config(self._get_config()).encode())

    async def update_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        try:
            updates = _parse_properties(bytes(request.body).decode("utf-8"))
            config = self._apply(self._get_config(), updates)
        except UnicodeDecodeError:
            return request.response(ResponseCode.INVALID_PARAMETER, "the body is not UTF-8 key=value lines")
        except PermissionError as exc:
            return request.response(ResponseCode.NO_PERMISSION, str(exc))
        except ConfigError as exc:
            return request.response(ResponseCode.INVALID_PARAMETER, str(exc))
        if updates:
            self._set_config(config)
            logger.info(
                "name server config updated: %s", ", ".join(f"{k}={v}" for k, v in sorted(updates.items()))
            )
        return request.response(ResponseCode.SUCCESS)

    @staticmethod
    def _apply(config: NamesrvConfig, updates: dict[str, str]) -> NamesrvConfig:
        keys = config_keys(NamesrvConfig)
        unknown = sorted(key for key in updates if key not in keys)
        if unknown:
            raise ConfigError(f"unknown name server config keys: {', '.join(unknown)}")
        needs_restart = sorted(key for key in updates if key not in LIVE_KEYS)
        if needs_restart:
            raise PermissionError(
                f"config keys {', '.join(needs_restart)} cannot change while the name server runs; set them "
                f"in namesrv.conf and restart (live keys: {', '.join(sorted(LIVE_KEYS))})"
            )
        hints = typing.get_type_hints(NamesrvConfig)
        changes = {keys[key]: coerce_value(key, value, hints[keys[key]]) for key, value in updates.items()}
        # replace() runs __post_init__: a value the config refuses raises ConfigError naming it.
        return dataclasses.replace(config, **changes)  # type: ignore[arg-type]
