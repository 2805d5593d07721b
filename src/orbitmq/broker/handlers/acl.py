"""The ACL admin requests (50-54): manage accounts online, as ``mqadmin updateAclConfig`` does.

The access check has already run (these are admin codes), so a handler only applies the edit
through the broker's :class:`~orbitmq.security.AclService`. With ``aclEnable=false`` there is
nothing to manage and each request fails with its ``*_FAILED`` code and a remark saying so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import orjson

from orbitmq.acl.accounts import AccountUpdate
from orbitmq.broker.handlers import BrokerState
from orbitmq.errors import ConfigError, RemoteProtocolError
from orbitmq.protocol.acl_commands import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
    encode_acl_config,
    split_list,
)
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.security import AclService
from orbitmq.transport.server import Handler, RequestContext

__all__ = ["AclHandlers"]

logger = logging.getLogger(__name__)

_DISABLED = "ACL is not enabled on this broker (aclEnable=false)"


class AclHandlers:
    """UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG, GET_BROKER_CLUSTER_ACL_INFO,
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG and GET_BROKER_CLUSTER_ACL_CONFIG."""

    def handler_table(self) -> dict[int, Handler]:
        """The ACL admin codes (50-54), served whether or not ACL is on (off: each one fails)."""
        return {
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: self.update_and_create_acl_config,
            RequestCode.DELETE_ACL_CONFIG: self.delete_acl_config,
            RequestCode.GET_BROKER_CLUSTER_ACL_INFO: self.get_broker_cluster_acl_info,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: self.update_global_white_addrs_config,
            RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: self.get_broker_cluster_acl_config,
        }

    def __init__(self, state: BrokerState, acl: AclService | None, broker_addr: Callable[[], str]) -> None:
        self._state = state
        self._acl = acl
        self._broker_addr = broker_addr

    async def update_and_create_acl_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_AND_CREATE_ACL_CONFIG (50): create an account or update the fields sent."""
        failed = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        if self._acl is None:
            return request.response(failed, _DISABLED)
        try:
            header = CreateAccessConfigRequestHeader.from_ext(request.ext_fields)
            update = AccountUpdate(
                access_key=header.access_key,
                secret_key=header.secret_key or "",
                white_remote_address=header.white_remote_address,
                admin=header.admin,
                default_topic_perm=header.default_topic_perm,
                default_group_perm=header.default_group_perm,
                topic_perms=split_list(header.topic_perms),
                group_perms=split_list(header.group_perms),
            )
            await self._acl.update_account(update)
        except (RemoteProtocolError, ConfigError) as exc:
            return request.response(failed, str(exc))
        logger.info("account %s created or updated by %s", header.access_key, ctx.peer_address)
        return request.response(ResponseCode.SUCCESS)

    async def delete_acl_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """DELETE_ACL_CONFIG (51): remove an account from the file that defines it."""
        failed = ResponseCode.DELETE_ACL_CONFIG_FAILED
        if self._acl is None:
            return request.response(failed, _DISABLED)
        try:
            header = DeleteAccessConfigRequestHeader.from_ext(request.ext_fields)
            deleted = await self._acl.delete_account(header.access_key)
        except (RemoteProtocolError, ConfigError) as exc:
            return request.response(failed, str(exc))
        if not deleted:
            return request.response(failed, f"no accounts file defines accessKey {header.access_key!r}")
        logger.info("account %s deleted by %s", header.access_key, ctx.peer_address)
        return request.response(ResponseCode.SUCCESS)

    async def update_global_white_addrs_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): replace one file's global white list."""
        failed = ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
        if self._acl is None:
            return request.response(failed, _DISABLED)
        try:
            header = UpdateGlobalWhiteAddrsConfigRequestHeader.from_ext(request.ext_fields)
            patterns = split_list(header.global_white_addrs) or ()
            await self._acl.update_global_white(patterns, header.acl_file_full_path or None)
        except (RemoteProtocolError, ConfigError) as exc:
            return request.response(failed, str(exc))
        logger.info("global white list set to %s by %s", list(patterns), ctx.peer_address)
        return request.response(ResponseCode.SUCCESS)

    async def get_broker_cluster_acl_info(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_BROKER_CLUSTER_ACL_INFO (52): the files' data versions and this broker's identity."""
        if self._acl is None:
            return request.response(ResponseCode.SYSTEM_ERROR, _DISABLED)
        main, every = self._acl.data_versions()
        all_versions = orjson.dumps(
            {
                path: {"counter": v.counter, "stateVersion": 0, "timestamp": v.timestamp}
                for path, v in every.items()
            }
        ).decode()
        header = GetBrokerAclConfigResponseHeader(
            version=main.to_json(),
            broker_name=self._state.config.broker_name,
            broker_addr=self._broker_addr(),
            cluster_name=self._state.config.broker_cluster_name,
            all_acl_file_version=all_versions,
        )
        return request.response(ResponseCode.SUCCESS, None, header.to_ext())

    async def get_broker_cluster_acl_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_BROKER_CLUSTER_ACL_CONFIG (54): accounts and white lists, never the secrets."""
        if self._acl is None:
            return request.response(ResponseCode.SYSTEM_ERROR, _DISABLED)
        return request.response(ResponseCode.SUCCESS, None, None, encode_acl_config(self._acl.config_view()))
