"""The gRPC port's TLS settings: which modes get TLS, and the starts refused with a reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from orbitmq.errors import ConfigError
from orbitmq.proxy.config import load_proxy_configs
from orbitmq.proxy.tls import grpc_server_credentials
from orbitmq.transport.tls import TlsConfig, TlsMode
from tests.support.certs import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _enforcing(pki: Pki, **changes: object) -> TlsConfig:
    values: dict[str, object] = {
        "server_mode": TlsMode.ENFORCING,
        "server_cert_path": str(pki.server_cert),
        "server_key_path": str(pki.server_key),
        **changes,
    }
    return TlsConfig(**values)  # type: ignore[arg-type]


def test_proxy_tls_only_enforcing_makes_the_grpc_port_tls(pki: Pki) -> None:
    assert grpc_server_credentials(None) is None
    assert grpc_server_credentials(TlsConfig()) is None
    assert grpc_server_credentials(_enforcing(pki, server_mode=TlsMode.PERMISSIVE)) is None
    assert grpc_server_credentials(_enforcing(pki)) is not None
    asking = _enforcing(pki, server_need_client_auth="require", server_trust_cert_path=str(pki.ca))
    assert grpc_server_credentials(asking) is not None


def test_proxy_tls_refuses_to_start_without_what_it_needs(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs tls.server.certPath and tls.server.keyPath"):
        grpc_server_credentials(TlsConfig(server_mode=TlsMode.ENFORCING))
    with pytest.raises(ConfigError, match="tls.server.keyPath .*missing.key"):
        grpc_server_credentials(_enforcing(pki, server_key_path=str(tmp_path / "missing.key")))
    with pytest.raises(ConfigError, match="needs tls.server.trustCertPath"):
        grpc_server_credentials(_enforcing(pki, server_need_client_auth="optional"))
    with pytest.raises(ConfigError, match="cannot read an encrypted key"):
        grpc_server_credentials(_enforcing(pki, server_key_password="secret"))
    key = serialization.load_pem_private_key(pki.server_key.read_bytes(), password=None)
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    with pytest.raises(ConfigError, match="needs an unencrypted PEM key"):
        grpc_server_credentials(_enforcing(pki, server_key_path=str(encrypted)))


def test_proxy_tls_cluster_mode_reads_the_tls_keys_of_its_proxy_conf(pki: Pki, tmp_path: Path) -> None:
    conf = tmp_path / "proxy.conf"
    conf.write_text(
        "namesrvAddr=127.0.0.1:9876\n"
        "tls.server.mode=enforcing\n"
        f"tls.server.certPath={pki.server_cert}\n"
        f"tls.server.keyPath={pki.server_key}\n"
        "tls.enable=true\n"
    )
    config, tls = load_proxy_configs(conf)
    assert list(config.namesrv_addr) == ["127.0.0.1:9876"]
    assert (tls.server_mode, tls.client_enable) == (TlsMode.ENFORCING, True)
    assert grpc_server_credentials(tls) is not None
    conf.write_text("namesrvAddr=127.0.0.1:9876\ntls.server.mode=sometimes\n")
    with pytest.raises(ConfigError, match="tls.server.mode"):
        load_proxy_configs(conf)
