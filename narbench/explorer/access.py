"""Who may use the explorer's server: the token, the Host and where a request comes from; and the
security headers of every answer.

As Jupyter does it. Each launch makes a random token (`secrets.token_urlsafe`), printed in the
address (`/?token=...`); `--token` or NARBENCH_EXPLORER_TOKEN gives one instead. Every route asks
for it: the `?token=` of the first visit is turned into a cookie (HttpOnly, SameSite=Strict) and
the page reloads without it; a script sends it as `Authorization: token ...` or `X-Narbench-Token`.
The Host header must name the bound address, `localhost`, `127.0.0.1` or `::1`, or a name given with
`--allow-host` (a forged Host, as DNS rebinding sends, is refused). A request another site makes
(`Sec-Fetch-Site: cross-site` or `same-site`, or an Origin other than this server) is refused, except
a plain navigation to the page itself. Refusals: 403 (Host, origin), 401 (no or a wrong token).
The guard wraps the whole application, so its headers are on every answer, errors included.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode, urlsplit

#: the environment variable that gives the token non-interactively
TOKEN_ENV = "NARBENCH_EXPLORER_TOKEN"
#: a given token shorter than this is refused: it would be guessable
MIN_TOKEN = 16
COOKIE = "narbench_explorer_token"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")

#: the page loads its own script, style and charts and nothing else; cytoscape adds one <style>
#: element (`.__________cytoscape_container { position: relative; }`), allowed by its hash
CSP = ("default-src 'none'; script-src 'self'; "
       "style-src 'self' 'sha256-pgvDUBa4IjFA2yuSJ2cqcyxmNYJMborsd0ORcRv9vw8='; "
       "img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")
HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)


class TokenError(ValueError):
    """A given token too short to be safe; one line."""


def new_token() -> str:
    return secrets.token_urlsafe(32)


def choose_token(given: str | None, environ: dict[str, str]) -> str:
    """`given` (--token), else the environment's TOKEN_ENV, else a new random token."""
    token = given if given is not None else environ.get(TOKEN_ENV) or None
    if token is None:
        return new_token()
    if len(token) < MIN_TOKEN or not token.isprintable() or " " in token:
        raise TokenError(f"the explorer token must be at least {MIN_TOKEN} printable characters without spaces "
                         f"(got {len(token)}); leave --token and {TOKEN_ENV} unset for a random one")
    return token


@dataclass(frozen=True)
class Access:
    token: str
    hosts: frozenset[str]  #: host names (lower case, no port, IPv6 without brackets) a request may name

    @classmethod
    def local(cls, token: str | None = None, bound: str | None = None, allow_hosts=()) -> "Access":
        """Loopback names, the bound address unless it is a wildcard, and `allow_hosts`."""
        names = set(LOOPBACK_NAMES) | {h.strip().lower().strip("[]") for h in allow_hosts if h.strip()}
        if bound and not ipaddress.ip_address(bound).is_unspecified:
            names.add(bound.lower())
        return cls(token or new_token(), frozenset(names))

    def allows_token(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


def host_name(value: str) -> str:
    """The host of a Host header or an Origin's netloc, lower case, without port or IPv6 brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _headers(scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}


def cookie_name(scope) -> str:
    """The token's cookie, one per port: browsers share a host's cookies across its ports, so two
    explorers on one machine would otherwise overwrite each other's."""
    server = scope.get("server") or ("", 0)
    return f"{COOKIE}_{server[1]}"


def _given_token(scope, headers: dict[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("token "):
        return auth[6:].strip()
    if "x-narbench-token" in headers:
        return headers["x-narbench-token"]
    query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
    if "token" in query:
        return query["token"]
    cookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except Exception:  # noqa: BLE001 - a malformed cookie header is no token
        return None
    name = cookie_name(scope)
    return cookie[name].value if name in cookie else None


def _refusal(scope, headers: dict[str, str], access: Access) -> tuple[int, str] | None:
    """(status, message) when the request may not go on, else None."""
    host = headers.get("host")
    if host is None or host_name(host) not in access.hosts:
        return 403, "this server does not answer to that host name (start it with --allow-host NAME to add one)"
    navigation = (scope["method"] == "GET" and scope["path"] == "/" and headers.get("sec-fetch-mode") == "navigate")
    if headers.get("sec-fetch-site") in ("cross-site", "same-site") and not navigation:
        return 403, "requests from another site are refused"
    origin = headers.get("origin")
    if origin is not None:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or parts.netloc.lower() != host.strip().lower():
            return 403, "requests from another origin are refused"
    if not access.allows_token(_given_token(scope, headers)):
        return 401, "open the address narbench explore printed (it ends with ?token=...)"
    return None


def guard(app, access: Access):
    """`app` behind the checks of the module docstring, every answer with `HEADERS`."""

    async def guarded(scope, receive, send):
        if scope["type"] == "websocket":  # the explorer has none: refused before the app sees it
            return await send({"type": "websocket.close", "code": 1008})
        if scope["type"] != "http":  # lifespan
            return await app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *HEADERS]}
            await send(message)

        headers = _headers(scope)
        refused = _refusal(scope, headers, access)
        if refused is not None:
            status, text = refused
            body = json.dumps({"error": text, "status": status}).encode()
            await send_with_headers({"type": "http.response.start", "status": status,
                                     "headers": [(b"content-type", b"application/json"),
                                                 (b"content-length", str(len(body)).encode())]})
            return await send_with_headers({"type": "http.response.body", "body": body})
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        if scope["method"] == "GET" and scope["path"] == "/" and any(k == "token" for k, _ in query):
            # the first visit: keep the token in a cookie, drop it from the address (and the history)
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            cookie = f"{cookie_name(scope)}={access.token}; Path=/; HttpOnly; SameSite=Strict"
            await send_with_headers({"type": "http.response.start", "status": 303,
                                     "headers": [(b"location", ("/?" + rest if rest else "/").encode()),
                                                 (b"set-cookie", cookie.encode()), (b"content-length", b"0")]})
            return await send_with_headers({"type": "http.response.body", "body": b""})
        return await app(scope, receive, send_with_headers)

    guarded.access = access
    return guarded
