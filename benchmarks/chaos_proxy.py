"""A fault-injecting HTTP proxy between the operator and the API server, for benchmarks.chaos.

The operator talks plain HTTP to this proxy on loopback; the proxy forwards every request to the
API server in the kubeconfig (itself on loopback, the local cluster's) with that kubeconfig's
credentials, and while faults are on it disturbs a share of the answers:

- refused before they reach the API server: 503, 500, or 429 with a Retry-After;
- lost after the API server applied them: the write happened, the operator gets a 500 or a reset
  connection instead of the answer (the worst case: it must not do the thing twice);
- connections reset before anything is sent;
- answers delayed by up to two seconds;
- watch streams cut after a few seconds.

Bounded: faults stop after `--max-faults`, and only while switched on (`POST /_chaos/on`,
`/_chaos/off`; `GET /_chaos/stats` counts what was done). It binds to loopback only and refuses to
forward anywhere but a loopback API server.

    python -m benchmarks.chaos_proxy --kubeconfig .cache/cluster/kubeconfig --rate 0.1 --seed 7
    # prints "listening on http://127.0.0.1:PORT", then serves until killed
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import random
import time
import urllib.parse
from collections import Counter
from pathlib import Path

import aiohttp
from aiohttp import web
from grpo_operator.k8s.credentials import Credentials

HOP_BY_HOP = {"host", "connection", "content-length", "transfer-encoding", "keep-alive", "authorization"}
FAULTS = (
    "refuse_503",
    "refuse_500",
    "throttle_429",
    "reset_before",
    "lose_answer_500",
    "reset_after",
    "delay",
)
WEIGHTS = (3, 1, 2, 2, 2, 1, 3)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class Chaos:
    def __init__(self, credentials: Credentials, rate: float, max_faults: int, seed: int) -> None:
        upstream = urllib.parse.urlsplit(credentials.server)
        if not _loopback(upstream.hostname or ""):
            raise SystemExit(
                f"refusing to proxy to {credentials.server}: the chaos proxy is for a loopback cluster"
            )
        self.credentials = credentials
        self.rate = rate
        self.max_faults = max_faults
        self.rng = random.Random(seed)
        self.on = False
        self.stats: Counter[str] = Counter()
        self.session: aiohttp.ClientSession | None = None

    def _fault(self, watch: bool) -> str | None:
        if not self.on or sum(v for k, v in self.stats.items() if k in FAULTS) >= self.max_faults:
            return None
        if watch:
            return None  # watches are cut instead (below)
        if self.rng.random() >= self.rate:
            return None
        return self.rng.choices(FAULTS, WEIGHTS)[0]

    async def control(self, request: web.Request) -> web.StreamResponse:
        action = request.match_info["action"]
        if action == "on":
            self.on = True
        elif action == "off":
            self.on = False
        return web.json_response({"on": self.on, "stats": dict(self.stats)})

    async def forward(self, request: web.Request) -> web.StreamResponse:
        watch = request.query.get("watch") in ("true", "1")
        fault = self._fault(watch)
        self.stats["requests"] += 1
        if fault:
            self.stats[fault] += 1
        if fault == "refuse_503":
            return _status(
                503, "ServiceUnavailable", "chaos: the API server is not available", retry_after="1"
            )
        if fault == "refuse_500":
            return _status(500, "InternalError", "chaos: an internal error")
        if fault == "throttle_429":
            return _status(429, "TooManyRequests", "chaos: too many requests", retry_after="1")
        if fault == "reset_before":
            return _hang_up(request)
        if fault == "delay":
            await asyncio.sleep(self.rng.uniform(0.2, 2.0))
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        if self.credentials.authorization:
            headers["Authorization"] = self.credentials.authorization
        assert self.session is not None
        url = self.credentials.server.rstrip("/") + request.rel_url.raw_path_qs
        timeout = aiohttp.ClientTimeout(total=None if watch else 60, sock_read=None if watch else 60)
        async with self.session.request(
            request.method, url, data=body or None, headers=headers, timeout=timeout
        ) as upstream:
            if watch:
                return await self._stream(request, upstream)
            payload = await upstream.read()
            # The API server has done the request by now.
            if fault == "lose_answer_500":
                return _status(500, "InternalError", "chaos: the answer was lost")
            if fault == "reset_after":
                return _hang_up(request)
            return web.Response(
                status=upstream.status,
                body=payload,
                headers={k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP},
            )

    async def _stream(self, request: web.Request, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status)
        content_type = upstream.headers.get("Content-Type")
        if content_type:
            response.headers["Content-Type"] = content_type
        await response.prepare(request)
        cut_at = time.monotonic() + self.rng.uniform(3, 30) if self.on else float("inf")
        while True:
            left = cut_at - time.monotonic()
            if left <= 0:
                self.stats["watch_cut"] += 1
                return _hang_up(request)
            try:
                chunk = await asyncio.wait_for(upstream.content.readany(), timeout=min(left, 5.0))
            except TimeoutError:
                if self.on and cut_at == float("inf"):
                    cut_at = time.monotonic() + self.rng.uniform(3, 30)
                continue
            if not chunk:
                break
            await response.write(chunk)
        await response.write_eof()
        return response


def _status(code: int, reason: str, message: str, retry_after: str | None = None) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }
    headers = {"Retry-After": retry_after} if retry_after else {}
    return web.Response(status=code, text=json.dumps(body), content_type="application/json", headers=headers)


def _hang_up(request: web.Request) -> web.StreamResponse:
    if request.transport is not None:
        request.transport.close()
    return web.Response(status=500)


async def serve(args: argparse.Namespace) -> None:
    os.environ["KUBECONFIG"] = str(args.kubeconfig)
    chaos = Chaos(Credentials.from_environment(), args.rate, args.max_faults, args.seed)
    ssl = chaos.credentials.ssl if chaos.credentials.ssl is not None else True
    chaos.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ssl, limit=256))
    app = web.Application(client_max_size=16 * 2**20)
    app.router.add_route("*", "/_chaos/{action}", chaos.control)
    app.router.add_route("*", "/{tail:.*}", chaos.forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, _, port = args.listen.rpartition(":")
    if not _loopback(host):
        raise SystemExit("the chaos proxy listens on loopback only")
    site = web.TCPSite(runner, host, int(port))
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"listening on http://{host}:{bound}", flush=True)
    await asyncio.Event().wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--kubeconfig", type=Path, required=True, help="the API server and credentials to forward to"
    )
    parser.add_argument("--listen", default="127.0.0.1:0")
    parser.add_argument("--rate", type=float, default=0.1, help="share of requests disturbed while on")
    parser.add_argument("--max-faults", type=int, default=5000, help="no more faults after this many")
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args()
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
