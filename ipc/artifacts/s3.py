"""The artifact store as an S3-compatible bucket, through boto3: what lets hosts on different
machines share builds with nothing between them but PostgreSQL and the bucket.

`s3://bucket/prefix` names it; the endpoint, region and credentials come from the standard AWS
variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, a profile...), and
`STORYSHELF_S3_ENDPOINT` points at a self-hosted store (SeaweedFS, MinIO, Garage), which is
then addressed by path. A PUT is whole or not there, so a reader never sees half an object.

boto3 retries a failed request itself, a few times with short waits (`RETRIES`); what still
fails is sorted by `ipc.artifacts.store`'s three errors, and a job that meets a store down for
longer is retried by the queue with its backoff. The client is made in the process that uses
it, never inherited across a fork (its connection pool would be shared with the parent's).
"""

from __future__ import annotations

import mimetypes
import os
import tempfile
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from ipc.artifacts.keys import check_key
from ipc.artifacts.store import (
    ArtifactMissing,
    StoredObject,
    StoreError,
    StoreRefused,
    StoreUnavailable,
)

#: The variable naming a self-hosted store's endpoint (`http://127.0.0.1:8333`).
ENDPOINT_VARIABLE = "STORYSHELF_S3_ENDPOINT"
#: Requests in flight at once for `missing` and `put_files`: an upload of thousands of small
#: screenshots is bound by round trips, not bandwidth.
CONCURRENCY = 16
#: Seconds to connect, and to wait for a response's next bytes, before boto3 tries again.
CONNECT_SECONDS = 3
READ_SECONDS = 10
#: Attempts boto3 makes per request ("standard" mode: a jittered backoff of up to 2^n s).
RETRIES = 3
#: The longest one request can take before it raises, its retries included: what the caller
#: waits at worst when the store does not answer (a child beats meanwhile: `child.artifacts`).
LONGEST_REQUEST_SECONDS = RETRIES * (CONNECT_SECONDS + READ_SECONDS) + 2**RETRIES
#: What a quick store (`S3Store(quick=True)`) waits for a response, with no retry: 8 s at worst.
QUICK_READ_SECONDS = 5
#: The most keys one DeleteObjects request may name.
DELETE_BATCH = 1000
#: What S3 error codes mean for the job: gone for good, or worth a retry later.
MISSING_CODES = frozenset(("404", "NoSuchKey", "NotFound"))
TRANSIENT_CODES = frozenset(
    ("RequestTimeout", "SlowDown", "ServiceUnavailable", "InternalError", "Throttling")
)

Result = TypeVar("Result")


