"""Who may talk to the API: the Host allowlist, the bearer token and the same-origin rule.

- **Host** (every route but the health probes): a page on ``evil.example`` whose DNS name is
  rebound to 127.0.0.1 reaches a server on loopback from the victim's browser, with
  ``Host: evil.example``. Only the names the server is known by are answered: the bound address,
  ``localhost``, ``127.0.0.1``, ``::1`` and ``OPTIFLOW_ALLOWED_HOSTS`` (``*``: any). 403 otherwise.
- **Token** (every ``/api`` route, when ``OPTIFLOW_API_TOKEN`` is set; required beyond
  loopback): ``Authorization: Bearer <token>``, compared in constant time. 401 otherwise. The
  page asks for it once and keeps it for the tab (sessionStorage); it reads the event stream
  with ``fetch`` so the token travels in that header too, never in a URL (URLs end up in access
  logs, proxy logs and browser history).
- **Origin** (writes): a browser names the page a write comes from; one from another origin
  (scheme, host and port) is refused. Clients that send no Origin (curl, scripts) are not
  browsers acting for someone else.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import tornado.httputil

from optiflow.errors import OptiflowError

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


class Refused(OptiflowError):
    """A request the guard turns away; ``status`` is its HTTP status."""

    status = 403

    def __init__(self, message: str, *, code: str, status: int, field: str | None = None) -> None:
        super().__init__(message, field=field, code=code)
        self.status = status


class Slots:
    """At most ``size`` of something at once (bodies being read, event streams open): a request
    that finds none free is answered 503 at once instead of being held (issue 27: 200 half-sent
    10 MB bodies held +333 MB; 600 event streams slowed every request)."""

    def __init__(self, size: int, what: str, setting: str) -> None:
        self.size, self.what, self.setting = size, what, setting
        self.used = 0
        self._lock = threading.Lock()

    def take(self) -> None:
        """One slot, or :class:`Refused` (503, with the limit and its setting)."""
        with self._lock:
            if self.used >= self.size:
                raise Refused(
                    f"{self.size} {self.what} at once already ({self.setting}); try again shortly",
                    code="busy",
                    status=503,
                )
            self.used += 1

    def give(self) -> None:
        with self._lock:
            self.used = max(0, self.used - 1)


@dataclass(frozen=True)
class Guard:
    token: str | None
    """The bearer token /api requires; None: no token (loopback only)."""
    hosts: frozenset[str]
    """Host names answered (lowercase, no port, no brackets); ``*`` answers any."""

    @classmethod
    def build(cls, token: str | None, hosts: Iterable[str] = ()) -> Guard:
        names = {normalize_host(h) for h in (*LOOPBACK_NAMES, *hosts) if h.strip()}
        return cls(token=token or None, hosts=frozenset(names))

    def with_host(self, host: str) -> Guard:
        """The same guard also answering ``host`` (the address the server is bound to)."""
        if not host or is_unspecified(host):
            return self
        return Guard(self.token, self.hosts | {normalize_host(host)})

    def check_host(self, request: tornado.httputil.HTTPServerRequest) -> None:
        if "*" in self.hosts:
            return
        name = normalize_host(tornado.httputil.split_host_and_port(request.host)[0])
        if name not in self.hosts:
            raise Refused(
                f"Host {request.host[:100]!r} is not a name this server answers to (OPTIFLOW_ALLOWED_HOSTS)",
                code="host_not_allowed",
                status=403,
                field="Host",
            )

    def check_token(self, request: tornado.httputil.HTTPServerRequest) -> None:
        if self.token is None:
            return
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise Refused(
                "this API needs a bearer token: Authorization: Bearer <OPTIFLOW_API_TOKEN>",
                code="unauthorized",
                status=401,
                field="Authorization",
            )
        if not tokens_match(given.strip(), self.token):
            raise Refused("wrong token", code="unauthorized", status=401, field="Authorization")

    @staticmethod
    def check_origin(request: tornado.httputil.HTTPServerRequest) -> None:
        """A write from a browser page of another origin (scheme, host, port) is refused."""
        origin = request.headers.get("Origin")
        if origin is None:
            return
        parts = urlsplit(origin)
        if (parts.scheme, parts.netloc.lower()) != (request.protocol, request.host.lower()):
            raise Refused(
                f"cross-origin request from {origin[:100]} refused",
                code="forbidden",
                status=403,
                field="Origin",
            )


def tokens_match(given: str, expected: str) -> bool:
    """Constant time, also in the length: both sides are hashed to 32 bytes first."""
    a = hashlib.sha256(given.encode("utf-8", "surrogateescape")).digest()
    b = hashlib.sha256(expected.encode("utf-8", "surrogateescape")).digest()
    return hmac.compare_digest(a, b)


def normalize_host(host: str) -> str:
    return host.strip().lower().removeprefix("[").removesuffix("]").rstrip(".")


def is_unspecified(host: str) -> bool:
    """``0.0.0.0``, ``::`` or empty: every interface."""
    if host in ("", "*"):
        return True
    try:
        return ipaddress.ip_address(normalize_host(host)).is_unspecified
    except ValueError:
        return False


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` keeps the server on this machine: a loopback address, or a
    name every address of which is loopback (a name that does not resolve is not)."""
    name = normalize_host(host)
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    if is_unspecified(host):
        return False
    try:
        infos = socket.getaddrinfo(name, None)
    except OSError:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses)
