"""A loopback OpenID Connect identity provider for tests: an RSA key made by openssl, its JWKS in a file a
Kafka broker validates tokens against (`file://` URL), and a token endpoint (the client credentials
grant, as librdkafka's `sasl.oauthbearer.method=oidc` and Java's OAuthBearerLoginCallbackHandler use
it) that signs real RS256 JWTs. Every grant and refusal is counted, so a test can prove its clients
really authenticated here."""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

KEY_ID = "eos-test-key"
ISSUER = "eos-test-idp"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class OidcProvider:
    def __init__(self, home: Path, clients: dict[str, str], lifetime_s: int = 3600) -> None:
        self.home = home
        #: client id -> secret
        self.clients = dict(clients)
        self.lifetime_s = lifetime_s
        self.granted: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        #: the User-Agent of each granted request (librdkafka's curl, the Java client's HTTP client)
        self.agents: Counter[str] = Counter()
        self._server: ThreadingHTTPServer | None = None
        self._key = home / "idp-key.pem"

    @property
    def jwks_path(self) -> Path:
        return self.home / "jwks.json"

    @property
    def jwks_url(self) -> str:
        return self.jwks_path.as_uri()

    @property
    def token_url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/token"

    def start(self) -> OidcProvider:
        self.home.mkdir(parents=True, exist_ok=True)
        subprocess.run(["openssl", "genrsa", "-out", str(self._key), "2048"], check=True, capture_output=True)
        modulus = subprocess.run(
            ["openssl", "rsa", "-in", str(self._key), "-noout", "-modulus"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        n = bytes.fromhex(modulus.split("=", 1)[1])
        key = {"kty": "RSA", "kid": KEY_ID, "use": "sig", "alg": "RS256", "n": _b64(n), "e": "AQAB"}
        self.jwks_path.write_text(json.dumps({"keys": [key]}))
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                client, secret = form.get("client_id", [""])[0], form.get("client_secret", [""])[0]
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Basic "):
                    pair = base64.b64decode(auth[6:]).decode()
                    client, secret = (urllib.parse.unquote(p) for p in pair.split(":", 1))
                if form.get("grant_type") != ["client_credentials"] or provider.clients.get(client) != secret:
                    provider.refused[client] += 1
                    self._reply(401, {"error": "invalid_client"})
                    return
                provider.granted[client] += 1
                provider.agents[self.headers.get("User-Agent", "")] += 1
                scope = form.get("scope", [""])[0]
                token = provider.token(client, scope)
                self._reply(
                    200, {"access_token": token, "token_type": "Bearer", "expires_in": provider.lifetime_s}
                )

            def _reply(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="oidc-provider", daemon=True).start()
        return self

    def token(self, subject: str, scope: str = "") -> str:
        """An RS256 JWT for `subject`, signed with the provider's key."""
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": KEY_ID}
        claims = {"sub": subject, "iss": ISSUER, "iat": now, "exp": now + self.lifetime_s, "scope": scope}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = subprocess.run(
            ["openssl", "dgst", "-sha256", "-sign", str(self._key)],
            input=signing_input.encode(),
            check=True,
            capture_output=True,
        ).stdout
        return f"{signing_input}.{_b64(signature)}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
