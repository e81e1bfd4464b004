"""Published reports, served from the artifact store as they lie in it.

A report is a folder, `reports/<project>/<build>/` (`ipc.publish`), whose links are all
relative: so it is served under `/reports/` by its keys, and its page finds its pictures, the
project's other reports and its branch's `latest` page where it would on disk. Only keys under
`reports/` are served, read from the raw path a segment at a time: a segment that decodes to
`..`, `.` or nothing, or that holds a slash or a backslash once decoded (`%2F`), is refused, so
that no spelling of a path reaches another part of the store (the uploads, the Storybooks). A
folder's file is also resolved, so that a link in the store cannot lead out of `reports/`.

`/builds/<id>/report` sends the browser to build `id`'s page, or says why there is none yet.
"""

from __future__ import annotations

import mimetypes
import os
from pathlib import Path
from urllib.parse import quote, unquote

import structlog
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from ipc.artifacts.folder import FolderStore
from ipc.artifacts.keys import REPORTS_PREFIX
from ipc.artifacts.store import ArtifactMissing
from ipc.publish import INDEX, report_index
from supervisor.builds.view import load_build
from supervisor.db.connection import transaction
from supervisor.serve.api import build_id_of
from supervisor.serve.context import Problem, serving
from supervisor.serve.pages import no_report_page

log = structlog.get_logger(__name__)

#: Where reports are served from, as URLs start.
PREFIX = f"/{REPORTS_PREFIX}/"
#: What a served report may load and do: its own inline style and script, its own pictures,
#: and the API of this server; nothing from elsewhere (a name in a page is escaped, and this
#: holds even if one were not).
REPORT_POLICY = (
    "default-src 'none'; img-src 'self' data: blob:; style-src 'unsafe-inline';"
    " script-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none';"
    " frame-ancestors 'none'"
)
#: Headers of every served file: its type is the one said, never sniffed; pages are checked
#: again on each visit (published again, they change), pictures are content-addressed.
FILE_HEADERS = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": REPORT_POLICY}
PAGE_CACHE = "no-cache"
PICTURE_CACHE = "public, max-age=3600"


async def report_file(request: Request) -> Response:
    """`GET /reports/<key>`: the file at `reports/<key>` in the store; a folder's `index.html`."""
    key = report_key(request.scope.get("raw_path") or request.url.path.encode())
    store = serving(request).store
    kind = content_type(key)
    headers = FILE_HEADERS | {"Cache-Control": PAGE_CACHE if kind == "text/html" else PICTURE_CACHE}
    if isinstance(store, FolderStore):
        path = await run_in_threadpool(_folder_file, store, key)
        return FileResponse(path, media_type=kind, headers=headers)
    try:
        data = await run_in_threadpool(store.read_bytes, key)
    except ArtifactMissing:
        raise _missing(key) from None
    return Response(data, media_type=kind, headers=headers)


def report_key(raw_path: bytes) -> str:
    """The store key a raw request path names under `/reports/`; `Problem` 400 for any path
    that could name something else (see the module)."""
    text = raw_path.decode("ascii", "replace")
    if not text.startswith(PREFIX):
        raise Problem(404, "not a report path")
    parts = text[len(PREFIX) :].split("/")
    if parts[-1] == "":
        parts[-1] = INDEX
    names = []
    for part in parts:
        try:
            name = unquote(part, errors="strict")
        except UnicodeDecodeError:
            raise _refused() from None
        if name in ("", ".", "..") or any(c in name for c in "/\\\x00"):
            raise _refused()
        names.append(name)
    return "/".join((REPORTS_PREFIX, *names))


def content_type(key: str) -> str:
    """What the key's name says it is (a report holds pages, PNGs, and nothing else of note)."""
    return mimetypes.guess_type(key)[0] or "application/octet-stream"


def _folder_file(store: FolderStore, key: str) -> Path:
    """The file of `key` in a folder store, once it is known to lie inside `reports/`."""
    path = store.path(key)
    try:
        real = path.resolve(strict=True)
    except (FileNotFoundError, NotADirectoryError):
        raise _missing(key) from None
    except (OSError, RuntimeError):  # a loop of links, a name the file system refuses
        raise _refused() from None
    reports = (store.root / REPORTS_PREFIX).resolve()
    if not real.is_relative_to(reports):
        log.warning("report path leads out of reports", key=key)
        raise _refused()
    if not real.is_file() or not os.access(real, os.R_OK):
        raise _missing(key)
    return real


async def build_report(request: Request) -> Response:
    """`GET /builds/<id>/report`: on to the build's published page, or a page saying why there
    is none yet (it looks again by itself)."""
    build_id = build_id_of(request)
    settings = serving(request)
    view = await run_in_threadpool(_published, settings.engine, build_id)
    if view is None:
        raise Problem(404, f"no build with id {build_id}")
    project, status, published = view
    if not published:
        page = no_report_page(build_id, project, status)
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})
    return RedirectResponse("/" + quote(report_index(project, build_id)), status_code=303)


def _published(engine: Engine, build_id: int) -> tuple[str, str, bool] | None:
    """The build's project, status, and whether its report was published."""
    with transaction(engine) as conn:
        view = load_build(conn, build_id, with_snapshots=False)
    if view is None:
        return None
    return view.project, view.status, view.report_url is not None


def _missing(key: str) -> Problem:
    return Problem(404, f"{key}: not in the artifact store")


def _refused() -> Problem:
    return Problem(400, "not a report path: only files under /reports/ are served")
