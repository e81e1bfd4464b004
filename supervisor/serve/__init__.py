"""`python -m supervisor serve`: builds and their reports over HTTP, with the review API.

Starlette on uvicorn: a well-kept ASGI framework on a production server, so that what a web
server must get right (HTTP parsing, keep-alive, limits, shutdown) is theirs, and what is ours
stays small. A module per duty:

- `app`: the routes, and what every error becomes (one line, never a traceback);
- `pages`: the HTML of the builds list and of a build without a report yet;
- `reports`: a published report's files, read from the artifact store (folder or bucket);
- `api`: a build as JSON, and `POST /api/builds/<id>/review` with its body checked;
- `auth`: the bearer token of the review API (`STORYSHELF_REVIEW_TOKEN`);
- `server`: the socket, uvicorn's limits, and the run until SIGTERM.
"""
