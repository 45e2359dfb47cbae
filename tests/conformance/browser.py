#!/usr/bin/env python3
"""A headless "browser" for the MCP conformance suite's client scenarios (client.sh sets
BROWSER to it): `browser.py URL` GETs the authorization URL that `moniker login` opens and
follows the redirects. The suite's authorization servers approve at once and redirect to the
redirect_uri with a code, so the chain ends on moniker's loopback callback
(http://127.0.0.1:<port>/callback), which completes the login.

Exits 0 when the last page answered 2xx, 1 otherwise. Logs each hop on stderr without its
query (the query carries the code and state). No proxy: every hop is local. Python standard
library only.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.parse
import urllib.request


def shown(url: str) -> str:
    """The URL without its query and fragment."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


class LoggingRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        print(f"browser.py: {code} -> {shown(newurl)}", file=sys.stderr)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: browser.py URL", file=sys.stderr)
        return 2
    url = sys.argv[1]
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), LoggingRedirects())
    print(f"browser.py: GET {shown(url)}", file=sys.stderr)
    try:
        with opener.open(url, timeout=20) as response:
            response.read()
            print(f"browser.py: {response.status} at {shown(response.url)}", file=sys.stderr)
            return 0
    except urllib.error.HTTPError as e:
        print(f"browser.py: {e.code} at {shown(e.url or url)}: {e.read()[:300]!r}", file=sys.stderr)
    except (OSError, ValueError) as e:
        print(f"browser.py: {shown(url)}: {e}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
