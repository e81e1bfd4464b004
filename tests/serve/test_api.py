"""`serve`'s HTTP side on real builds: the builds page, each build's JSON, the review API with
its token and its refusals, and the reports served from the store.

Every refusal is checked to have written nothing: the build's review state, its decisions and
its branch's baselines are read before and after (`review_facts`). Servers are real
`python -m supervisor serve` processes (`tests/serve/conftest.py`); paths a browser would
normalise are sent as raw HTTP.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import create_engine

from ipc.artifacts.store import ArtifactStore
from supervisor.builds.view import load_build
from supervisor.db.connection import connect, parse_url
from supervisor.db.migrate import upgrade
from tests.serve.conftest import (
    CHANGED,
    NEW,
    TOKEN,
    Reviewable,
    Served,
    demo_folder,
    drain,
    enqueue,
    review_facts,
    serve,
    stop,
)

AUTHORIZED = {"Authorization": f"Bearer {TOKEN}"}


def client(served: Served) -> httpx.Client:
    return httpx.Client(base_url=served.url, timeout=10)


def post_review(served: Served, build_id: int, body: Any, **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    with client(served) as http:
        return http.post(
            f"/api/builds/{build_id}/review",
            content=content,
            headers={"Content-Type": "application/json", **headers},
        )


def raw_get(served: Served, target: str) -> tuple[int, bytes]:
    """`GET target` sent as it is (no client normalises its dots or escapes): status and body."""
    address = urlsplit(served.url)
    assert address.hostname is not None and address.port is not None
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.fixture(scope="module")
def untouched(reviewable: Reviewable) -> int:
    """The branch build the refusals are tried on: no test may change it."""
    return reviewable.take()


# -- the builds page and a build's JSON ------------------------------------------------------


def test_the_builds_page_lists_recent_builds_by_project_and_branch(
    reviewable: Reviewable, writable: Served, read_only: Served
) -> None:
    with client(writable) as http:
        page = http.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<h2>web</h2>" in page.text and "<h3>main</h3>" in page.text
    for build_id in (reviewable.main_id, *reviewable.branch_builds):
        assert f'<tr data-build="{build_id}">' in page.text
        assert f'href="/builds/{build_id}/report"' in page.text
    assert "<td>changed</td><td>pending</td>" in page.text
    assert "Read-only" not in page.text
    with client(read_only) as http:
        assert "Read-only" in http.get("/").text


def test_a_build_is_its_json_with_whether_the_api_takes_reviews(
    reviewable: Reviewable, writable: Served, read_only: Served, untouched: int
) -> None:
    engine = reviewable.engine()
    with engine.connect() as conn:
        view = load_build(conn, untouched)
    engine.dispose()
    assert view is not None
    with client(writable) as http:
        answer = http.get(f"/api/builds/{untouched}")
    assert answer.status_code == 200
    assert answer.json() == view.as_json() | {"review_api": "writable"}
    assert answer.json()["review"] == "pending"
    with client(read_only) as http:
        assert http.get(f"/api/builds/{untouched}").json()["review_api"] == "read-only"


def test_an_unknown_build_is_404(writable: Served) -> None:
    with client(writable) as http:
        assert http.get("/api/builds/999999").status_code == 404
        assert http.get(f"/api/builds/{2**63}").json() == {"error": f"no build with id {2**63}"}
        assert http.get("/builds/999999/report").status_code == 404
    refused = post_review(writable, 999999, {"decision": "accept", "by": "ann"}, **AUTHORIZED)
    assert (refused.status_code, refused.json()) == (404, {"error": "no build with id 999999"})


# -- the token -------------------------------------------------------------------------------


def test_a_review_without_a_token_is_401_and_changes_nothing(
    reviewable: Reviewable, writable: Served, untouched: int
) -> None:
    before = review_facts(reviewable.database_url, untouched)
    for headers in ({}, {"Authorization": "Basic YW5uOnB3"}, {"Authorization": "Bearer"}):
        refused = post_review(writable, untouched, {"decision": "accept", "by": "ann"}, **headers)
        assert refused.status_code == 401, headers
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert "Bearer" in refused.json()["error"]
    assert review_facts(reviewable.database_url, untouched) == before


def test_a_wrong_token_is_403_and_changes_nothing(
    reviewable: Reviewable, writable: Served, untouched: int
) -> None:
    before = review_facts(reviewable.database_url, untouched)
    for token in ("wrong", TOKEN + "x", TOKEN[:-1], TOKEN.upper()):
        refused = post_review(
            writable,
            untouched,
            {"decision": "accept", "by": "ann"},
            Authorization=f"Bearer {token}",
        )
        assert refused.status_code == 403, token
        assert refused.json() == {"error": "the review token is not this server's"}
    assert review_facts(reviewable.database_url, untouched) == before


def test_a_read_only_server_refuses_every_review_saying_so(
    reviewable: Reviewable, read_only: Served, untouched: int
) -> None:
    before = review_facts(reviewable.database_url, untouched)
    refused = post_review(read_only, untouched, {"decision": "accept", "by": "ann"}, **AUTHORIZED)
    assert refused.status_code == 403
    assert "read-only" in refused.json()["error"]
    assert "STORYSHELF_REVIEW_TOKEN" in refused.json()["error"]
    assert review_facts(reviewable.database_url, untouched) == before


# -- the body --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b'{"decision": "accept", "by": ', "not JSON"),
        (b"\xff\xfe garbage", "not JSON"),
        (b'{"decision": "accept", "by": "ann", "comment": NaN}', "not JSON"),
        (b"[]", "not a JSON object"),
        ({"decision": "approve", "by": "ann"}, '"decision" must be'),
        ({"decision": "accept"}, '"by" must be'),
        ({"decision": "accept", "by": "  "}, '"by" must be'),
        ({"decision": "accept", "by": "ann\nroot"}, '"by" must be one line'),
        ({"decision": "accept", "by": "a" * 201}, '"by" is over'),
        ({"decision": "accept", "by": "ann", "snapshots": "button/primary"}, '"snapshots" must'),
        ({"decision": "accept", "by": "ann", "snapshots": []}, '"snapshots" must'),
        ({"decision": "accept", "by": "ann", "snapshots": [1]}, '"snapshots" must'),
        ({"decision": "accept", "by": "ann", "comment": 5}, '"comment" must'),
        ({"decision": "accept", "by": "ann", "comment": "a\x1b[31m"}, "control characters"),
        ({"decision": "accept", "by": "ann", "all": True}, "unknown fields: all"),
    ],
)
def test_a_bad_body_is_400_in_one_line_and_changes_nothing(
    reviewable: Reviewable, writable: Served, untouched: int, body: Any, said: str
) -> None:
    before = review_facts(reviewable.database_url, untouched)
    refused = post_review(writable, untouched, body, **AUTHORIZED)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert said in error and "\n" not in error and "Traceback" not in refused.text
    assert review_facts(reviewable.database_url, untouched) == before


def test_a_huge_body_is_413_and_changes_nothing(
    reviewable: Reviewable, writable: Served, untouched: int
) -> None:
    before = review_facts(reviewable.database_url, untouched)
    huge = {"decision": "accept", "by": "ann", "comment": "x" * (70 * 1024)}
    declared = post_review(writable, untouched, huge, **AUTHORIZED)
    assert declared.status_code == 413 and "64 KiB" in declared.json()["error"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: sent chunked
        yield b'{"decision": "accept", "by": "ann", "comment": "'
        for _ in range(80):
            yield b"x" * 1024
        yield b'"}'

    with client(writable) as http:
        streamed = http.post(
            f"/api/builds/{untouched}/review",
            content=chunks(),
            headers={"Content-Type": "application/json", **AUTHORIZED},
        )
    assert streamed.status_code == 413
    assert review_facts(reviewable.database_url, untouched) == before


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("no/such-story", "has no snapshot named 'no/such-story'"),
        ("button/secondary", "is unchanged"),
    ],
)
def test_a_snapshot_the_build_cannot_review_is_409_and_changes_nothing(
    reviewable: Reviewable, writable: Served, untouched: int, name: str, said: str
) -> None:
    before = review_facts(reviewable.database_url, untouched)
    body = {"decision": "accept", "by": "ann", "snapshots": ["button/primary", name]}
    refused = post_review(writable, untouched, body, **AUTHORIZED)
    assert refused.status_code == 409
    assert said in refused.json()["error"]
    assert review_facts(reviewable.database_url, untouched) == before


# -- decisions -------------------------------------------------------------------------------


def decisions(answer: dict[str, Any]) -> dict[str, str | None]:
    return {
        s["name"]: s["review"] for s in answer["snapshots"] if s["status"] in ("changed", "new")
    }


def test_accepting_one_snapshot_records_it_and_answers_the_build_as_it_now_is(
    reviewable: Reviewable, writable: Served
) -> None:
    build_id = reviewable.take()
    body = {"decision": "accept", "by": "ann", "snapshots": ["button/primary"], "comment": "ok"}
    answer = post_review(writable, build_id, body, **AUTHORIZED)
    assert answer.status_code == 200, answer.text
    build = answer.json()
    assert build["id"] == build_id and build["review_api"] == "writable"
    assert build["review"] == "pending"
    assert decisions(build)["button/primary"] == "accepted"
    assert [n for n, d in decisions(build).items() if d is None] == [
        "badge/status",
        "card/list",
        "form/login",
        "typography/paragraph",
    ]
    facts = review_facts(reviewable.database_url, build_id)
    assert facts == {"review": "pending", "decisions": 1, "branch_baselines": 1}


def test_accepting_all_accepts_every_changed_and_new_snapshot(
    reviewable: Reviewable, writable: Served
) -> None:
    build_id = reviewable.take()
    answer = post_review(writable, build_id, {"decision": "accept", "by": "ann"}, **AUTHORIZED)
    assert answer.status_code == 200, answer.text
    assert answer.json()["review"] == "accepted"
    assert set(decisions(answer.json()).values()) == {"accepted"}
    facts = review_facts(reviewable.database_url, build_id)
    assert facts == {"review": "accepted", "decisions": CHANGED + NEW, "branch_baselines": 5}


def test_rejecting_a_snapshot_rejects_the_build(reviewable: Reviewable, writable: Served) -> None:
    build_id = reviewable.take()
    body = {"decision": "reject", "by": "bob", "snapshots": ["card/list"]}
    answer = post_review(writable, build_id, body, **AUTHORIZED)
    assert answer.status_code == 200, answer.text
    assert answer.json()["review"] == "rejected"
    assert decisions(answer.json())["card/list"] == "rejected"
    facts = review_facts(reviewable.database_url, build_id)
    assert facts == {"review": "rejected", "decisions": 1, "branch_baselines": 0}


# -- reports ---------------------------------------------------------------------------------


def test_a_report_is_served_from_the_folder_with_its_types(
    reviewable: Reviewable, writable: Served, untouched: int
) -> None:
    with client(writable) as http:
        sent_on = http.get(f"/builds/{untouched}/report")
        assert sent_on.status_code == 303
        assert sent_on.headers["location"] == f"/reports/web/{untouched}/index.html"
        page = http.get(sent_on.headers["location"])
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert page.headers["x-content-type-options"] == "nosniff"
        assert "connect-src 'self'" in page.headers["content-security-policy"]
        assert f'<body data-build="{untouched}">' in page.text
        image = next(
            s["image_path"] for s in http.get(f"/api/builds/{untouched}").json()["snapshots"]
        )
        picture = http.get(f"/reports/web/{untouched}/{image}")
        assert picture.status_code == 200 and picture.headers["content-type"] == "image/png"
        assert picture.content.startswith(b"\x89PNG")
        folder = http.get(f"/reports/web/{untouched}/")
        assert folder.status_code == 200 and folder.text == page.text
        missing = http.get(f"/reports/web/{untouched}/images/00/nothing.png")
        assert missing.status_code == 404 and "not in the artifact store" in missing.text
        assert http.get("/images/00/nothing.png").status_code == 404


@pytest.mark.parametrize(
    "target",
    [
        "/reports/../storyshelf.db",
        "/reports/web/../../storyshelf.db",
        "/reports/%2e%2e/%2e%2e/etc/passwd",
        "/reports/web/..%2F..%2Fimages",
        "/reports/web%2F..%2F..%2Fstoryshelf.db",
        "/reports/web/2/..%5C..%5Cstoryshelf.db",
        "/reports/web/%00/index.html",
        "/reports/web//index.html",
        "/reports/%ff/index.html",
    ],
)
def test_no_path_leads_out_of_the_reports(writable: Served, target: str) -> None:
    status, body = raw_get(writable, target)
    assert status == 400, (target, body)
    assert body == b"not a report path: only files under /reports/ are served\n"


def test_a_link_in_the_store_cannot_lead_out_of_the_reports(
    reviewable: Reviewable, writable: Served
) -> None:
    root = Path(reviewable.artifacts)
    image = next((root / "images").glob("*/*.png")).relative_to(root)
    link = root / "reports" / "web" / f"out-{uuid.uuid4().hex[:8]}"
    link.symlink_to(root)
    try:
        status, _ = raw_get(writable, f"/reports/web/{link.name}/{image}")
        assert status == 400
    finally:
        link.unlink()


def test_a_build_without_a_report_yet_says_so(reviewable: Reviewable, writable: Served) -> None:
    queued = enqueue(
        reviewable.database_url,
        reviewable.artifacts,
        demo_folder(reviewable.workdir, "branch"),
        "not-captured",
    )
    with client(writable) as http:
        page = http.get(f"/builds/{queued}/report")
    assert page.status_code == 200
    assert f"Build {queued} is pending: its report is published when it ends" in page.text
    assert '<meta http-equiv="refresh"' in page.text


@pytest.mark.parametrize(("database_url", "store"), [("sqlite", "s3")], indirect=True)
def test_a_report_is_served_from_a_bucket(
    database_url: str, store: ArtifactStore, tmp_path: Path
) -> None:
    main = enqueue(database_url, store.location, demo_folder(tmp_path, "baseline"), "main")
    drain(database_url, store.location, tmp_path)
    served = serve(database_url, store.location, tmp_path)
    try:
        with client(served) as http:
            page = http.get(f"/builds/{main}/report", follow_redirects=True)
            assert page.status_code == 200, page.text
            assert page.headers["content-type"] == "text/html; charset=utf-8"
            assert f'<body data-build="{main}">' in page.text
            image = http.get(f"/api/builds/{main}").json()["snapshots"][0]["image_path"]
            picture = http.get(f"/reports/web/{main}/{image}")
            assert picture.status_code == 200 and picture.headers["content-type"] == "image/png"
            assert picture.content.startswith(b"\x89PNG")
            missing = http.get(f"/reports/web/{main}/images/00/nothing.png")
            assert missing.status_code == 404
            status, _ = raw_get(served, "/reports/web/..%2F..%2Fimages")
            assert status == 400
    finally:
        stop(served)


# -- the database gone -----------------------------------------------------------------------


@pytest.fixture
def own_postgres(postgres_url: str) -> Iterator[tuple[str, Any]]:
    """A migrated PostgreSQL database of its own (to drop under a server), and the admin
    engine that can drop it."""
    server = parse_url(postgres_url)
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    name = f"storyshelf_gone_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    url = server.set(database=name).render_as_string(hide_password=False)
    engine = connect(url)
    upgrade(engine)
    engine.dispose()
    try:
        yield url, admin
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()


def test_a_database_gone_away_is_503_in_one_line(
    own_postgres: tuple[str, Any], tmp_path: Path
) -> None:
    url, admin = own_postgres
    served = serve(url, str(tmp_path / "artifacts"), tmp_path)
    try:
        with client(served) as http:
            assert http.get("/api/builds/1").status_code == 404
            with admin.connect() as conn:
                conn.exec_driver_sql(f"DROP DATABASE {parse_url(url).database} WITH (FORCE)")
            for path in ("/api/builds/1", "/", "/builds/1/report"):
                gone = http.get(path)
                assert gone.status_code == 503, (path, gone.text)
                assert "the database cannot be used now" in gone.text
                assert "Traceback" not in gone.text and gone.text.count("\n") <= 1
            refused = post_review(served, 1, {"decision": "accept", "by": "ann"}, **AUTHORIZED)
            assert refused.status_code == 503
        assert served.process.poll() is None
    finally:
        stop(served)
    assert '"event": "database problem"' in served.log()
    assert "Traceback" not in served.log()
