"""Apache's mqadmin (rocketmq-tools, MQAdminStartup) against OrbitMQ: 4.9.x and the newest 5.x.

The verbs run in one JVM per batch (tests/interop/java/src/remoting/.../MqadminBatch.java);
each verb's output is checked for the values an operator reads from it (topics, offsets, the
message found by key and by id, the trace), and for no failure ("command failed", a stack
trace), since MQAdminStartup exits 0 even when a verb fails.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.interop.messages import UPROP_PREFIX, check_exactly
from tests.interop.test_remoting_client import drive, sent
from tests.support.interop_java import JavaLine, parse_events
from tests.support.processes import ServerProcess

BATCH = "orbitmq.interop.MqadminBatch"
FAILED = re.compile(r"command failed|Exception|not exist\.|^\tat ", re.MULTILINE)


def mqadmin(line: JavaLine, home: Path, *commands: list[str], timeout_s: float = 120) -> dict[int, str]:
    """Each command's output, by its index; raises if a command failed."""
    args: list[str] = []
    for command in commands:
        if args:
            args.append("+")
        args += command
    home.mkdir(parents=True, exist_ok=True)
    (home / "conf").mkdir(exist_ok=True)
    # mqadmin 4.9.x configures logback from $ROCKETMQ_HOME/conf/logback_tools.xml, as shipped in
    # Apache's distribution; a verb fails without it. Its own logs are not what is checked here.
    (home / "conf" / "logback_tools.xml").write_text('<configuration><root level="OFF"/></configuration>\n')
    done = subprocess.run(
        [
            "java",
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-Dfile.encoding=UTF-8",
            "-Dsun.stdout.encoding=UTF-8",
            f"-Duser.home={home}",
            "-cp",
            line.classpath,
            BATCH,
            *args,
        ],
        capture_output=True,
        timeout=timeout_s,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home), "ROCKETMQ_HOME": str(home)},
    )
    text = done.stdout.decode(errors="replace")
    assert done.returncode == 0, text[-3000:] + done.stderr.decode(errors="replace")[-3000:]
    sections = re.split(r"^===MQADMIN (\d+|END) .*$", text, flags=re.MULTILINE)
    outputs = {
        int(sections[i]): sections[i + 1] for i in range(1, len(sections) - 1, 2) if sections[i] != "END"
    }
    assert len(outputs) == len(commands), text[-3000:]
    for index, output in outputs.items():
        assert not FAILED.search(output), f"mqadmin {commands[index][0]} failed:\n{output[-3000:]}"
    return outputs


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.strip() and not line.startswith("#")]


