"""The suite's throwaway object store (`tests.object_store_server`) is a real, signed S3.

One server for the module: its tests run in order, the restart and the stop last.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import psutil
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.object_store_server import (
    ExternalObjectStore,
    ObjectStore,
    TemporaryObjectStore,
    own_server,
)


@pytest.fixture(scope="module")
def store() -> Iterator[TemporaryObjectStore]:
    """A server of this module's own (not the session's): these tests restart and stop it."""
    yield from own_server()


def _key() -> str:
    return f"test-{uuid.uuid4().hex[:12]}/object"


def _weeds() -> list[psutil.Process]:
    """This process's `weed` descendants, zombies included."""
    return [child for child in psutil.Process().children(recursive=True) if child.name() == "weed"]


def test_an_object_goes_in_and_comes_out_with_the_store_s_credentials(
    store: TemporaryObjectStore,
) -> None:
    client = store.client()
    key = _key()
    client.put_object(Bucket=store.bucket, Key=key, Body=b"baseline")
    assert client.get_object(Bucket=store.bucket, Key=key)["Body"].read() == b"baseline"
    listed = client.list_objects_v2(Bucket=store.bucket, Prefix=key.split("/")[0])
    assert [entry["Key"] for entry in listed["Contents"]] == [key]


def test_a_wrong_secret_and_no_signature_are_refused(store: TemporaryObjectStore) -> None:
    key = _key()
    store.client().put_object(Bucket=store.bucket, Key=key, Body=b"secret")
    wrong = ObjectStore(store.endpoint, store.access_key, "not-the-secret").client()
    with pytest.raises(ClientError) as refused:
        wrong.get_object(Bucket=store.bucket, Key=key)
    assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    with pytest.raises(ClientError) as refused:
        wrong.put_object(Bucket=store.bucket, Key=_key(), Body=b"intruder")
    assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    anonymous = store.client(signature_version=UNSIGNED)
    with pytest.raises(ClientError) as refused:
        anonymous.get_object(Bucket=store.bucket, Key=key)
    assert refused.value.response["Error"]["Code"] == "AccessDenied"


def test_a_new_bucket_takes_writes_at_once(store: TemporaryObjectStore) -> None:
    name = store.new_bucket(f"test-{uuid.uuid4().hex[:12]}")
    assert store.new_bucket(name) == name  # already there: left alone
    client = store.client()
    client.put_object(Bucket=name, Key="first", Body=b"1")
    assert client.get_object(Bucket=name, Key="first")["Body"].read() == b"1"
    assert name in [bucket["Name"] for bucket in client.list_buckets()["Buckets"]]


def test_the_environment_reaches_the_store(
    store: TemporaryObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a host reads: the standard AWS variables and STORYSHELF_S3_ENDPOINT."""
    environment = store.environment()
    assert environment["STORYSHELF_S3_ENDPOINT"] == store.endpoint
    assert environment["AWS_DEFAULT_REGION"] == "us-east-1"
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    client = boto3.client(
        "s3",
        endpoint_url=os.environ["STORYSHELF_S3_ENDPOINT"],
        config=Config(s3={"addressing_style": "path"}),
    )
    key = _key()
    client.put_object(Bucket=store.bucket, Key=key, Body=b"from the environment")
    assert client.head_object(Bucket=store.bucket, Key=key)["ContentLength"] == 20


def test_an_external_store_comes_from_the_environment(
    store: TemporaryObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the session fixture uses when `STORYSHELF_TEST_S3_ENDPOINT` is set."""
    monkeypatch.setenv("STORYSHELF_TEST_S3_ENDPOINT", store.endpoint)
    monkeypatch.setenv("STORYSHELF_TEST_S3_BUCKET", "external-bucket")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", store.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", store.secret_key)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    external = ExternalObjectStore.from_environment()
    assert (external.endpoint, external.bucket) == (store.endpoint, "external-bucket")
    external.client().put_object(Bucket="external-bucket", Key="k", Body=b"v")
    assert store.client().get_object(Bucket="external-bucket", Key="k")["Body"].read() == b"v"


def test_it_listens_on_loopback_only_and_beside_a_second_store(
    store: TemporaryObjectStore,
) -> None:
    assert store.process is not None
    listening = [
        connection.laddr
        for connection in psutil.Process(store.process.pid).net_connections(kind="inet")
        if connection.status == psutil.CONN_LISTEN
    ]
    assert len(listening) == 8
    assert {address.ip for address in listening} == {"127.0.0.1"}
    with TemporaryObjectStore() as second:
        assert second.endpoint != store.endpoint
        key = _key()
        second.client().put_object(Bucket=second.bucket, Key=key, Body=b"second")
        with pytest.raises(ClientError):
            store.client().head_object(Bucket=store.bucket, Key=key)
        second_root = second.root
    assert not second_root.exists()


def test_objects_survive_a_restart_on_the_same_ports(store: TemporaryObjectStore) -> None:
    client = store.client()
    keys = [_key() for _ in range(5)]
    for key in keys:
        client.put_object(Bucket=store.bucket, Key=key, Body=key.encode())
    endpoint, before = store.endpoint, store.process
    store.restart()
    assert store.endpoint == endpoint and store.process is not before
    assert before is not None and not psutil.pid_exists(before.pid)
    for key in keys:  # the same client: same endpoint, same credentials
        assert client.get_object(Bucket=store.bucket, Key=key)["Body"].read() == key.encode()
    client.put_object(Bucket=store.bucket, Key=_key(), Body=b"after the restart")


def test_stop_leaves_no_process_no_folder_and_no_socket(store: TemporaryObjectStore) -> None:
    assert store.process is not None
    others = {weed.pid for weed in _weeds()} - {store.process.pid}  # the session's own store
    assert store.process.pid in {weed.pid for weed in _weeds()}
    sockets = [
        Path(f"/tmp/seaweedfs-{part}-grpc-{port}.sock") for part, port in store.ports.grpc().items()
    ]
    assert all(path.is_socket() for path in sockets)
    store.stop()
    assert {weed.pid for weed in _weeds()} == others
    assert not store.root.exists()
    assert not any(path.exists() for path in sockets)
    with (
        pytest.raises(ConnectionRefusedError),
        socket.create_connection(("127.0.0.1", store.ports.s3), timeout=2),
    ):
        pass
