"""The Spark source and sink against a standalone with ACL: credentials as options, never shown.

A write and a read with ``accessKey``/``secretKey`` round-trip rows; a read without them fails
with the broker's ACL answer; the query plan and the options' repr never contain the secret.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.acl.conftest import create_topic_signed, start_acl_standalone
from tests.support.processes import ServerProcess

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SECRET = "spark-secret-value"
ACCOUNTS = f"""accounts:
  - accessKey: sparkadmin
    secretKey: sparkadminsecret
    admin: true
  - accessKey: sparkuser
    secretKey: {SECRET}
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""


@pytest.fixture(scope="module")
def acl_orbit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_acl_standalone(tmp_path_factory.mktemp("spark-acl"), ACCOUNTS)
    try:
        create_topic_signed(proc.addr, "SparkAcl", "sparkadmin", "sparkadminsecret", queues=2)
        yield proc
    finally:
        proc.kill()


def test_spark_with_credentials_writes_and_reads_and_hides_the_secret(
    spark: Any, acl_orbit: ServerProcess, tmp_path: Path
) -> None:
    options = {
        "namesrvAddr": acl_orbit.addr,
        "topic": "SparkAcl",
        "accessKey": "sparkuser",
        "secretKey": SECRET,
    }
    rows = spark.createDataFrame([(f"row {i}".encode(),) for i in range(20)], "body binary")
    rows.write.format("orbitmq").options(**options).mode("append").save()
    frame = spark.read.format("orbitmq").options(**options).load()
    assert sorted(bytes(row.body) for row in frame.collect()) == sorted(
        f"row {i}".encode() for i in range(20)
    )
    plan = frame._jdf.queryExecution().toString()
    assert "BatchScan orbitmq" in plan and SECRET not in plan
    assert SECRET not in (acl_orbit.log())


def test_spark_without_credentials_is_refused_by_the_broker(spark: Any, acl_orbit: ServerProcess) -> None:
    frame = spark.read.format("orbitmq").options(namesrvAddr=acl_orbit.addr, topic="SparkAcl").load()
    with pytest.raises(Exception, match="No accessKey is configured"):
        frame.collect()
