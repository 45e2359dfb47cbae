#!/usr/bin/env python3
"""A headless "browser" for OAuth tests: `follow.py URL` GETs URL and follows every redirect
(cookies kept), the way a user's browser would through tests/e2e/oauth/server.mjs's authorization
server, whose login and consent redirect straight on. It ends on the client's loopback redirect
URI (e.g. http://127.0.0.1:P/callback?code=...&state=...&iss=...), fetches it, and exits 0 once
that page answered (any HTTP status). Exits 1 if the chain ends anywhere else or fails.

Use as `BROWSER=/path/to/follow.py` (moniker runs `$BROWSER <url>`). Python stdlib only.

Env:
  FOLLOW_LOG   append each URL this script reached at a `/callback` path to this file, one a
               line (written before fetching it), so a test can see the authorization code.
  FOLLOW_TIMEOUT  seconds per request (default 10).
"""

from __future__ import annotations

import http.cookiejar
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

TIMEOUT = float(os.environ.get("FOLLOW_TIMEOUT", "10"))
MAX_HOPS = 20


def is_callback(url: str) -> bool:
    return urllib.parse.urlsplit(url).path.endswith("/callback")


def record(url: str) -> None:
    log = os.environ.get("FOLLOW_LOG")
    if log and is_callback(url):
        with open(log, "a", encoding="utf-8") as out:
            out.write(url + "\n")


def show(url: str) -> str:
    """The URL without its query (codes and states stay out of logs)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are followed by hand, so each hop's target is seen and recorded."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001
        return None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} URL", file=sys.stderr)
        return 2
    url = argv[1]
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), NoRedirect())
    for _ in range(MAX_HOPS):
        record(url)
        try:
            response = opener.open(urllib.request.Request(url, method="GET"), timeout=TIMEOUT)
            status, headers, body = response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:  # 3xx (not followed by urllib) and 4xx/5xx
            status, headers, body = error.code, error.headers, error.read()
        except (urllib.error.URLError, OSError) as error:
            print(f"follow.py: GET {show(url)} failed: {error}", file=sys.stderr)
            return 1
        print(f"follow.py: GET {show(url)} -> {status}", file=sys.stderr)
        location = headers.get("Location")
        if 300 <= status < 400 and location:
            url = urllib.parse.urljoin(url, location)
            continue
        if is_callback(url):
            return 0
        text = body.decode("utf-8", "replace")[:2000]
        print(f"follow.py: stopped at {show(url)} (HTTP {status}), not at a /callback:\n{text}", file=sys.stderr)
        return 1
    print(f"follow.py: more than {MAX_HOPS} redirects", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
