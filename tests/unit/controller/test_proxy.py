"""Which proxy the operator's API client goes through, read once from the environment."""

from __future__ import annotations

from collections.abc import Callable

import kopf
import pytest
from grpo_operator.handlers.wiring import with_proxy
from grpo_operator.k8s import proxy_for

SERVER = "https://10.96.0.1:443"


def test_no_proxy_variables_means_a_direct_connection() -> None:
    assert proxy_for(SERVER, {}) is None


@pytest.mark.parametrize("name", ["https_proxy", "HTTPS_PROXY"])
def test_https_proxy_is_used_for_an_https_server(name: str) -> None:
    assert proxy_for(SERVER, {name: "http://proxy:3128"}) == "http://proxy:3128"


def test_lower_case_wins_as_in_curl() -> None:
    env = {"https_proxy": "http://lower:3128", "HTTPS_PROXY": "http://upper:3128"}
    assert proxy_for(SERVER, env) == "http://lower:3128"


def test_http_proxy_does_not_apply_to_an_https_server() -> None:
    assert proxy_for(SERVER, {"http_proxy": "http://proxy:3128"}) is None
    assert proxy_for("http://127.0.0.1:8001", {"http_proxy": "http://proxy:3128"}) == "http://proxy:3128"


@pytest.mark.parametrize(
    "no_proxy",
    [
        "10.96.0.1",
        "*",
        "example.com,10.96.0.1",
        # CIDR entries, which kubectl honours and urllib does not
        "10.96.0.0/12",
        "192.168.0.0/16, 10.0.0.0/8",
    ],
)
@pytest.mark.parametrize("case", [str.lower, str.upper])
def test_no_proxy_bypasses_the_proxy(no_proxy: str, case: Callable[[str], str]) -> None:
    env = {case("https_proxy"): "http://proxy:3128", case("no_proxy"): no_proxy}
    assert proxy_for(SERVER, env) is None


def test_no_proxy_for_other_hosts_keeps_the_proxy() -> None:
    env = {"https_proxy": "http://proxy:3128", "no_proxy": "kubernetes.default.svc,.cluster.local"}
    assert proxy_for(SERVER, env) == "http://proxy:3128"


def test_no_proxy_cidr_elsewhere_keeps_the_proxy() -> None:
    env = {"https_proxy": "http://proxy:3128", "no_proxy": "192.168.0.0/16,not-a-network/99"}
    assert proxy_for(SERVER, env) == "http://proxy:3128"
    assert proxy_for("https://api.example.com", env) == "http://proxy:3128"


def test_kopf_watches_take_the_same_proxy_as_our_calls() -> None:
    info = kopf.ConnectionInfo(server=SERVER, token="t")
    env = {"https_proxy": "http://proxy:3128"}
    proxied = with_proxy(info, env)
    direct = with_proxy(info, {**env, "no_proxy": "10.96.0.0/12"})
    assert proxied is not None
    assert proxied.proxy_url == "http://proxy:3128"
    assert direct is not None
    assert direct.proxy_url is None
    assert with_proxy(None, env) is None
