"""The argparse side of ``mqadmin``'s verbs: ``orbitmq admin topicList``, ``consumerProgress -g G``...

Verbs and option letters are ``mqadmin``'s, so a RocketMQ operator's muscle memory works; where
a verb overlaps a noun-verb command (``topicList`` and ``topic list``) both run the same code.
Every read verb takes ``--json`` (from the shared options).
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from orbitmq.cli import _verbs, _verbs_messages, _verbs_ops
from orbitmq.client.admin import AdminClient
from orbitmq.errors import ClientError
from orbitmq.model.topic_attributes import AttributeError_, parse_attribute_changes

__all__ = ["CommandParser", "add_verbs"]

Command = Callable[[AdminClient, argparse.Namespace], Awaitable[None]]

_VERBS_HELP = "mqadmin's verbs (run 'orbitmq admin VERB --help')"


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Sub-commands that name a mistyped one's closest matches (``did you mean topicList?``) and
    report an unknown option against the command's own usage, not the list of every command."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        arguments = list(values or [])
        if arguments:
            # mqadmin matches its verbs case-insensitively: `topiclist` is `topicList`.
            arguments[0] = self.canonical(str(arguments[0])) or arguments[0]
        super().__call__(parser, namespace, arguments, option_string)
        extras = vars(namespace).pop(argparse._UNRECOGNIZED_ARGS_ATTR, None)
        if extras:
            name = str(arguments[0])
            self._name_parser_map[name].error(f"unrecognized arguments: {' '.join(extras)}")

    def canonical(self, name: str) -> str | None:
        """The command ``name`` names, its case ignored as mqadmin ignores it; None for none."""
        if name in self._name_parser_map:
            return name
        matches = [known for known in self._name_parser_map if known.lower() == name.lower()]
        return matches[0] if len(matches) == 1 else None


def unknown_command_message(name: str, known: list[str]) -> str:
    """``unknown command 'topiclist'; did you mean topicList?`` (difflib, case ignored)."""
    by_lower = {command.lower(): command for command in known}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.6)
    if close:
        return f"unknown command {name!r}; did you mean {' or '.join(by_lower[c] for c in close)}?"
    return f"unknown command {name!r}; 'orbitmq admin --help' lists every command"


class CommandParser(argparse.ArgumentParser):
    """``orbitmq admin``'s parsers: their sub-commands are :class:`_Commands`, and a command
    line naming no command says so (not argparse's ``the following arguments are required``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _Commands)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if isinstance(action, _Commands):
            if action.canonical(str(value)) is None:
                raise argparse.ArgumentError(
                    None, unknown_command_message(str(value), list(action._name_parser_map))
                )
            return
        super()._check_value(action, value)

    def error(self, message: str) -> Any:
        if message.startswith("the following arguments are required: COMMAND"):
            commands = [
                name
                for action in self._actions
                if isinstance(action, _Commands)
                for name in action._name_parser_map
            ]
            if len(commands) > 12:
                message = (
                    "name a command: an mqadmin verb (clusterList, topicList, updateTopic, ...) or "
                    f"a noun-verb command (topic list, ...); '{self.prog} --help' lists them all"
                )
            else:
                message = f"name a command: {', '.join(commands)}"
        super().error(message)


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def _attribute_changes(text: str) -> str:
    """``-a``: checked here as the broker will parse it, sent as given."""
    try:
        parse_attribute_changes(text)
    except AttributeError_ as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    return text


def add_verbs(
    groups: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    shared: dict[str, Command],
    parse_time_ms: Callable[[str], int],
    perm: Callable[[str], int],
) -> None:
    """Add every verb to ``groups``; ``shared`` holds the noun-verb commands verbs reuse
    (``topic_route``, ``topic_status``, ``topic_delete``, ``topic_create``, ``topic_update``,
    ``consumer_progress``)."""

    def verb(name: str, help_text: str, command: Command) -> argparse.ArgumentParser:
        parser = groups.add_parser(name, parents=[common], help=help_text)
        parser.set_defaults(command=command)
        return parser

    time_help = "'now', epoch ms or ISO-8601"

    parser = verb("clusterList", "brokers of every cluster, with version and TPS", _verbs.cluster_list)
    parser.add_argument("-c", "--cluster", help="only this cluster")
    verb("topicList", "every topic the name server knows", _verbs.topic_list)
    verb("topicRoute", "a topic's route", shared["topic_route"]).add_argument("-t", "--topic", required=True)
    verb("topicStatus", "min/max offset and last store time per queue", shared["topic_status"]).add_argument(
        "-t", "--topic", required=True
    )
    parser = verb("updateTopic", "create a topic, or change the given settings of one", _update_topic(shared))
    parser.add_argument("-t", "--topic", required=True)
    parser.add_argument("-b", "--broker", metavar="HOST:PORT", help="only this broker")
    parser.add_argument("-c", "--cluster", help="cluster (default: every cluster)")
    parser.add_argument(
        "-q", "--queues", type=int, help="read and write queues per broker (8 for a new topic)"
    )
    parser.add_argument("-r", "--read-queues", type=int, help="read queues (may differ from write queues)")
    parser.add_argument("-w", "--write-queues", type=int, help="write queues")
    parser.add_argument("-p", "--perm", type=perm, help="permission: 2 write, 4 read, 6 both")
    parser.add_argument("-o", "--order", type=_bool, help="ordered topic: true or false")
    parser.add_argument(
        "-a",
        "--attributes",
        type=_attribute_changes,
        help="RocketMQ 5 topic attributes: +message.type=FIFO|DELAY|TRANSACTION|NORMAL, -key removes one",
    )
    parser = verb("deleteTopic", "delete a topic from brokers and name servers", shared["topic_delete"])
    parser.add_argument("-t", "--topic", required=True)
    parser.add_argument("-c", "--cluster", help="cluster (default: every cluster)")

    parser = verb("updateSubGroup", "create a consumer group config, or change it", _verbs.update_sub_group)
    parser.add_argument("-g", "--group", required=True)
    parser.add_argument("-c", "--cluster", help="cluster (default: every cluster)")
    parser.add_argument("-s", "--consume-enable", type=_bool)
    parser.add_argument("-m", "--consume-from-min-enable", type=_bool)
    parser.add_argument("-d", "--consume-broadcast-enable", type=_bool)
    parser.add_argument("-o", "--consume-message-orderly", type=_bool, help="FIFO for POP / 5.x consumers")
    parser.add_argument("-q", "--retry-queue-nums", type=int)
    parser.add_argument("-r", "--retry-max-times", type=int)
    parser.add_argument("-i", "--broker-id", type=int)
    parser.add_argument("-w", "--which-broker-when-consume-slowly", type=int)
    parser.add_argument("-a", "--notify-consumer-ids-changed-enable", type=_bool)
    parser = verb("deleteSubGroup", "delete a consumer group config", _verbs.delete_sub_group)
    parser.add_argument("-g", "--group", required=True)
    parser.add_argument("-c", "--cluster", help="cluster (default: every cluster)")
    parser.add_argument("-r", "--remove-offset", action="store_true", help="also drop the group's offsets")

    parser = verb(
        "consumerProgress",
        "lag per queue of a group (-g), or every group's totals",
        _consumer_progress(shared),
    )
    parser.add_argument("-g", "--group", help="the group (default: every group)")
    parser.add_argument("-t", "--topic", help="only this topic")
    parser.add_argument("-c", "--cluster", help="with no group: only this cluster")
    verb(
        "consumerConnection", "online members of a group and what they subscribe", _verbs.consumer_connection
    ).add_argument("-g", "--group", required=True)
    parser = verb("producerConnection", "connections of a producer group", _verbs.producer_connection)
    parser.add_argument("-g", "--group", required=True)
    parser.add_argument("-t", "--topic", help="only brokers hosting this topic")
    parser = verb("consumerStatus", "what each online member of a group is doing", _verbs.consumer_status)
    parser.add_argument("-g", "--group", required=True)
    parser.add_argument("-i", "--client-id", help="only this member")
    parser.add_argument("-s", "--jstack", action="store_true", help="ask for the client's thread dump")
    parser = verb(
        "resetOffsetByTime", "move a group's offsets to a point in time, live", _verbs.reset_offset_by_time
    )
    parser.add_argument("-g", "--group", required=True)
    parser.add_argument("-t", "--topic", required=True)
    parser.add_argument("-s", "--timestamp", type=parse_time_ms, required=True, help=time_help)
    parser.add_argument("-f", "--force", type=_bool, default=True, help="also move forward (default true)")
    parser = verb(
        "skipAccumulatedMessage", "move a group to the end of a topic, live", _verbs.skip_accumulated_message
    )
    parser.add_argument("-g", "--group", required=True)
    parser.add_argument("-t", "--topic", required=True)
    parser = verb("cloneGroupOffset", "copy a group's offsets to another group", _verbs.clone_group_offset)
    parser.add_argument("-s", "--src-group", required=True)
    parser.add_argument("-d", "--dest-group", required=True)
    parser.add_argument("-t", "--topic", help="only this topic")
    parser.add_argument(
        "-o", "--offline", action="store_true", help="copy even topics the online source does not consume"
    )

    _add_message_verbs(verb, parse_time_ms)
    _add_ops_verbs(verb, perm)

    parser = verb("brokerStatus", "a broker's runtime figures", _verbs.broker_status)
    _broker_or_cluster(parser)
    parser = verb("statsAll", "per topic and group: accumulation, TPS, messages in 24 h", _verbs.stats_all)
    parser.add_argument("-t", "--topic", help="only this topic")
    parser.add_argument("-a", "--active", action="store_true", help="only topics with messages in 24 h")
    parser = verb("getBrokerConfig", "a broker's configuration", _verbs.get_broker_config)
    _broker_or_cluster(parser)
    parser = verb(
        "updateBrokerConfig", "change a broker setting that can change live", _verbs.update_broker_config
    )
    _broker_or_cluster(parser)
    parser.add_argument("-k", "--key", required=True)
    parser.add_argument("-v", "--value", required=True)
    parser = verb("updateKvConfig", "set a name server KV config item", _verbs.update_kv_config)
    parser.add_argument("-s", "--namespace", required=True)
    parser.add_argument("-k", "--key", required=True)
    parser.add_argument("-v", "--value", required=True)


def _add_ops_verbs(
    verb: Callable[[str, str, Command], argparse.ArgumentParser], perm: Callable[[str], int]
) -> None:
    parser = verb("updateTopicPerm", "change a topic's permission", _verbs_ops.update_topic_perm)
    parser.add_argument("-t", "--topic", required=True)
    parser.add_argument("-p", "--perm", type=perm, required=True, help="2 write, 4 read, 6 both")
    parser.add_argument("-b", "--broker", metavar="HOST:PORT", help="on this broker")
    parser.add_argument("-c", "--cluster", help="on every master of this cluster")
    verb("topicClusterList", "the clusters a topic is on", _verbs_ops.topic_cluster_list).add_argument(
        "-t", "--topic", required=True
    )
    parser = verb("allocateMQ", "how an average rebalance shares a topic's queues", _verbs_ops.allocate_mq)
    parser.add_argument("-t", "--topic", required=True)
    parser.add_argument("-i", "--ip-list", required=True, help="client ids, comma-separated")
    verb("getNamesrvConfig", "every name server's config", _verbs_ops.get_namesrv_config)
    parser = verb(
        "updateNamesrvConfig", "change a name server setting live", _verbs_ops.update_namesrv_config
    )
    parser.add_argument("-k", "--key", required=True)
    parser.add_argument("-v", "--value", required=True)
    parser = verb("deleteKvConfig", "delete a name server KV config item", _verbs_ops.delete_kv_config)
    parser.add_argument("-s", "--namespace", required=True)
    parser.add_argument("-k", "--key", required=True)
    for name, writable, help_text in (
        ("wipeWritePerm", False, "stop sends to a broker on every name server (drain it)"),
        ("addWritePerm", True, "let sends reach a broker again on every name server"),
    ):
        parser = verb(name, help_text, _verbs_ops.write_perm)
        parser.add_argument("-b", "--broker-name", required=True)
        parser.set_defaults(writable=writable)
    verb(
        "getConsumerConfig", "a group's subscription group config per broker", _verbs_ops.get_consumer_config
    ).add_argument("-g", "--group", required=True)
    parser = verb(
        "brokerConsumeStats", "every group's lag per queue on one broker", _verbs_ops.broker_consume_stats
    )
    parser.add_argument("-b", "--broker", metavar="HOST:PORT", required=True)
    parser.add_argument(
        "-t", "--timeout-millis", type=int, default=50_000, help="accepted for mqadmin's sake"
    )
    parser.add_argument("-l", "--level", type=int, default=0, help="only queues with at least this diff")
    parser.add_argument("-o", "--order", type=_bool, default=False, help="order topics (true/false)")
    parser = verb("clusterRT", "send time to each broker, every -i seconds", _verbs_ops.cluster_rt)
    parser.add_argument("-a", "--amount", type=int, default=100, help="messages per broker per round (100)")
    parser.add_argument("-s", "--size", type=int, default=128, help="message size in bytes (128)")
    parser.add_argument("-c", "--cluster", help="only this cluster")
    parser.add_argument("-p", "--print-log", type=_bool, default=False, help="print as tlog lines")
    parser.add_argument("-m", "--machine-room", default="noname")
    parser.add_argument("-i", "--interval", type=float, default=10, help="seconds between rounds (10)")
    parser.add_argument("--rounds", type=int, default=0, help="stop after this many rounds (0: never)")
    parser = verb("queryCq", "consume queue entries of one queue", _verbs_ops.query_cq)
    parser.add_argument("-t", "--topic", required=True)
    parser.add_argument("-q", "--queue", type=int, required=True, help="queue id")
    parser.add_argument("-i", "--index", type=int, required=True, help="first queue offset")
    parser.add_argument("-c", "--count", type=int, default=10, help="entries (10)")
    parser.add_argument(
        "-b", "--broker", metavar="HOST:PORT", help="broker (default: the route's first master)"
    )
    parser.add_argument(
        "-g", "--group", help="consumer group: its subscription, and whether each entry passes it"
    )


def _broker_or_cluster(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-b", "--broker", help="broker address host:port")
    parser.add_argument("-c", "--cluster", help="every master of this cluster (default: every cluster)")


def _add_message_verbs(
    verb: Callable[[str, str, Command], argparse.ArgumentParser], parse_time_ms: Callable[[str], int]
) -> None:
    parser = verb(
        "queryMsgById", "a message by offsetMsgId or msgId (UNIQ_KEY)", _verbs_messages.query_msg_by_id
    )
    parser.add_argument("-i", "--msg-id", required=True)
    parser.add_argument("-t", "--topic", help="topic of a msgId (default: search every topic)")
    parser.add_argument("-g", "--group", help="with -d: consumer group to consume it directly")
    parser.add_argument("-d", "--client-id", help="with -g: the online client that consumes it now")
    parser = verb("queryMsgByKey", "messages of a topic by key", _verbs_messages.query_msg_by_key)
    parser.add_argument("-t", "--topic", required=True)
    parser.add_argument("-k", "--key", required=True)
    parser.add_argument("-b", "--begin", type=parse_time_ms, help="stored at or after")
    parser.add_argument("-e", "--end", type=parse_time_ms, help="stored at or before")
    parser.add_argument("-c", "--max-num", type=int, default=64, help="most messages (64)")
    parser = verb("queryMsgByOffset", "the message at a queue offset", _verbs_messages.query_msg_by_offset)
    parser.add_argument("-t", "--topic", required=True)
    parser.add_argument("-b", "--broker-name", required=True)
    parser.add_argument("-i", "--queue-id", type=int, required=True)
    parser.add_argument("-o", "--offset", type=int, required=True)
    for name in ("queryMsgTraceById", "trace"):
        parser = verb(
            name, "a message's trace: its send and its consumptions", _verbs_messages.query_msg_trace_by_id
        )
        if name == "trace":
            parser.add_argument("msg_id", metavar="MSG_ID")
        else:
            parser.add_argument("-i", "--msg-id", required=True)
        parser.add_argument(
            "-t", "--trace-topic", default="RMQ_SYS_TRACE_TOPIC", help="trace topic (RMQ_SYS_TRACE_TOPIC)"
        )
    parser = verb("sendMessage", "send one message", _verbs_messages.send_message)
    parser.add_argument("-t", "--topic", required=True)
    parser.add_argument("-p", "--body", required=True)
    parser.add_argument("-k", "--keys", help="keys, space-separated")
    parser.add_argument("-c", "--tags")
    parser.add_argument("-b", "--broker-name", help="with -i: this queue")
    parser.add_argument("-i", "--queue-id", type=int)
    parser = verb(
        "consumeMessage", "read messages of a topic (no offset committed)", _verbs_messages.consume_message
    )
    parser.add_argument("-t", "--topic", required=True)
    parser.add_argument("-b", "--broker-name")
    parser.add_argument("-i", "--queue-id", type=int)
    parser.add_argument("-o", "--offset", type=int, help="start here (default: the queue's first)")
    parser.add_argument("-s", "--begin", type=parse_time_ms, help="start at this time")
    parser.add_argument("-e", "--end", type=parse_time_ms, help="stop at this time")
    parser.add_argument("-c", "--count", type=int, default=128, help="most messages (128)")
    parser = verb("printMsg", "every message of a topic in a time range", _verbs_messages.print_msg)
    parser.add_argument("-t", "--topic", required=True)
    parser.add_argument("-s", "--sub-expression", default="*", help="tag expression (*)")
    parser.add_argument("-b", "--begin", type=parse_time_ms, help="stored at or after")
    parser.add_argument("-e", "--end", type=parse_time_ms, help="stored before")
    parser.add_argument("-m", "--max-count", type=int, default=1000, help="most messages per queue (1000)")


def _update_topic(shared: dict[str, Command]) -> Command:
    async def update_topic(admin: AdminClient, args: argparse.Namespace) -> None:
        if args.broker and args.cluster:
            raise ClientError("updateTopic: give -b (one broker) or -c (a cluster's masters), not both")
        exists = bool(await admin.topic_configs(args.topic, cluster=args.cluster, broker_addr=args.broker))
        if exists:
            await shared["topic_update"](admin, args)
            return
        args.queues = 8 if args.queues is None else args.queues
        args.perm = 6 if args.perm is None else args.perm
        args.order = bool(args.order)
        await shared["topic_create"](admin, args)

    return update_topic


def _consumer_progress(shared: dict[str, Command]) -> Command:
    async def consumer_progress(admin: AdminClient, args: argparse.Namespace) -> None:
        if args.group:
            await shared["consumer_progress"](admin, args)
        else:
            await _verbs.consumer_progress_all(admin, args)

    return consumer_progress