@pytest.fixture
def consumer_online(remoting: JavaLine, server: ServerProcess, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Starts a traced push consumer of ``(topic, group, count)`` that stays online; yields a waiter."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(topic: str, group: str, count: int) -> Path:
        out = tmp_path / f"consumer-{group}.out"
        args = [
            "push",
            "--topic",
            topic,
            "--group",
            group,
            "--expect",
            str(count),
            "--trace",
            "--settle-ms",
            "90000",
            "--namesrv",
            server.addr,
            "--instance",
            "online",
        ]
        home = tmp_path / "consumer-home"
        home.mkdir(exist_ok=True)
        with open(out, "wb") as stdout:
            procs.append(
                subprocess.Popen(
                    [
                        "java",
                        "-Xmx256m",
                        "-XX:TieredStopAtLevel=1",
                        f"-Duser.home={home}",
                        "-cp",
                        remoting.classpath,
                        "orbitmq.interop.RemotingDriver",
                        *args,
                    ],
                    stdout=stdout,
                    stderr=subprocess.STDOUT,
                    env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
                )
            )
        started = time.monotonic()
        deadline = started + 60
        while time.monotonic() < deadline:
            got = [e for e in parse_events(out.read_text(errors="replace")) if e.get("event") == "received"]
            if len(got) >= count:
                # The client first persists consumed offsets 10 s after it starts, then every second
                # (the driver's setting); until then the broker has only what its pulls committed.
                time.sleep(max(0.0, started + 12.0 - time.monotonic()))
                return out
            time.sleep(0.2)
        raise AssertionError(f"the online consumer got {len(got)} of {count}:\n{out.read_text()[-2000:]}")

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(10)


def test_mqadmin_verbs_show_orbitmq_state(  # type: ignore[no-untyped-def]
    remoting: JavaLine, server: ServerProcess, tmp_path: Path, consumer_online
) -> None:
    n = ["-n", server.addr]
    broker = f"127.0.0.1:{server.extra_ports[0]}"
    topic, doomed, group = (
        f"admin-{remoting.profile}",
        f"admin-doomed-{remoting.profile}",
        f"admin-{remoting.profile}-g",
    )
    home = tmp_path / "mqadmin"
    mqadmin(
        remoting,
        home,
        ["updateTopic", *n, "-c", "DefaultCluster", "-t", topic, "-r", "4", "-w", "4"],
        ["updateTopic", *n, "-c", "DefaultCluster", "-t", doomed, "-r", "2", "-w", "2"],
        ["updateSubGroup", *n, "-c", "DefaultCluster", "-g", group],
    )
    count = 1000
    events = drive(
        remoting,
        tmp_path,
        server,
        # Paced: the client's trace dispatcher puts the records of up to 100 ms of sends in one
        # trace message whose KEYS list every message id. Past about 500 sends in 100 ms those
        # keys pass the 32,767 bytes a stored message's properties may hold, the broker refuses
        # the message (MESSAGE_ILLEGAL, as Apache's does) and those records are lost.
        ["produce", "--topic", topic, "--count", str(count), "--tags", "cycle", "--trace", "--pace-ms", "1"],
    )
    sends = {int(e["seq"]): e for e in sent(events)}  # type: ignore[call-overload]
    online = consumer_online(topic, group, count)
    received = [e for e in parse_events(online.read_text(errors="replace")) if e.get("event") == "received"]
    check_exactly(received, range(count))  # traced on both sides, every message compared by content
    before_reset_ms = int(time.time() * 1000)
    by_id_topic = ["-t", topic] if remoting.profile == "remoting5" else []  # 4.9.x has no -t, 5.x needs it
    out = mqadmin(
        remoting,
        home,
        ["clusterList", *n],  # 0
        ["topicList", *n],  # 1
        ["topicRoute", *n, "-t", topic],  # 2
        ["topicStatus", *n, "-t", topic],  # 3
        ["consumerProgress", *n, "-g", group],  # 4
        ["consumerConnection", *n, "-g", group],  # 5
        ["queryMsgById", *n, *by_id_topic, "-i", str(sends[5]["offset_msg_id"])],  # 6
        ["queryMsgByKey", *n, "-t", topic, "-k", "key-7"],  # 7
        ["queryMsgTraceById", *n, "-i", str(sends[3]["msg_id"])],  # 8
        ["brokerStatus", *n, "-b", broker],  # 9
        ["statsAll", *n, "-t", topic],  # 10
        ["updateBrokerConfig", *n, "-b", broker, "-k", "maxReconsumeTimes", "-v", "7"],  # 11
        ["getBrokerConfig", *n, "-b", broker],  # 12
        ["sendMessage", *n, "-t", topic, "-p", "from-mqadmin", "-k", "admin-key", "-c", "AdminTag"],  # 13
        ["resetOffsetByTime", *n, "-g", group, "-t", topic, "-s", str(before_reset_ms - 3_600_000)],  # 14
        ["skipAccumulatedMessage", *n, "-g", group, "-t", topic],  # 15
        ["consumeMessage", *n, "-t", topic, "-b", "broker-a", "-i", "0", "-o", "0", "-c", "1"],  # 16
        ["deleteTopic", *n, "-c", "DefaultCluster", "-t", doomed],  # 17
        ["topicList", *n],  # 18
    )
    assert ["DefaultCluster", "broker-a", "0", broker] == rows(out[0])[0][:4]
    assert {topic, doomed} <= set(out[1].split())
    assert '"brokerName":"broker-a"' in out[2].replace(" ", "") and '"writeQueueNums":4' in out[2].replace(
        " ", ""
    )
    status = [r for r in rows(out[3]) if r[0] == "broker-a"]
    assert len(status) == 4 and sum(int(r[3]) for r in status) == count  # max offsets add up to the sends
    progress = [r for r in rows(out[4]) if r[0] == topic]
    assert len(progress) == 4
    assert (
        sum(int(r[3]) for r in progress) == count and sum(int(r[4]) for r in progress) == count
    )  # all consumed
    assert "online-0" in out[5] and "CLUSTERING" in out[5] and topic in out[5]
    assert f"Topic:               {topic}" in out[6] and "Keys:                [key-5 k2]" in out[6]
    assert f"uprop={UPROP_PREFIX}5" in out[6]
    assert str(sends[7]["msg_id"]) in out[7]
    trace = out[8]
    assert "Pub" in trace and "java-producer" in trace, trace
    assert "SubBefore" in trace or "SubAfter" in trace or "Sub" in trace, trace
    assert "msgPutTotalTodayNow" in out[9] and "commitLogMaxOffset" in out[9]
    assert topic in out[10]
    assert "update broker config success" in out[11]
    assert re.search(r"^maxReconsumeTimes\s+=\s+7\s*$", out[12], re.MULTILINE), out[12]
    assert "SEND_OK" in out[13]
    reset = [r for r in rows(out[14]) if r[0] == "broker-a"]
    assert len(reset) == 4 and all(int(r[2]) == 0 for r in reset), out[14]  # an hour back: offset 0
    skipped = [r for r in rows(out[15]) if r[0] == "broker-a"]
    assert len(skipped) == 4 and sum(int(r[2]) for r in skipped) == count + 1, out[
        15
    ]  # to the end, with mqadmin's send
    assert "Consume ok" in out[16] or "MSGID" in out[16], out[16]
    assert "success" in out[17]
    assert doomed not in out[18].split() and topic in out[18].split()
