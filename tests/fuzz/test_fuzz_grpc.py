"""Fuzz tier, gRPC port: seeded hostile calls on every RPC lose, break and flood nothing.

Method: an ``orbitmq standalone`` (name server, broker and gRPC proxy in one process) with
``maxMessageSize=65536``, so oversized requests stay cheap. 32 seed messages are stored first
through the remoting port. The seeded gRPC fuzzer (orbitmq.bench._fuzz_grpc: random messages
of every RPC's request type, mutated bytes, other RPCs' messages, oversized requests, odd
metadata; Telemetry streams writing drawn commands) sends ``CALLS`` calls while a prober asks
QueryRoute every second. Afterwards: no call got gRPC UNKNOWN or INTERNAL (what grpc answers
when a servicer raised), the prober never failed, no traceback is in the log, the log grew by
less than ``LOG_BYTES_PER_CALL_MAX`` per call, and the seed messages read back byte for byte.
The seed is printed; ``python -m orbitmq.bench fuzz-grpc --seed N`` replays a run at any length.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from orbitmq.bench import _fuzz_grpc, _fuzz_run
from orbitmq.proxy.wire import max_receive_bytes
from tests.support.processes import start_standalone

SEED = 2811
CALLS = 4000
MAX_MESSAGE_SIZE = 65536
SEED_TOPIC = "FuzzGrpcSeed"
LOG_BYTES_PER_CALL_MAX = 20


def test_fuzz_grpc_port_survives_hostile_calls_on_every_rpc(tmp_path: Path) -> None:
    print(f"gRPC fuzz seed {SEED} (replay: python -m orbitmq.bench fuzz-grpc --seed {SEED} --calls {CALLS})")
    conf = tmp_path / "standalone.conf"
    conf.write_text(f"maxMessageSize={MAX_MESSAGE_SIZE}\n")
    server = start_standalone(tmp_path, "-c", str(conf))
    broker_addr = f"127.0.0.1:{server.extra_ports[0]}"
    grpc_addr = f"127.0.0.1:{server.extra_ports[1]}"
    try:
        rng = random.Random(SEED)
        seeds = [rng.randbytes(rng.randint(1, 4096)) for _ in range(32)]
        asyncio.run(_fuzz_run.seed_messages(broker_addr, SEED_TOPIC, seeds))
        log_bytes_before = server.log_path.stat().st_size

        drawn = _fuzz_grpc.requests(CALLS, SEED, MAX_MESSAGE_SIZE, max_receive_bytes(MAX_MESSAGE_SIZE))
        assert {request.rpc for request in drawn} == set(_fuzz_grpc.RPCS)
        assert {"drawn", "mutated", "foreign", "oversized", "large-body", "stream"} <= {r.kind for r in drawn}

        stats = asyncio.run(_fuzz_grpc.fuzz(drawn, grpc_addr, SEED_TOPIC))
        print(
            f"{stats.calls} calls in {stats.seconds:.1f} s ({stats.calls_per_s:,.0f}/s), gRPC {dict(stats.grpc_codes)},"
            f" in-band {dict(stats.in_band_codes)}, prober {stats.probes} probes, slowest {stats.probe_max_ms:.0f} ms"
        )
        assert stats.calls == CALLS
        assert stats.server_errors == 0, dict(stats.server_error_details)
        assert stats.probes >= 2 and not stats.probe_failures, stats.probe_failures[:5]
        # Malformed bodies are refused in-band, oversized ones by grpc from their length prefix.
        assert stats.in_band_codes["BAD_REQUEST"] > 0
        assert stats.grpc_codes["RESOURCE_EXHAUSTED"] > 0
        assert stats.in_band_codes["MESSAGE_BODY_TOO_LARGE"] > 0
        # Every refusal has its own code: none falls through to INTERNAL_SERVER_ERROR.
        assert stats.in_band_codes["INTERNAL_SERVER_ERROR"] == 0, dict(stats.in_band_codes)

        log_growth = server.log_path.stat().st_size - log_bytes_before
        assert log_growth < LOG_BYTES_PER_CALL_MAX * CALLS, log_growth
        exceptions = _fuzz_run.server_exceptions(server.log_path.read_text(errors="replace"))
        assert not exceptions, (exceptions, server.log()[-3000:])
        assert asyncio.run(_fuzz_run.read_back(broker_addr, SEED_TOPIC)) == seeds
    finally:
        server.kill()


def test_proxy_send_with_a_separator_in_a_property_answers_bad_request(tmp_path: Path) -> None:
    """Found by the gRPC fuzzer: \\x01/\\x02 in a message id or trace context raised at encoding."""
    import grpc

    from orbitmq.proxy._pb import definition_pb2 as pb
    from orbitmq.proxy._pb import service_pb2 as spb
    from orbitmq.proxy._pb import service_pb2_grpc as spb_grpc

    server = start_standalone(tmp_path)
    grpc_addr = f"127.0.0.1:{server.extra_ports[1]}"
    metadata = (("x-mq-client-id", "host@1@0@test"), ("x-mq-client-version", "5.1.2"))

    async def send(message_id: str, trace_context: str) -> pb.Status:
        async with grpc.aio.insecure_channel(grpc_addr) as channel:
            stub = spb_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
            message = pb.Message(
                topic=pb.Resource(name="SeparatorTopic"),
                body=b"x",
                system_properties=pb.SystemProperties(
                    message_id=message_id, body_encoding=pb.IDENTITY, trace_context=trace_context
                ),
            )
            answer = await stub.SendMessage(spb.SendMessageRequest(messages=[message]), metadata=metadata)
            return answer.status

    try:
        assert asyncio.run(send("01ID\x01X", "")).code == pb.ILLEGAL_MESSAGE_ID
        assert asyncio.run(send("01ID", "trace\x02x")).code == pb.BAD_REQUEST
        assert asyncio.run(send("01ID", "trace")).code == pb.OK
        assert not _fuzz_run.server_exceptions(server.log_path.read_text(errors="replace"))
    finally:
        server.kill()
