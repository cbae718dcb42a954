"""Certificates for a TLS test broker, made with openssl: a CA, the broker's certificate (for 127.0.0.1)
and a client's, as the files each side reads — PEM for the broker (Kafka's PEM key store and trust
store) and the CA, a PKCS12 key store for the client (librdkafka and Java both read it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import attrs

CLIENT_CN = "eos-tls-client"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=cwd)


@attrs.frozen
class Certificates:
    home: Path
    #: the client key store's password
    password: str

    @property
    def ca(self) -> Path:
        return self.home / "ca.pem"

    @property
    def broker_pem(self) -> Path:
        """The broker's private key and certificate in one PEM file (Kafka's `ssl.keystore.type=PEM`)."""
        return self.home / "broker.pem"

    @property
    def client_p12(self) -> Path:
        return self.home / "client.p12"

    @property
    def client_principal(self) -> str:
        return f"User:CN={CLIENT_CN}"


def make(home: Path, password: str) -> Certificates:
    home.mkdir(parents=True, exist_ok=True)
    days = "2"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", days, "-subj", "/CN=eos-test-ca", cwd=home)  # fmt: skip
    (home / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, cn, ext in (("broker", "localhost", ["-extfile", "san.ext"]), ("client", CLIENT_CN, [])):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/CN={cn}", cwd=home)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", days, *ext, cwd=home)  # fmt: skip
    # Kafka's PEM key store wants a PKCS#8 key ahead of the certificate chain
    _openssl("pkcs8", "-topk8", "-nocrypt", "-in", "broker.key", "-out", "broker.pk8", cwd=home)
    (home / "broker.pem").write_text((home / "broker.pk8").read_text() + (home / "broker.crt").read_text())
    _openssl("pkcs12", "-export", "-in", "client.crt", "-inkey", "client.key", "-certfile", "ca.pem",
             "-name", "client", "-out", "client.p12", "-passout", f"pass:{password}", cwd=home)  # fmt: skip
    return Certificates(home, password)
