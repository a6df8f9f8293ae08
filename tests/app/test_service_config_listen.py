"""``listen`` in the serve config: a port over 65535 is refused, naming the field — the
kernel would take it modulo 65536 and the service would listen on another port than the one
its log and its users name (99999 became 34463)."""

from __future__ import annotations

import pytest

from fleetwarden.formats.errors import FormatError
from fleetwarden.wiring.service_config import service_config_from


@pytest.mark.parametrize("port", ["65536", "99999"])
def test_a_port_over_65535_is_refused(port: str):
    with pytest.raises(FormatError, match=rf"svc.yaml: listen: port {port} is over 65535"):
        service_config_from({"listen": f"127.0.0.1:{port}"}, source="svc.yaml")


def test_ports_up_to_65535_are_read():
    cfg = service_config_from({"listen": "127.0.0.1:65535"}, source="svc.yaml")
    assert (cfg.host, cfg.port) == ("127.0.0.1", 65535)
    assert service_config_from({}, source="svc.yaml").port == 8080
