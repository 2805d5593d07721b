"""ACL administration through the brokers (codes 50-54), ``AdminClient.acl``.

Each operation goes to one broker (``broker_addr``) or to every broker, masters and slaves, of
a cluster (``cluster``; default every cluster), as ``mqadmin updateAclConfig -b/-c`` does:
each broker keeps its own accounts files. The caller's own credentials must belong to an
``admin: true`` account.

==============================  ==========================================================
operation                       request (``mqadmin`` command)
==============================  ==========================================================
update_account                  UPDATE_AND_CREATE_ACL_CONFIG (updateAclConfig)
delete_account                  DELETE_ACL_CONFIG (deleteAclConfig)
update_global_white_addresses   UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (updateGlobalWhiteAddr)
versions                        GET_BROKER_CLUSTER_ACL_INFO (clusterAclConfigVersion)
list_config                     GET_BROKER_CLUSTER_ACL_CONFIG (getAclConfig)
==============================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from orbitmq.errors import ClientError
from orbitmq.protocol.acl_commands import (
    AclConfigBody,
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
    decode_acl_config,
    join_list,
)
from orbitmq.protocol.codes import RequestCode

if TYPE_CHECKING:
    from orbitmq.client.admin import AdminClient

__all__ = ["AclAdminClient"]


class AclAdminClient:
    """The ACL operations of one :class:`~orbitmq.client.AdminClient`."""

    def __init__(self, admin: AdminClient) -> None:
        self._admin = admin

    async def brokers(self, broker_addr: str | None = None, cluster: str | None = None) -> list[str]:
        """The broker addresses an operation goes to.

        Raises:
            ClientError: the cluster is unknown or has no broker.
        """
        if broker_addr:
            return [broker_addr]
        info = await self._admin.cluster_info()
        if cluster is None:
            names = set(info.broker_addr_table)
        elif cluster in info.cluster_addr_table:
            names = info.cluster_addr_table[cluster]
        else:
            raise ClientError(f"cluster {cluster} is unknown to the name server")
        addrs = [
            addr
            for name in sorted(names)
            if name in info.broker_addr_table
            for _, addr in sorted(info.broker_addr_table[name].broker_addrs.items())
        ]
        if not addrs:
            raise ClientError(f"no broker in cluster {cluster or '(any)'}")
        return addrs

    async def update_account(
        self,
        access_key: str,
        secret_key: str,
        *,
        white_remote_address: str | None = None,
        admin: bool = False,
        default_topic_perm: str | None = None,
        default_group_perm: str | None = None,
        topic_perms: Sequence[str] | None = None,
        group_perms: Sequence[str] | None = None,
        broker_addr: str | None = None,
        cluster: str | None = None,
    ) -> list[str]:
        """Create ``access_key`` or update the fields given (None keeps a field); the brokers done.

        Raises:
            BrokerResponseError: a broker refused (209 with its reason, or 1 for ACL itself).
        """
        header = CreateAccessConfigRequestHeader(
            access_key=access_key,
            secret_key=secret_key,
            white_remote_address=white_remote_address,
            admin=admin,
            default_topic_perm=default_topic_perm,
            default_group_perm=default_group_perm,
            topic_perms=join_list(list(topic_perms) if topic_perms is not None else None),
            group_perms=join_list(list(group_perms) if group_perms is not None else None),
        )
        addrs = await self.brokers(broker_addr, cluster)
        for addr in addrs:
            await self._admin._broker(
                addr,
                RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
                header.to_ext(),
                f"updating account {access_key}",
            )
        return addrs

    async def delete_account(
        self, access_key: str, *, broker_addr: str | None = None, cluster: str | None = None
    ) -> list[str]:
        """Remove ``access_key``; the brokers done."""
        ext = DeleteAccessConfigRequestHeader(access_key).to_ext()
        addrs = await self.brokers(broker_addr, cluster)
        for addr in addrs:
            await self._admin._broker(
                addr, RequestCode.DELETE_ACL_CONFIG, ext, f"deleting account {access_key}"
            )
        return addrs

    async def update_global_white_addresses(
        self,
        patterns: Sequence[str],
        *,
        acl_file: str | None = None,
        broker_addr: str | None = None,
        cluster: str | None = None,
    ) -> list[str]:
        """Replace the global white list of ``acl_file`` (default: each broker's main file)."""
        ext = UpdateGlobalWhiteAddrsConfigRequestHeader(",".join(patterns), acl_file or "").to_ext()
        addrs = await self.brokers(broker_addr, cluster)
        for addr in addrs:
            await self._admin._broker(
                addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, ext, "updating the global white list"
            )
        return addrs

    async def versions(
        self, *, broker_addr: str | None = None, cluster: str | None = None
    ) -> dict[str, GetBrokerAclConfigResponseHeader]:
        """Each broker's accounts-file versions, by broker address."""
        found = {}
        for addr in await self.brokers(broker_addr, cluster):
            response = await self._admin._broker(
                addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}, "ACL versions"
            )
            found[addr] = GetBrokerAclConfigResponseHeader.from_ext(response.ext_fields)
        return found

    async def list_config(
        self, *, broker_addr: str | None = None, cluster: str | None = None
    ) -> dict[str, AclConfigBody]:
        """Each broker's accounts (without secrets) and global white list, by broker address."""
        found = {}
        for addr in await self.brokers(broker_addr, cluster):
            response = await self._admin._broker(
                addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, {}, "ACL config"
            )
            found[addr] = decode_acl_config(response.body)
        return found
