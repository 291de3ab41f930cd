"""How requests reach the API server: which proxy, and how many at once.

Both are decided once, at start-up or per client, and both matter most in a burst of new jobs,
where the operator shares the CPU with the API server (docs/benchmarks/operator.md).
"""

from __future__ import annotations

import asyncio
import heapq
import ipaddress
import itertools
import random
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

# Requests in flight at once, and as many pooled connections. A burst of new jobs would otherwise
# open a connection (and a TLS handshake, on both sides) per concurrent request.
MAX_IN_FLIGHT = 32
TIMEOUT_SECONDS = 30
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
"""Answers that say "not now" rather than "no": too many requests, and the server side failing."""


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and full jitter for transient failures.

    A transient failure is a connection error, a timeout or one of RETRY_STATUSES. Without this,
    one lost answer cost a job a whole resync period (and a lost Event was lost for good). The
    bound keeps a reconcile from hanging on an API server that is really down: after `attempts`
    tries or `budget` seconds of waiting the error goes to the caller, which retries the job later.
    """

    attempts: int = 5
    base: float = 0.2
    """The first wait's upper bound in seconds; each retry doubles it."""
    cap: float = 5.0
    """No single wait is longer (a Retry-After above it is cut to it)."""
    budget: float = 15.0
    """Seconds of waiting across all retries of one request."""
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, repr=False)

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (1-based); at least what Retry-After asks."""
        backoff = random.uniform(0, min(self.cap, self.base * 2 ** (retry - 1)))
        if retry_after is not None:
            return min(self.cap, max(backoff, retry_after))
        return backoff


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header in seconds (the API server sends whole seconds); None if absent or a date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def proxy_for(server: str, environ: Mapping[str, str]) -> str | None:
    """The proxy to reach `server` through, from `https_proxy`/`http_proxy` and `no_proxy` as curl
    and kubectl read them (lower case first).

    Looked up once. With aiohttp's `trust_env` this lookup, and a read of ~/.netrc, ran in a worker
    thread for every request.
    """
    url = urllib.parse.urlsplit(server)

    def read(name: str) -> str:
        return environ.get(name) or environ.get(name.upper()) or ""

    proxy = read(f"{url.scheme}_proxy")
    if not proxy:
        return None
    no_proxy = read("no_proxy")
    if no_proxy and (
        # CPython's (undocumented, so absent from typeshed's urllib.request stub).
        urllib.request.proxy_bypass_environment(url.netloc, {"no": no_proxy})  # type: ignore[attr-defined]
        or _in_cidr(url.hostname or "", no_proxy)
    ):
        return None
    return proxy


def _in_cidr(host: str, no_proxy: str) -> bool:
    """Whether an IP address host falls in a CIDR entry of `no_proxy` (`10.96.0.0/12`), which
    kubectl honours and urllib does not."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    for entry in no_proxy.split(","):
        try:
            if "/" in entry and address in ipaddress.ip_network(entry.strip(), strict=False):
                return True
        except ValueError:
            continue
    return False


class Slots:
    """At most `size` requests in flight. Waiting requests marked `first` get the next free slot
    before the others, in arrival order within each class."""

    def __init__(self, size: int) -> None:
        self._free = size
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    async def acquire(self, *, first: bool = False) -> None:
        if self._free and not self._waiting:
            self._free -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (0 if first else 1, next(self._order), turn))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release()  # handed a slot just as we were cancelled: pass it on
            raise

    def release(self) -> None:
        while self._waiting:
            _, _, turn = heapq.heappop(self._waiting)
            if not turn.done():  # skip requests cancelled while waiting
                turn.set_result(None)
                return
        self._free += 1
