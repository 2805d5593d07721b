"""Headers and bodies of the ACL admin requests (codes 50-54), RocketMQ's field names.

======  ================================  ==================================================
code    request                           fields
======  ================================  ==================================================
50      UPDATE_AND_CREATE_ACL_CONFIG      header: accessKey, secretKey, whiteRemoteAddress,
                                          admin, defaultTopicPerm, defaultGroupPerm,
                                          topicPerms, groupPerms (lists joined with ",")
51      DELETE_ACL_CONFIG                 header: accessKey
52      GET_BROKER_CLUSTER_ACL_INFO       response header: version (DataVersion JSON of the
                                          main file), allAclFileVersion (JSON map file ->
                                          DataVersion), brokerName, brokerAddr, clusterName
53      UPDATE_GLOBAL_WHITE_ADDRS_CONFIG  header: globalWhiteAddrs (joined with ","),
                                          aclFileFullPath
54      GET_BROKER_CLUSTER_ACL_CONFIG     response body: {"globalWhiteAddrs": [...],
                                          "plainAccessConfigs": [{accessKey, ...}]}
======  ================================  ==================================================

Failures answer 209 / 210 / 211 (``*_ACL_CONFIG_FAILED``) with the reason as remark. The
headers live here rather than in ``headers`` to keep that module to the messaging requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from orbitmq.errors import RemoteProtocolError
from orbitmq.protocol.header_fields import HeaderBase, Text

__all__ = [
    "AclConfigBody",
    "AclAccountView",
    "CreateAccessConfigRequestHeader",
    "DeleteAccessConfigRequestHeader",
    "GetBrokerAclConfigResponseHeader",
    "UpdateGlobalWhiteAddrsConfigRequestHeader",
    "decode_acl_config",
    "encode_acl_config",
    "join_list",
    "split_list",
]


def split_list(text: str | None) -> tuple[str, ...] | None:
    """A ``,``-joined header list; None stays None (the field was not sent)."""
    if text is None:
        return None
    return tuple(item.strip() for item in text.split(",") if item.strip())


def join_list(items: tuple[str, ...] | list[str] | None) -> str | None:
    return None if items is None else ",".join(items)


@dataclass(frozen=True, slots=True)
class CreateAccessConfigRequestHeader(HeaderBase):
    """UPDATE_AND_CREATE_ACL_CONFIG (50)."""

    access_key: Text
    secret_key: str | None = field(default=None, repr=False)
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: str | None = None
    group_perms: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteAccessConfigRequestHeader(HeaderBase):
    """DELETE_ACL_CONFIG (51)."""

    access_key: Text


@dataclass(frozen=True, slots=True)
class UpdateGlobalWhiteAddrsConfigRequestHeader(HeaderBase):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53); an empty file path means the main accounts file."""

    global_white_addrs: str
    acl_file_full_path: str | None = None


@dataclass(frozen=True, slots=True)
class GetBrokerAclConfigResponseHeader(HeaderBase):
    """GET_BROKER_CLUSTER_ACL_INFO (52) response."""

    version: str
    broker_name: str
    broker_addr: str
    cluster_name: str
    all_acl_file_version: str | None = None


@dataclass(frozen=True, slots=True)
class AclAccountView:
    """One account as GET_BROKER_CLUSTER_ACL_CONFIG lists it; OrbitMQ never sends the secret."""

    access_key: str
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: tuple[str, ...] = ()
    group_perms: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AclConfigBody:
    """GET_BROKER_CLUSTER_ACL_CONFIG (54) response body."""

    global_white_addrs: tuple[str, ...] = ()
    accounts: tuple[AclAccountView, ...] = ()


def encode_acl_config(config: AclConfigBody) -> bytes:
    return orjson.dumps(
        {
            "globalWhiteAddrs": list(config.global_white_addrs),
            "plainAccessConfigs": [
                {
                    "accessKey": account.access_key,
                    "whiteRemoteAddress": account.white_remote_address,
                    "admin": account.admin,
                    "defaultTopicPerm": account.default_topic_perm,
                    "defaultGroupPerm": account.default_group_perm,
                    "topicPerms": list(account.topic_perms),
                    "groupPerms": list(account.group_perms),
                }
                for account in config.accounts
            ],
        }
    )


def decode_acl_config(data: bytes) -> AclConfigBody:
    """Raises RemoteProtocolError when ``data`` is not an AclConfig JSON object."""
    try:
        tree: Any = orjson.loads(data)
        accounts = tuple(
            AclAccountView(
                access_key=str(item["accessKey"]),
                white_remote_address=item.get("whiteRemoteAddress"),
                admin=bool(item.get("admin", False)),
                default_topic_perm=item.get("defaultTopicPerm"),
                default_group_perm=item.get("defaultGroupPerm"),
                topic_perms=tuple(str(text) for text in item.get("topicPerms") or ()),
                group_perms=tuple(str(text) for text in item.get("groupPerms") or ()),
            )
            for item in tree.get("plainAccessConfigs") or ()
        )
        white = tuple(str(text) for text in tree.get("globalWhiteAddrs") or ())
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError) as exc:
        raise RemoteProtocolError(f"ACL config body: {exc}") from None
    return AclConfigBody(white, accounts)
