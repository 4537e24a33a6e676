"""The viewer's ASGI application (Starlette + Jinja2): pages and the JSON API over one store.

Every page has a twin under ``/api/`` returning the same dict (built by
:mod:`mindstore.viewer.data`); the page is that dict rendered by a template. Only ``GET`` and
``HEAD`` exist. The application holds a :class:`~mindstore.viewer.readonly.ReadOnlyStore`, so
no handler can reach a write.

Security (see docs/viewer.md):

* :class:`Guard` wraps the whole app: every response carries a strict Content-Security-Policy
  (``default-src 'self'``, no inline script or style, ``frame-ancestors 'none'``),
  ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer`` and
  ``Cache-Control: no-store``. Without a token only requests whose ``Host`` is a loopback name
  are answered (a DNS-rebinding page cannot read the viewer). With a token every request must
  carry it: ``Authorization: Bearer T``, an ``X-Mindstore-Token`` header or the
  ``mindstore_token`` cookie, which ``?token=T`` sets once (then redirects to the URL without it).
* Templates autoescape every value; no template marks a stored string safe. Links are built from
  fixed paths plus URL-encoded query parameters, never from stored text.
* Live pages (:mod:`.live`): ``/api/events`` streams the change feed as server-sent events
  (same guard, same origin); the script swaps in a freshly fetched page, never stored HTML
  fragments built in the browser.
* Static files are a fixed table loaded from the package at start-up: no path from a request
  ever reaches the file system.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from mindstore.errors import MindstoreError, MissingDependencyError, StoreError

try:
    import jinja2
    from starlette.applications import Starlette
    from starlette.datastructures import Headers
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
    from starlette.routing import Route
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - exercised by tests/meta/test_extras.py
    raise MissingDependencyError(exc.name or "starlette", "viewer") from exc

from mindstore.cli.render import to_jsonable
from mindstore.messages import is_tool_part, tool_name

from . import data, live
from .readonly import ReadOnlyStore
from .tree import DEFAULT_LIMIT

__all__ = ["CSP", "TOKEN_COOKIE", "Guard", "create_app"]

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)
TOKEN_COOKIE = "mindstore_token"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def _host_name(host_header: str) -> str:
    host = host_header.strip().lower()
    if host.startswith("["):  # [::1]:8765
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Guard:
    """ASGI middleware: security headers on every response, Host check, token check."""

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() not in {name for name, _ in SECURITY_HEADERS}
                ]
                message = {**message, "headers": [*headers, *SECURITY_HEADERS]}
            await send(message)

        headers = Headers(scope=scope)
        if self.token is None:
            if _host_name(headers.get("host", "")) not in LOOPBACK_NAMES:
                await _plain(421, "this viewer answers only to a loopback Host")(
                    scope, receive, send_with_headers
                )
                return
            await self.app(scope, receive, send_with_headers)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [v for k, v in query if k == "token"]
        if given:
            if not self._ok(given[-1]):
                await _plain(401, "wrong token")(scope, receive, send_with_headers)
                return
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            target = scope.get("root_path", "") + scope["path"] + (f"?{rest}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(TOKEN_COOKIE, given[-1], httponly=True, samesite="strict")
            await response(scope, receive, send_with_headers)
            return
        auth = headers.get("authorization", "")
        candidates = [
            auth[7:] if auth.lower().startswith("bearer ") else None,
            headers.get("x-mindstore-token"),
            Request(scope).cookies.get(TOKEN_COOKIE),
        ]
        if not any(c is not None and self._ok(c) for c in candidates):
            await _plain(401, "this viewer needs its token: open the URL printed by serve")(
                scope, receive, send_with_headers
            )
            return
        await self.app(scope, receive, send_with_headers)

    def _ok(self, candidate: str) -> bool:
        assert self.token is not None
        return hmac.compare_digest(candidate.encode(), self.token.encode())


def _plain(status: int, text: str) -> Response:
    return Response(text + "\n", status_code=status, media_type="text/plain; charset=utf-8")


# ---- static files and templates --------------------------------------------------------------

_STATIC_TYPES = {
    "viewer.css": "text/css; charset=utf-8",
    "viewer.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


def _load_static() -> dict[str, tuple[bytes, str]]:
    root = resources.files("mindstore.viewer") / "static"
    return {name: ((root / name).read_bytes(), kind) for name, kind in _STATIC_TYPES.items()}


def _url(path: str, _anchor: str | None = None, **params: Any) -> str:
    """``path`` (a fixed route) plus URL-encoded parameters; None, "" and False are left out."""
    clean = [(k, str(v)) for k, v in params.items() if v is not None and v != "" and v is not False]
    out = path + ("?" + urlencode(clean) if clean else "")
    return out + ("#" + quote(_anchor, safe="") if _anchor else "")


def _part_kind(part: Any) -> str:
    if not isinstance(part, Mapping):
        return "other"
    ptype = part.get("type")
    if ptype in ("text", "reasoning") and isinstance(part.get("text"), str):
        return str(ptype)
    if isinstance(ptype, str) and is_tool_part(part):
        return "tool"
    if ptype == "file":
        return "file"
    return "other"


def _tool_label(part: Mapping[str, Any]) -> str:
    try:
        return tool_name(part)
    except (KeyError, TypeError, ValueError):
        return str(part.get("type", "?"))


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("mindstore.viewer", "templates"),
        autoescape=True,  # every template, whatever its name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["url"] = _url
    env.globals["part_kind"] = _part_kind
    env.globals["tool_label"] = _tool_label
    env.filters["pretty"] = _pretty
    return env


# ---- request parameters ----------------------------------------------------------------------


class BadRequest(ValueError):
    """A query parameter that cannot be used (HTTP 400)."""


def _str(request: Request, name: str, default: str | None = None) -> str | None:
    value = request.query_params.get(name)
    return default if value is None or value == "" else value


def _required(request: Request, name: str) -> str:
    value = _str(request, name)
    if value is None:
        raise BadRequest(f"missing query parameter {name!r}")
    return value


def _int(request: Request, name: str, default: int | None) -> int | None:
    value = _str(request, name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise BadRequest(f"query parameter {name!r} must be an integer, got {value!r}") from None
    if number < 0:
        raise BadRequest(f"query parameter {name!r} must not be negative")
    return number


def _flag(request: Request, name: str) -> bool:
    return _str(request, name, "0") not in ("0", "false", "no")


# ---- the application -------------------------------------------------------------------------

Page = Callable[[ReadOnlyStore, Request], Awaitable[dict[str, Any]]]


async def _namespaces(store: ReadOnlyStore, _request: Request) -> dict[str, Any]:
    return await data.namespaces_data(store)


async def _sessions(store: ReadOnlyStore, request: Request) -> dict[str, Any]:
    return await data.sessions_data(
        store,
        _str(request, "ns", "default") or "default",
        before=_str(request, "before"),
        limit=_int(request, "limit", data.SESSIONS_PAGE) or data.SESSIONS_PAGE,
        filter_text=_str(request, "filter", "") or "",
    )


async def _session(store: ReadOnlyStore, request: Request) -> dict[str, Any]:
    return await data.session_data(
        store,
        _str(request, "ns", "default") or "default",
        _required(request, "id"),
        leaf=_str(request, "leaf"),
        focus=_str(request, "focus"),
        offset=_int(request, "offset", None),
        limit=_int(request, "limit", DEFAULT_LIMIT) or DEFAULT_LIMIT,
        raw=_flag(request, "raw"),
    )


async def _blocks(store: ReadOnlyStore, request: Request) -> dict[str, Any]:
    return await data.blocks_data(
        store, _str(request, "ns", "default") or "default", _required(request, "id")
    )


async def _prompt(store: ReadOnlyStore, request: Request) -> dict[str, Any]:
    return await data.prompt_data(
        store, _str(request, "ns", "default") or "default", _required(request, "id")
    )


async def _search(store: ReadOnlyStore, request: Request) -> dict[str, Any]:
    return await data.search_data(
        store,
        _str(request, "ns", "default") or "default",
        _str(request, "q", "") or "",
        session_ids=request.query_params.getlist("session") or None,
        limit=_int(request, "limit", data.SEARCH_LIMIT) or data.SEARCH_LIMIT,
    )


#: The pages that follow the change feed and update in place (see :mod:`.live`).
LIVE_PAGES = frozenset({"/session", "/blocks", "/prompt"})

PAGES: Mapping[str, tuple[Page, str]] = {
    "/": (_namespaces, "namespaces.html"),
    "/sessions": (_sessions, "sessions.html"),
    "/session": (_session, "session.html"),
    "/blocks": (_blocks, "blocks.html"),
    "/prompt": (_prompt, "prompt.html"),
    "/search": (_search, "search.html"),
}


def create_app(
    open_store: Callable[[], Awaitable[ReadOnlyStore]],
    *,
    token: str | None = None,
    title: str = "mindstore",
) -> ASGIApp:
    """The viewer over the store ``open_store()`` returns (opened at start-up, closed at
    shut-down, in the server's event loop).

    Args:
        open_store: coroutine function returning a read-only store, e.g.
            ``lambda: open_read_only("agent.db")``.
        token: when set, every request must carry it (see :class:`Guard`); when None, only
            loopback ``Host`` headers are answered.
        title: shown in the page header (the database name, say).
    """
    env = _environment()
    static = _load_static()
    holder: dict[str, ReadOnlyStore] = {}

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        holder["store"] = await open_store()
        try:
            yield
        finally:
            await holder.pop("store").aclose()

    def page(fn: Page, template: str) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                live_since = None
                if request.url.path in LIVE_PAGES:
                    # read before the page's data: the page then follows from here (live.py)
                    ns = _str(request, "ns", "default") or "default"
                    live_since = await holder["store"].latest_change_seq(ns)
                context = await fn(holder["store"], request)
            except (data.NotFound, MindstoreError, ValueError) as exc:
                status = _status(exc)
                return HTMLResponse(
                    env.get_template("error.html").render(
                        title=title,
                        status=status,
                        error=_message(exc),
                        search_ns=request.query_params.get("ns") or "default",
                    ),
                    status_code=status,
                )
            # the top search box searches the namespace being looked at
            search_ns = context.get("namespace") or request.query_params.get("ns") or "default"
            return HTMLResponse(
                env.get_template(template).render(
                    title=title,
                    page=request.url.path,
                    search_ns=search_ns,
                    live_since=live_since,
                    **context,
                )
            )

        return endpoint

    def api(fn: Page) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                context = await fn(holder["store"], request)
            except (data.NotFound, MindstoreError, ValueError) as exc:
                return JSONResponse({"error": _message(exc)}, status_code=_status(exc))
            return JSONResponse(to_jsonable(context))

        return endpoint

    async def static_file(request: Request) -> Response:
        found = static.get(request.path_params["name"])
        if found is None:
            return _plain(404, "not found")
        return Response(found[0], media_type=found[1])

    routes = [Route(path, page(fn, tpl), methods=["GET"]) for path, (fn, tpl) in PAGES.items()]
    routes += [
        Route("/api" + (path if path != "/" else "/namespaces"), api(fn), methods=["GET"])
        for path, (fn, _tpl) in PAGES.items()
    ]
    routes.append(
        Route(
            "/api/events",
            lambda request: live.stream_response(holder["store"], request),
            methods=["GET"],
        )
    )
    routes.append(Route("/static/{name}", static_file, methods=["GET"]))
    routes.append(Route("/favicon.ico", lambda _r: Response(status_code=204), methods=["GET"]))
    app = Starlette(routes=routes, lifespan=lifespan)
    return Guard(app, token=token)


def _status(exc: BaseException) -> int:
    """404 for what is not in the store, 503 when the store failed, 400 for bad parameters
    (our own checks and the store's validation of names, which raises ValueError)."""
    if isinstance(exc, data.NotFound):
        return 404
    if isinstance(exc, StoreError):
        return 503
    return 400


def _message(exc: BaseException) -> str:
    if isinstance(exc, LookupError) and exc.args:
        return str(exc.args[0])
    return str(exc)
