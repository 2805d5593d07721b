"""plain_acl.yml parsing, writing and the admin edits (pure: text in, text out)."""

from __future__ import annotations

import pytest

from orbitmq.acl.accounts import (
    AccountUpdate,
    AclDocument,
    DataVersion,
    dump_document,
    parse_document,
    remove_account,
    replace_global_white,
    upsert_account,
)
from orbitmq.errors import ConfigError

ROCKETMQ_SAMPLE = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 012345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""


def test_accounts_parse_rocketmq_sample_file() -> None:
    document = parse_document(ROCKETMQ_SAMPLE, "plain_acl.yml")
    assert document.global_white_remote_addresses == ("10.10.103.*", "192.168.0.*")
    first, second = document.accounts
    assert (first.access_key, first.secret_key, first.admin) == ("RocketMQ", "12345678", False)
    assert first.white_remote_address is None
    assert first.default_topic_perm == "DENY" and first.default_group_perm == "SUB"
    assert first.topic_perms == ("topicA=DENY", "topicB=PUB|SUB", "topicC=SUB")
    assert first.group_perms == ("groupA=DENY", "groupB=PUB|SUB", "groupC=SUB")
    # Scalars stay the text written: no octal or integer reading of the secret.
    assert second.secret_key == "012345678" and second.admin is True
    assert second.white_remote_address == "192.168.1.*"


def test_accounts_repr_hides_the_secret() -> None:
    document = parse_document(ROCKETMQ_SAMPLE, "plain_acl.yml")
    assert "12345678" not in repr(document)


@pytest.mark.parametrize("text", ["", "# nothing\n", "accounts:\n"])
def test_accounts_empty_file_is_empty_document(text: str) -> None:
    assert parse_document(text, "f.yml") == AclDocument()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("accounts: [\n", "not valid YAML"),
        ("acounts: []\n", "unknown key 'acounts'; did you mean 'accounts'"),
        (
            "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    admn: true\n",
            "did you mean 'admin'",
        ),
        ("accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "longer than 6"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 123456\n", "longer than 6"),
        (
            "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [topicA]\n",
            "name=PERM",
        ),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    admin: maybe\n", "true or false"),
        (
            "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    whiteRemoteAddress: 10.*.0.1\n",
            "after a range",
        ),
        ("globalWhiteRemoteAddresses: [300.1.1.1]\n", "not an IP"),
        ("- just a list\n", "mapping"),
    ],
)
def test_accounts_reject_bad_file_naming_the_problem(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_document(text, "conf/plain_acl.yml")
    assert "conf/plain_acl.yml" in str(caught.value)


def test_accounts_short_key_error_never_quotes_the_secret() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_document("accounts:\n  - accessKey: abc\n    secretKey: s3cr3t-value\n", "f.yml")
    assert "s3cr3t-value" not in str(caught.value)


def test_accounts_dump_then_parse_round_trips() -> None:
    document = parse_document(ROCKETMQ_SAMPLE, "plain_acl.yml")
    document = upsert_account(document, AccountUpdate("newaccount", "newsecret1", admin=False), 1_700)
    assert parse_document(dump_document(document), "again.yml") == document


def test_accounts_upsert_creates_then_updates_only_given_fields() -> None:
    document = upsert_account(
        AclDocument(),
        AccountUpdate("account1", "secret11", default_topic_perm="PUB", topic_perms=("t1=SUB",)),
        1000,
    )
    assert document.data_version == DataVersion(1, 1000)
    created = document.account("account1")
    assert created is not None and created.default_topic_perm == "PUB"
    document = upsert_account(document, AccountUpdate("account1", "secret22", default_group_perm="SUB"), 2000)
    updated = document.account("account1")
    assert updated is not None and document.data_version == DataVersion(2, 2000)
    assert (updated.secret_key, updated.default_topic_perm, updated.default_group_perm) == (
        "secret22",
        "PUB",
        "SUB",
    )
    assert updated.topic_perms == ("t1=SUB",)
    assert len(document.accounts) == 1


@pytest.mark.parametrize(
    ("update", "message"),
    [
        (AccountUpdate("account1", "short"), "longer than 6"),
        (AccountUpdate("account1", "secret11", default_topic_perm="WRITE"), "not DENY, PUB"),
        (AccountUpdate("account1", "secret11", topic_perms=("t1=ALL",)), "not DENY, PUB"),
        (AccountUpdate("account1", "secret11", group_perms=("g1",)), "name=PERM"),
        (AccountUpdate("account1", "secret11", white_remote_address="1.2.3"), "address pattern"),
    ],
)
def test_accounts_upsert_rejects_bad_update(update: AccountUpdate, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        upsert_account(AclDocument(), update, 1)


def test_accounts_remove_and_replace_white_list_bump_version() -> None:
    document = upsert_account(AclDocument(), AccountUpdate("account1", "secret11"), 1)
    assert remove_account(document, "missing1", 2) is None
    removed = remove_account(document, "account1", 2)
    assert removed is not None and removed.accounts == () and removed.data_version == DataVersion(2, 2)
    white = replace_global_white(removed, ["10.0.0.*", " "], 3)
    assert white.global_white_remote_addresses == ("10.0.0.*",) and white.data_version == DataVersion(3, 3)
    with pytest.raises(ConfigError):
        replace_global_white(removed, ["10.0.*.1"], 4)
