"""docker/compose.yml runs the same broker as `make broker-up`: every fixed setting of the jar broker's
server.properties has the same value in the compose file's KAFKA_* environment, and the port is
published on 127.0.0.1 only. (Docker is not needed: the file is read as text, without a YAML parser.)"""

import re
from pathlib import Path

from tests.support.localbroker import _SERVER_PROPERTIES

COMPOSE = Path(__file__).resolve().parents[2] / "docker" / "compose.yml"


def test_compose_broker_has_the_jar_brokers_settings():
    text = COMPOSE.read_text()
    env = {m[1]: m[2].strip().strip('"') for m in re.finditer(r"^\s+(KAFKA_[A-Z_]+): (.*)$", text, re.M)}
    fixed = [line.split("=", 1) for line in _SERVER_PROPERTIES.splitlines() if "{" not in line]
    assert len(fixed) > 10
    for key, value in fixed:
        assert env.get("KAFKA_" + key.upper().replace(".", "_")) == value, key


def test_compose_publishes_the_port_on_loopback_only():
    ports = re.findall(r'^\s+- "(.*:9092)"$', COMPOSE.read_text(), re.M)
    assert ports == ["127.0.0.1:${KAFKA_PORT:-9092}:9092"]