class S3Store:
    """Artifacts in `bucket` under `prefix` (see the module)."""

    def __init__(self, bucket: str, prefix: str = "", *, quick: bool = False) -> None:
        """`quick`: one try, with `QUICK_READ_SECONDS` to read, for a caller that must not wait
        long (the host's loop, whose reports are written later when they cannot be now)."""
        self.quick = quick
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.location = f"s3://{bucket}/{self.prefix}".rstrip("/")
        self._client_of: tuple[int, Any] | None = None

    def __repr__(self) -> str:
        return f"S3Store({self.location!r})"

    def _key(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def where(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def check(self) -> None:
        try:
            self._call(self.location, lambda s3: s3.head_bucket(Bucket=self.bucket))
        except ArtifactMissing:
            raise StoreRefused(f"{self.location}: no such bucket") from None

    def exists(self, key: str) -> bool:
        return self._written(key) is not None

    def written(self, keys: Collection[str]) -> dict[str, float]:
        times = self._concurrently(self._written, keys)
        return {key: at for key, at in zip(keys, times, strict=True) if at is not None}

    def _written(self, key: str) -> float | None:
        try:
            head = self._call(
                key, lambda s3: s3.head_object(Bucket=self.bucket, Key=self._key(key))
            )
        except ArtifactMissing:
            return None
        modified: float = head["LastModified"].timestamp()
        return modified

    def refresh(self, keys: Collection[str]) -> set[str]:
        gone = self._concurrently(self._refresh, keys)
        return {key for key, lost in zip(keys, gone, strict=True) if lost}

    def _refresh(self, key: str) -> bool:
        """Copy `key` onto itself (a copy must change something: its metadata, replaced by
        the same), which makes it written now without its bytes crossing the network; True
        when it was gone."""
        name = self._key(key)
        try:
            self._call(
                key,
                lambda s3: s3.copy_object(
                    Bucket=self.bucket,
                    Key=name,
                    CopySource={"Bucket": self.bucket, "Key": name},
                    MetadataDirective="REPLACE",
                ),
            )
        except ArtifactMissing:
            return True
        return False

    def put_file(self, key: str, path: Path) -> None:
        with path.open("rb") as body:
            self._put(key, body)

    def put_files(self, files: Collection[tuple[str, Path]]) -> None:
        self._concurrently(lambda pair: self.put_file(*pair), files)

    def put_bytes(self, key: str, data: bytes) -> None:
        self._put(key, data)

    def copy_files(self, pairs: Collection[tuple[str, str]]) -> set[str]:
        found = self._concurrently(self._copy, pairs)
        return {source for (source, _), there in zip(pairs, found, strict=True) if not there}

    def _copy(self, pair: tuple[str, str]) -> bool:
        """Copy on the bucket's side (the bytes never cross the network, and the content type
        goes with them); False when the source is not there."""
        source, target = pair
        origin = {"Bucket": self.bucket, "Key": self._key(source)}
        try:
            self._call(
                source,
                lambda s3: s3.copy_object(
                    Bucket=self.bucket, Key=self._key(target), CopySource=origin
                ),
            )
        except ArtifactMissing:
            return False
        return True

    @contextmanager
    def writer(self, key: str) -> Iterator[BinaryIO]:
        with tempfile.TemporaryFile() as spool:
            yield spool
            spool.seek(0)
            self._put(key, spool)

    def read_bytes(self, key: str) -> bytes:
        def read(s3: Any) -> bytes:
            body: bytes = s3.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
            return body

        return self._call(key, read)

    def download(self, key: str, target: Path) -> None:
        # The target is opened, and written, outside `_call`: a local file that cannot be
        # written (its folder deleted, a full disk) is the host's error as it is, not the
        # store's, and is raised as the `OSError` it is.
        with target.open("wb") as out:
            with self._answering(key):
                response = self._client().get_object(Bucket=self.bucket, Key=self._key(key))
                chunks = response["Body"].iter_chunks(1 << 20)
            while True:
                with self._answering(key):
                    chunk = next(chunks, b"")
                if not chunk:
                    return
                out.write(chunk)

    def listing(self, prefix: str) -> Iterator[StoredObject]:
        under = self._key(prefix) if prefix else self.prefix
        if under and not under.endswith("/"):
            under += "/"
        skip = len(self.prefix) + 1 if self.prefix else 0
        pages = self._call(
            prefix,
            lambda s3: s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=under
            ),
        )
        try:
            for page in pages:
                for item in page.get("Contents", ()):
                    modified = item["LastModified"].timestamp()
                    yield StoredObject(item["Key"][skip:], item["Size"], modified)
        except Exception as error:
            raise _sorted(prefix, error) from None

    def delete(self, keys: Collection[str]) -> None:
        names = [self._key(key) for key in keys]
        for start in range(0, len(names), DELETE_BATCH):
            self._delete_batch(names[start : start + DELETE_BATCH])

    def _delete_batch(self, names: list[str]) -> None:
        """One request; the keys it could not delete are reported in its answer, not raised."""
        objects = [{"Key": name} for name in names]
        answer = self._call(
            self.location,
            lambda s3: s3.delete_objects(
                Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True}
            ),
        )
        if errors := answer.get("Errors"):
            first = errors[0]
            raise StoreUnavailable(
                f"{self.location}: {len(errors)} key(s) not deleted, the first "
                f"{first.get('Key')}: {first.get('Message') or first.get('Code')}"
            )

    def _put(self, key: str, body: bytes | BinaryIO) -> None:
        """One PUT, typed by the key's extension, so that a bucket served over HTTP shows a
        report's pages and images in the browser rather than offering them as downloads."""
        kind = mimetypes.guess_type(key)[0] or "application/octet-stream"
        self._call(
            key,
            lambda s3: s3.put_object(
                Bucket=self.bucket, Key=self._key(key), Body=body, ContentType=kind
            ),
        )

    def _concurrently(self, work: Callable[[Any], Result], items: Collection[Any]) -> list[Result]:
        if len(items) < 2:
            return [work(item) for item in items]
        self._client()  # made once, before the threads share it
        with ThreadPoolExecutor(min(CONCURRENCY, len(items))) as pool:
            return list(pool.map(work, items))

    def _call(self, key: str, request: Callable[[Any], Result]) -> Result:
        """`request(client)`, its failure sorted into a `StoreError` naming `key`."""
        with self._answering(key):
            return request(self._client())

    @contextmanager
    def _answering(self, key: str) -> Iterator[None]:
        """Sort a failure of the store inside the block into a `StoreError` naming `key`."""
        try:
            yield
        except StoreError:
            raise
        except Exception as error:
            raise _sorted(key, error) from None

    def _client(self) -> Any:
        """This process's client (a forked child makes its own: see the module)."""
        if self._client_of is None or self._client_of[0] != os.getpid():
            self._client_of = (os.getpid(), _new_client(self.quick))
        return self._client_of[1]


def _new_client(quick: bool) -> Any:
    import boto3  # only a host that uses a bucket pays for the import
    from botocore.config import Config

    endpoint = os.environ.get(ENDPOINT_VARIABLE) or None
    config = Config(
        connect_timeout=CONNECT_SECONDS,
        read_timeout=QUICK_READ_SECONDS if quick else READ_SECONDS,
        retries={"max_attempts": 1 if quick else RETRIES, "mode": "standard"},
        max_pool_connections=2 * CONCURRENCY,
        s3={"addressing_style": "path"} if endpoint else {},
    )
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name=region, config=config
    )


def _sorted(key: str, error: Exception) -> StoreError:
    """`error` of boto3 as the store error that says what the job should do."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    if isinstance(error, ClientError):
        detail = error.response.get("Error", {})
        code = str(detail.get("Code", ""))
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        message = detail.get("Message") or code or str(error)
        if code in MISSING_CODES or (status == 404 and code != "NoSuchBucket"):
            return ArtifactMissing(f"{key}: not in the artifact store")
        if status >= 500 or code in TRANSIENT_CODES:
            return StoreUnavailable(f"{key}: the artifact store failed: {message} ({code})")
        return StoreRefused(f"{key}: the artifact store refused: {message} ({code or status})")
    if isinstance(error, NoCredentialsError):
        return StoreRefused(f"{key}: no credentials for the artifact store (AWS_ACCESS_KEY_ID)")
    if isinstance(error, BotoCoreError | OSError):
        return StoreUnavailable(f"{key}: the artifact store did not answer: {error}")
    raise error
