"""The mesh over TLS, as docs/security.md sets it up across hosts: a NATS server with a certificate
from a private CA, services connecting with `tls://` URLs and trusting that CA through
SSL_CERT_FILE. The CA and certificates are made on the spot. Without the CA the connection is
refused (the certificate does not verify). A client given nats:// still upgrades to TLS when the
server requires it (nats-py reads `tls_required` from the server's INFO), so nothing goes in clear."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from runtime.nats_server import NatsServer
from shared.bus import Bus
from shared.bus.errors import ConnectFailed
from shared.bus.lean_link import LeanLink, LeanMsg
from shared.protocol import messages as m


def _certificate(subject: str, key, issuer: x509.Name | None = None, issuer_key=None, ca: bool = False):
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key or key, hashes.SHA256())


def _pem(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("autellix test CA", ca_key, ca=True)
    server = _certificate("nats", server_key, issuer=ca.subject, issuer_key=ca_key)
    (folder / "ca.pem").write_bytes(_pem(ca))
    (folder / "server.pem").write_bytes(_pem(server))
    (folder / "server.key").write_bytes(server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    other_key = ec.generate_private_key(ec.SECP256R1())
    (folder / "other-ca.pem").write_bytes(_pem(_certificate("another CA", other_key, ca=True)))
    return folder


@pytest.fixture(scope="module")
def tls_server(tls_files, tmp_path_factory):
    server = NatsServer(tmp_path_factory.mktemp("nats-tls"), tls_cert=tls_files / "server.pem",
                        tls_key=tls_files / "server.key").start()
    yield server
    server.stop()


async def test_a_service_trusting_the_ca_talks_over_tls(tls_server, tls_files, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_files / "ca.pem"))
    assert tls_server.url.startswith("tls://")
    bus = await Bus.connect(tls_server.url, service="tls-probe", connect_timeout_s=5.0)
    try:
        await bus.ensure_streams()
        assert await bus.publish_event(m.SessionOpened(session_id="s-tls", tenant="acme")) > 0  # stored, acked
    finally:
        await bus.close()


async def test_a_server_certificate_from_an_unknown_ca_is_refused(tls_server, tls_files, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_files / "other-ca.pem"))
    with pytest.raises(ConnectFailed):
        await Bus.connect(tls_server.url, service="tls-probe", connect_timeout_s=2.0)


async def test_the_lean_pull_link_talks_over_tls_too(tls_server, tls_files, monkeypatch):
    """The process table's completions link (shared/bus/lean_link.py) has a socket of its own: it
    upgrades the same way, for tls:// and for a nats:// URL to a server that requires TLS."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_files / "ca.pem"))
    bus = await Bus.connect(tls_server.url, service="tls-probe", connect_timeout_s=5.0)
    try:
        for url in (tls_server.url, tls_server.url.replace("tls://", "nats://", 1)):
            got: list[LeanMsg] = []
            link = await LeanLink.open(url, "tls-probe", on_msg=got.append)
            try:
                await bus.nc.publish(link.inbox, b"over tls")
                for _ in range(100):
                    if got:
                        break
                    await asyncio.sleep(0.02)
                assert [msg.data for msg in got] == [b"over tls"]
            finally:
                await link.close()
    finally:
        await bus.close()


async def test_the_lean_link_refuses_a_certificate_from_an_unknown_ca(tls_server, tls_files, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_files / "other-ca.pem"))
    with pytest.raises(ConnectFailed, match="(?i)certificate"):
        await LeanLink.open(tls_server.url, "tls-probe", on_msg=lambda msg: None, connect_timeout_s=2.0)
