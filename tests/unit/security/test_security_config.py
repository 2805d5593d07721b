"""ACL and TLS settings: broker.conf / namesrv.conf keys, client options, CLI flags and environment."""

from __future__ import annotations

import argparse

import pytest

from orbitmq.broker.config import load_broker_config
from orbitmq.cli._security import add_security_arguments, security_options
from orbitmq.client.config import ClientConfig
from orbitmq.errors import ConfigError
from orbitmq.namesrv.config import load_namesrv_config
from orbitmq.transport.tls import TlsMode

STORE = {"storePathRootDir": "/tmp/orbitmq-never-opened"}


def test_broker_config_reads_acl_and_tls_keys() -> None:
    broker, _ = load_broker_config(
        None,
        {**STORE, "aclEnable": "true", "aclFile": "/etc/orbitmq/plain_acl.yml",
         "innerClientAuthenticationCredentials": '{"accessKey": "brokerkey1", "secretKey": "brokersecret1"}',
         "tls.server.mode": "permissive", "tls.server.certPath": "/c.pem", "tls.server.keyPath": "/k.pem",
         "useTLS": "true"},
    )  # fmt: skip
    assert broker.acl_enable and broker.acl_file == "/etc/orbitmq/plain_acl.yml"
    assert broker.inner_credentials is not None and broker.inner_credentials.access_key == "brokerkey1"
    assert broker.tls.server_mode is TlsMode.PERMISSIVE and broker.tls.client_enable
    assert "brokersecret1" not in repr(broker)


def test_broker_config_malformed_credentials_never_echo_the_secret() -> None:
    with pytest.raises(ConfigError, match="innerClientAuthenticationCredentials") as caught:
        load_broker_config(
            None, {**STORE, "innerClientAuthenticationCredentials": "brokerkey1:brokersecret1"}
        )
    assert "brokersecret1" not in str(caught.value)


def test_namesrv_config_acl_needs_a_file_and_reads_tls() -> None:
    with pytest.raises(ConfigError, match="needs 'aclFile'"):
        load_namesrv_config(None, {"aclEnable": "true"})
    config = load_namesrv_config(
        None, {"aclEnable": "true", "aclFile": "/a.yml", "tls.server.need.client.auth": "none"}
    )
    assert config.acl_enable and config.tls.server_mode is TlsMode.DISABLED


def test_client_config_keys_go_together_and_the_secret_stays_hidden() -> None:
    with pytest.raises(ConfigError, match="go together"):
        ClientConfig("127.0.0.1:9876", access_key="onlykey1")
    config = ClientConfig("127.0.0.1:9876", access_key="clientkey", secret_key="clientsecret")
    assert config.credentials is not None and "clientsecret" not in repr(config)
    assert ClientConfig("127.0.0.1:9876").ssl_context() is None


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_security_arguments(parser)
    return parser.parse_args(list(argv))


def test_cli_security_options_prefer_flags_then_environment() -> None:
    environ = {"ORBITMQ_ACCESS_KEY": "envkey12", "ORBITMQ_SECRET_KEY": "envsecret"}
    assert security_options(parse(), environ) == {"access_key": "envkey12", "secret_key": "envsecret"}
    flags = parse(
        "--access-key", "flagkey1", "--secret-key", "flagsecret", "--tls", "--tls-trust-cert", "/ca.pem"
    )
    assert security_options(flags, environ) == {
        "access_key": "flagkey1", "secret_key": "flagsecret", "tls_enable": True, "tls_auth_server": True,
        "tls_trust_cert_path": "/ca.pem",
    }  # fmt: skip
    assert security_options(parse(), {}) == {}
    with pytest.raises(ConfigError, match="both an access key and a secret key"):
        security_options(parse("--access-key", "flagkey1"), {})
