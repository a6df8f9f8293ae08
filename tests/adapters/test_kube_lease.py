"""The Lease adapter at its edge: MicroTime both ways, the object it PUTs (resourceVersion for
compare-and-swap), and every HTTP answer mapped to the port's errors (409 → Conflict, 404 on
read → no lease) or to an ApiError naming the bad field."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.lease import KubeLeaseStore, format_micro_time, parse_micro_time
from fleetwarden.core.clusters import ClusterEndpoint
from fleetwarden.core.leadership import LeaseRecord
from fleetwarden.ports.kube import ApiError, Conflict, ObjectApi, Transient

PATH = "/apis/coordination.k8s.io/v1/namespaces/fw/leases/leader"
T = datetime(2026, 12, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-01T02:03:04.000005Z", T),
        ("2026-12-01T02:03:04.000005123Z", T),  # nanoseconds: dropped
        ("2026-12-01T03:03:04.000005+01:00", T),
        ("2026-12-01T02:03:04Z", T.replace(microsecond=0)),
        ("2026-12-01T02:03:04.5Z", T.replace(microsecond=500000)),
    ],
)
def test_micro_time_reads_any_rfc3339(text, expected):
    assert parse_micro_time(text) == expected


def test_micro_time_is_written_in_utc_with_six_digits():
    assert format_micro_time(T) == "2026-12-01T02:03:04.000005Z"
    cet = T.astimezone(timezone(timedelta(hours=1)))
    assert format_micro_time(cet) == "2026-12-01T02:03:04.000005Z"
    with pytest.raises(ValueError):
        format_micro_time(T.replace(tzinfo=None))
    with pytest.raises(ValueError):
        parse_micro_time("2026-12-01T02:03:04")


@given(st.datetimes(timezones=st.just(UTC)))
def test_micro_time_round_trips(value):
    assert parse_micro_time(format_micro_time(value)) == value


def lease_object(version: str = "42", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "leader", "namespace": "fw", "resourceVersion": version},
        "spec": spec,
    }


def store_answering(handle) -> tuple[KubeLeaseStore, KubeClient]:
    client = KubeClient(
        ClusterEndpoint("mgmt", "https://api.invalid"), transport=httpx.MockTransport(handle)
    )
    api: ObjectApi = client
    return KubeLeaseStore(api, namespace="fw", name="leader"), client


async def test_read_decodes_the_spec_and_a_missing_lease_is_none():
    answers = iter(
        [
            httpx.Response(
                200,
                json=lease_object(
                    holderIdentity="pod-a",
                    leaseDurationSeconds=15,
                    acquireTime="2026-12-01T02:03:04.000005Z",
                    renewTime="2026-12-01T02:03:04.000005Z",
                    leaseTransitions=3,
                ),
            ),
            httpx.Response(404, json={"message": "leases.coordination.k8s.io not found"}),
        ]
    )
    store, client = store_answering(lambda request: next(answers))
    async with client:
        assert await store.read() == (LeaseRecord("pod-a", 15, T, T, 3), "42")
        assert await store.read() is None
    assert store.where == "mgmt/fw/leader"


async def test_update_puts_the_whole_lease_over_its_version_and_409_is_conflict():
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            return httpx.Response(
                200, json=lease_object("43", **json.loads(request.content)["spec"])
            )
        return httpx.Response(409, json={"message": "the object has been modified"})

    store, client = store_answering(handle)
    record = LeaseRecord("pod-b", 15, T, T, 4)
    async with client:
        assert await store.update(record, "42") == "43"
        with pytest.raises(Conflict):
            await store.update(record, "42")
    sent = json.loads(seen[0].content)
    assert (seen[0].method, seen[0].url.path) == ("PUT", PATH)
    assert sent["metadata"]["resourceVersion"] == "42"
    assert sent["spec"] == {
        "holderIdentity": "pod-b",
        "leaseDurationSeconds": 15,
        "leaseTransitions": 4,
        "acquireTime": "2026-12-01T02:03:04.000005Z",
        "renewTime": "2026-12-01T02:03:04.000005Z",
    }


async def test_create_posts_to_the_collection_and_an_existing_lease_is_conflict():
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            return httpx.Response(
                201, json=lease_object("1", **json.loads(request.content)["spec"])
            )
        return httpx.Response(409, json={"message": 'leases "leader" already exists'})

    store, client = store_answering(handle)
    async with client:
        assert await store.create(LeaseRecord("pod-a", 15, T, T, 0)) == "1"
        with pytest.raises(Conflict):
            await store.create(LeaseRecord("pod-a", 15, T, T, 0))
    assert (seen[0].method, seen[0].url.path) == ("POST", PATH.rsplit("/", 1)[0])
    assert "resourceVersion" not in json.loads(seen[0].content)["metadata"]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"renewTime": "yesterday"}, "spec.renewTime is not a time"),
        ({"leaseTransitions": -1}, "spec.leaseTransitions is not a count"),
        ({"leaseDurationSeconds": "15"}, "spec.leaseDurationSeconds is not a count"),
    ],
)
async def test_a_lease_that_cannot_be_read_is_an_api_error_naming_the_field(spec, says):
    store, client = store_answering(lambda r: httpx.Response(200, json=lease_object(**spec)))
    async with client:
        with pytest.raises(ApiError, match=says):
            await store.read()


async def test_an_unreachable_server_is_transient():
    def handle(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    store, client = store_answering(handle)
    async with client:
        with pytest.raises(Transient):
            await store.read()
