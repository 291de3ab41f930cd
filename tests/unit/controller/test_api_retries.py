"""The API client retries what is transient (no answer, 429, 5xx) with bounded backoff, honours
Retry-After, and hands every other error straight back. A real HTTP server on loopback plays the
API server; the waits are recorded instead of slept."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from grpo_operator.k8s import Api, ApiError, Credentials
from grpo_operator.k8s.api import request_kind
from grpo_operator.k8s.transport import RetryPolicy, retry_after_seconds

Answer = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Script:
    """Answers requests in order from a list; the last answer repeats."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.seen: list[str] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(f"{request.method} {request.path}")
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return await answer(request)


def status(code: int, **headers: str) -> Answer:
    body = json.dumps({"kind": "Status", "code": code, "reason": "Why", "message": f"answer {code}"})

    async def answer(_: web.Request) -> web.StreamResponse:
        return web.Response(status=code, text=body, content_type="application/json", headers=headers)

    return answer


def ok(payload: dict[str, Any]) -> Answer:
    async def answer(_: web.Request) -> web.StreamResponse:
        return web.json_response(payload)

    return answer


async def hang_up(request: web.Request) -> web.StreamResponse:
    """Close the connection without an answer, as a crashing API server or a proxy does."""
    assert request.transport is not None
    request.transport.close()
    return web.Response()


@pytest.fixture
async def server() -> AsyncIterator[tuple[Script, Callable[[RetryPolicy], Api], list[float]]]:
    script = Script(ok({}))
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", script.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    waits: list[float] = []
    apis: list[Api] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    def make(policy: RetryPolicy) -> Api:
        api = Api(
            Credentials(f"http://127.0.0.1:{port}", None, lambda: None),
            "test",
            retry=RetryPolicy(
                attempts=policy.attempts, base=policy.base, cap=policy.cap, budget=policy.budget, sleep=record
            ),
        )
        apis.append(api)
        return api

    yield script, make, waits
    for api in apis:
        await api.close()
    await runner.cleanup()


async def test_transient_answers_are_retried_until_one_succeeds(server) -> None:
    script, make, waits = server
    script.answers = [status(503), status(429), status(500), ok({"metadata": {"name": "demo"}})]
    api = make(RetryPolicy())
    assert await api.get_job("ns", "demo") == {"metadata": {"name": "demo"}}
    assert len(script.seen) == 4
    assert len(waits) == 3
    assert all(0 <= w <= 5.0 for w in waits)


async def test_a_lost_connection_is_retried(server) -> None:
    script, make, waits = server
    script.answers = [hang_up, hang_up, ok({"metadata": {"name": "demo"}})]
    api = make(RetryPolicy())
    assert await api.get_job("ns", "demo") == {"metadata": {"name": "demo"}}
    assert len(script.seen) == 3
    # aiohttp itself repeats a request once when a reused connection turns out closed.
    assert 1 <= len(waits) <= 2


async def test_retry_after_is_honoured_up_to_the_cap(server) -> None:
    script, make, waits = server
    script.answers = [status(429, **{"Retry-After": "3"}), status(429, **{"Retry-After": "60"}), ok({})]
    api = make(RetryPolicy(base=0.01, cap=10.0, budget=30.0))
    await api.patch_job_status("ns", "demo", {"phase": "Running"})
    assert waits[0] >= 3.0
    assert waits[1] == 10.0


async def test_retries_are_bounded_in_count(server) -> None:
    script, make, waits = server
    script.answers = [status(503)]
    api = make(RetryPolicy(attempts=4))
    with pytest.raises(ApiError) as error:
        await api.get_rayjob("ns", "demo-1")
    assert error.value.code == 503
    assert len(script.seen) == 4
    assert len(waits) == 3


async def test_retries_are_bounded_in_time(server) -> None:
    script, make, waits = server
    script.answers = [status(429, **{"Retry-After": "4"})]
    api = make(RetryPolicy(attempts=100, cap=5.0, budget=10.0))
    with pytest.raises(ApiError):
        await api.get_job("ns", "demo")
    assert sum(waits) <= 10.0
    assert len(script.seen) == 3  # two waits of 4 s fit the budget, a third does not


@pytest.mark.parametrize("code", [400, 403, 404, 409, 422])
async def test_answers_that_mean_no_are_not_retried(server, code: int) -> None:
    script, make, waits = server
    script.answers = [status(code)]
    api = make(RetryPolicy())
    with pytest.raises(ApiError) as error:
        await api.apply(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"}}
        )
    assert error.value.code == code
    assert len(script.seen) == 1
    assert waits == []


async def test_an_event_survives_a_lost_connection(server) -> None:
    script, make, _ = server
    script.answers = [hang_up, ok({})]
    api = make(RetryPolicy())
    job = {"apiVersion": "grpo.dev/v1alpha1", "kind": "GRPOJob", "metadata": {"name": "d", "namespace": "n"}}
    await api.post_event(job, "Normal", "Created", "created Ray job d-1")
    assert script.seen == ["POST /api/v1/namespaces/n/events"] * 2


