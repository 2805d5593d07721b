"""``orbitmq admin acl ...``: accounts and white lists on the brokers (RocketMQ's ACL 1.0).

Commands (``mqadmin`` equivalents in brackets)::

    orbitmq admin acl update ACCESS_KEY -s SECRET|- [--white-address P] [--admin]
        [--default-topic-perm W] [--default-group-perm W] [--topic-perms t1=PUB,t2=SUB]
        [--group-perms g1=SUB] [-b BROKER | -c CLUSTER]                  [updateAclConfig]
    orbitmq admin acl delete ACCESS_KEY [-b|-c]                          [deleteAclConfig]
    orbitmq admin acl white-list 'P1,P2' [--file PATH] [-b|-c]           [updateGlobalWhiteAddr]
    orbitmq admin acl version [-b|-c]                                    [clusterAclConfigVersion]
    orbitmq admin acl list [-b|-c]                                       [getAclConfig]

``-s -`` reads the account's secret from the first line of standard input, so it stays off
the command line. Secrets are never printed (brokers never send them back). Without ``-b``
or ``-c`` a command goes to every broker the name server knows.
"""

from __future__ import annotations

import argparse
import sys

from orbitmq.client.admin import AdminClient

__all__ = ["add_acl_parser"]


def _targets(args: argparse.Namespace) -> dict[str, str | None]:
    return {"broker_addr": args.broker, "cluster": args.cluster}


def _list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [item.strip() for item in text.split(",") if item.strip()]


async def _update(admin: AdminClient, args: argparse.Namespace) -> None:
    secret = sys.stdin.readline().strip() if args.account_secret == "-" else args.account_secret
    done = await admin.acl.update_account(
        args.account,
        secret,
        white_remote_address=args.white_address,
        admin=args.admin,
        default_topic_perm=args.default_topic_perm,
        default_group_perm=args.default_group_perm,
        topic_perms=_list(args.topic_perms),
        group_perms=_list(args.group_perms),
        **_targets(args),
    )
    print(f"account {args.account} created or updated on {', '.join(done)}")


async def _delete(admin: AdminClient, args: argparse.Namespace) -> None:
    done = await admin.acl.delete_account(args.account, **_targets(args))
    print(f"account {args.account} deleted on {', '.join(done)}")


async def _white_list(admin: AdminClient, args: argparse.Namespace) -> None:
    patterns = _list(args.patterns) or []
    done = await admin.acl.update_global_white_addresses(patterns, acl_file=args.file, **_targets(args))
    print(f"global white list {patterns} set on {', '.join(done)}")


async def _version(admin: AdminClient, args: argparse.Namespace) -> None:
    for addr, info in (await admin.acl.versions(**_targets(args))).items():
        print(f"{info.cluster_name} {info.broker_name} {addr}: {info.version}")
        if info.all_acl_file_version:
            print(f"  files: {info.all_acl_file_version}")


async def _show(admin: AdminClient, args: argparse.Namespace) -> None:
    for addr, config in (await admin.acl.list_config(**_targets(args))).items():
        print(f"broker {addr}")
        print(f"  globalWhiteRemoteAddresses: {list(config.global_white_addrs)}")
        for account in config.accounts:
            print(
                f"  {account.access_key}: admin={str(account.admin).lower()} "
                f"whiteRemoteAddress={account.white_remote_address or '-'} "
                f"defaultTopicPerm={account.default_topic_perm or 'DENY'} "
                f"defaultGroupPerm={account.default_group_perm or 'DENY'} "
                f"topicPerms={list(account.topic_perms)} groupPerms={list(account.group_perms)}"
            )


def _target_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("-b", "--broker", help="one broker address host:port")
    where.add_argument("-c", "--cluster", help="every broker of a cluster (default: every broker)")


def add_acl_parser(groups: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``acl`` command group to ``orbitmq admin``."""
    acl = groups.add_parser("acl", help="ACL accounts and white lists").add_subparsers(
        dest="action", required=True, metavar="COMMAND"
    )
    update = acl.add_parser("update", help="create an account or update the fields given")
    # dest "account": "access_key" is the caller's own --access-key.
    update.add_argument("account", metavar="ACCESS_KEY", help="the account's access key")
    update.add_argument(
        "-s", "--account-secret", required=True, help="the account's secret key; '-' reads it from stdin"
    )
    update.add_argument("--white-address", help="address pattern that skips signature and permissions")
    update.add_argument("--admin", action="store_true", help="admin account (admin codes, every resource)")
    update.add_argument("--default-topic-perm", help="DENY, PUB, SUB or PUB|SUB for unlisted topics")
    update.add_argument("--default-group-perm", help="DENY, PUB, SUB or PUB|SUB for unlisted groups")
    update.add_argument("--topic-perms", help="topicA=PUB,topicB=SUB,... (replaces the list)")
    update.add_argument("--group-perms", help="groupA=SUB,... (replaces the list)")
    _target_arguments(update)
    update.set_defaults(command=_update)
    delete = acl.add_parser("delete", help="delete an account")
    delete.add_argument("account", metavar="ACCESS_KEY", help="the account's access key")
    _target_arguments(delete)
    delete.set_defaults(command=_delete)
    white = acl.add_parser("white-list", help="replace the global white list")
    white.add_argument("patterns", help="comma-separated address patterns ('' clears the list)")
    white.add_argument("--file", help="the accounts file to change (default: the main file)")
    _target_arguments(white)
    white.set_defaults(command=_white_list)
    version = acl.add_parser("version", help="the accounts files' data versions")
    _target_arguments(version)
    version.set_defaults(command=_version)
    show = acl.add_parser("list", help="accounts (without secrets) and white lists")
    _target_arguments(show)
    show.set_defaults(command=_show)