@pytest.mark.parametrize(("header", "seconds"), [("2", 2.0), ("0", 0.0), (None, None), ("soon", None)])
def test_retry_after_header(header: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(header) == seconds


def test_backoff_grows_and_stays_under_the_cap() -> None:
    policy = RetryPolicy(base=0.2, cap=5.0)
    for retry in range(1, 12):
        for _ in range(20):
            assert 0 <= policy.delay(retry) <= min(5.0, 0.2 * 2 ** (retry - 1))


async def test_a_replica_that_is_not_the_leader_sends_no_write(server) -> None:
    from grpo_operator.k8s import NotLeaderError

    script, make, _ = server
    script.answers = [ok({"metadata": {"name": "demo"}})]
    api = make(RetryPolicy())
    leading = False
    api.guard = lambda: leading
    with pytest.raises(NotLeaderError):
        await api.patch_job_status("ns", "demo", {"phase": "Running"})
    with pytest.raises(NotLeaderError):
        await api.delete_rayjob("ns", "demo-1")
    assert script.seen == [], "nothing left the process"
    assert await api.get_job("ns", "demo") is not None, "reads are fine"
    leading = True
    await api.patch_job_status("ns", "demo", {"phase": "Running"})
    assert script.seen[-1] == "PATCH /apis/grpo.dev/v1alpha1/namespaces/ns/grpojobs/demo/status"


async def test_every_try_is_counted_by_verb_resource_and_answer(server) -> None:
    # The operator's request counter (grpo_api_requests_total) sees retries as the API server does.
    script, make, _ = server
    script.answers = [status(503), hang_up, hang_up, ok({"metadata": {"name": "demo"}})]
    api = make(RetryPolicy())
    counted: list[tuple[str, str, int]] = []
    api.observer = lambda verb, resource, code: counted.append((verb, resource, code))
    await api.get_job("ns", "demo")
    script.answers = [ok({})]
    await api.patch_job_status("ns", "demo", {"phase": "Running"})
    assert counted[0] == ("get", "grpojobs", 503)
    assert ("get", "grpojobs", 0) in counted  # the connection that was closed without an answer
    assert counted[-2:] == [("get", "grpojobs", 200), ("patch", "grpojobs/status", 200)]


@pytest.mark.parametrize(
    ("method", "path", "content_type", "expected"),
    [
        (
            "GET",
            "/apis/grpo.dev/v1alpha1/namespaces/ns/grpojobs/demo",
            "application/json",
            ("get", "grpojobs"),
        ),
        ("GET", "/apis/grpo.dev/v1alpha1/grpojobs", "application/json", ("list", "grpojobs")),
        ("GET", "/apis/grpo.dev/v1alpha1/namespaces/ns/grpojobs", "application/json", ("list", "grpojobs")),
        (
            "PATCH",
            "/apis/grpo.dev/v1alpha1/namespaces/ns/grpojobs/demo/status",
            "x",
            ("patch", "grpojobs/status"),
        ),
        ("POST", "/api/v1/namespaces/ns/configmaps", "application/json", ("create", "configmaps")),
        (
            "PATCH",
            "/apis/ray.io/v1/namespaces/ns/rayjobs/demo-1",
            "application/apply-patch+yaml",
            ("apply", "rayjobs"),
        ),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/op",
            "application/json",
            ("update", "leases"),
        ),
        ("DELETE", "/apis/ray.io/v1/namespaces/ns/rayjobs/demo-1", "application/json", ("delete", "rayjobs")),
        (
            "GET",
            "/apis/scheduling.k8s.io/v1/priorityclasses/high",
            "application/json",
            ("get", "priorityclasses"),
        ),
    ],
)
def test_request_kinds_name_no_object(
    method: str, path: str, content_type: str, expected: tuple[str, str]
) -> None:
    assert request_kind(method, path, content_type) == expected


async def test_a_delete_that_saves_first_deletes_only_the_version_without_kuberays_finalizer(server) -> None:
    """KubeRay puts its finalizer back on a RayJob it sees without one: a delete of the version the
    release made is refused (409) when KubeRay got there first, and the release is made again, so
    KubeRay never sees the RayJob being deleted with its finalizer (which would stop the Ray job)."""
    script, make, _ = server
    bodies: list[Any] = []

    def stored(version: str, *finalizers: str) -> Answer:
        async def answer(request: web.Request) -> web.StreamResponse:
            if request.can_read_body:
                bodies.append(await request.json())
            return web.json_response(
                {"metadata": {"name": "demo-1", "resourceVersion": version, "finalizers": list(finalizers)}}
            )

        return answer

    async def conflict(request: web.Request) -> web.StreamResponse:
        bodies.append(await request.json())
        return await status(409)(request)

    kuberay = "ray.io/rayjob-finalizer"
    script.answers = [
        stored("1", kuberay),  # GET
        stored("2"),  # PATCH: released
        conflict,  # DELETE of version 2: KubeRay added its finalizer back (version 3)
        stored("3", kuberay),  # GET
        stored("4"),  # PATCH: released again
        stored("4"),  # DELETE of version 4
    ]
    await make(RetryPolicy()).delete_rayjob("ns", "demo-1", keep_driver=True)
    assert [s.split()[0] for s in script.seen] == ["GET", "PATCH", "DELETE", "GET", "PATCH", "DELETE"]
    deletes = [b for b in bodies if isinstance(b, dict) and b.get("kind") == "DeleteOptions"]
    assert [(d["propagationPolicy"], d["preconditions"]) for d in deletes] == [
        ("Background", {"resourceVersion": "2"}),
        ("Background", {"resourceVersion": "4"}),
    ]
    releases = [b for b in bodies if isinstance(b, list)]
    assert releases[0] == [
        {"op": "test", "path": "/metadata/finalizers/0", "value": kuberay},
        {"op": "remove", "path": "/metadata/finalizers/0"},
    ]
