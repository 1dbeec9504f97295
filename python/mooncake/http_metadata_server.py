# SPDX-License-Identifier: Apache-2.0
"""The transfer engine's HTTP metadata server (`python -m mooncake.http_metadata_server`, the
`mooncake_http_metadata_server` console script).

main() takes upstream's flags (--port, --host, --log-level) and runs this build's C server,
mooncake_http_metadata_server, with them when it is installed (same process id); without it, or
with --python, it serves the same protocol from this module:

  GET    /metadata?key=K   200 the value | 404 "metadata not found"
  PUT    /metadata?key=K   200 "metadata updated"; a key holding "rpc_meta" that exists: the
                           same value 200 "metadata unchanged", else 400 "Duplicate rpc_meta key
                           not allowed"
  DELETE /metadata?key=K   200 "metadata deleted" | 404 "metadata not found"
  GET    /health           200 "OK"

A missing or empty key is 400; other methods 405; other paths 404.  KVBootstrapServer (with
run(), close() and poll()) and KVPoll are upstream's class names, for code that embeds the server.
"""
import argparse
import logging
import signal
import sys
import threading
from enum import Enum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from mooncake import _binaries

MAX_VALUE_BYTES = 16 << 20


class KVPoll(Enum):
    """Status of the server (upstream's)."""
    Failed = 0
    Bootstrapping = 1
    WaitingForInput = 2
    Transferring = 3
    Success = 4


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mooncake-metadata"

    def log_message(self, fmt, *args):
        logging.debug("%s %s", self.address_string(), fmt % args)

    def _reply(self, code, body, ctype="application/json"):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _key(self):
        url = urlsplit(self.path)
        if url.path == "/health":
            return "/health", None
        if url.path != "/metadata":
            return None, None
        keys = parse_qs(url.query, keep_blank_values=True).get("key", [])
        if len(keys) > 1:
            return "/metadata", "Repeated key parameter"
        if not keys or not keys[0].strip():
            return "/metadata", "Missing key parameter"
        return "/metadata", keys[0]

    def _serve(self):
        path, key = self._key()
        if path is None:
            return self._reply(404, "Not found", "text/plain")
        if path == "/health":
            if self.command in ("GET", "HEAD"):
                return self._reply(200, "OK", "text/plain")
            return self._reply(405, "Method not allowed")
        if self.command not in ("GET", "PUT", "DELETE"):
            return self._reply(405, "Method not allowed")
        if key in ("Missing key parameter", "Repeated key parameter"):
            return self._reply(400, key)
        store, lock = self.server.kv_store, self.server.kv_lock
        if self.command == "GET":
            with lock:
                value = store.get(key)
            if value is None:
                return self._reply(404, "metadata not found")
            return self._reply(200, value)
        if self.command == "DELETE":
            with lock:
                found = store.pop(key, None) is not None
            if not found:
                return self._reply(404, "metadata not found")
            logging.debug("deleted %s", key)
            return self._reply(200, "metadata deleted")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_VALUE_BYTES:
            self.close_connection = True
            return self._reply(413, "Payload too large")
        data = self.rfile.read(length) if length else b""
        with lock:
            old = store.get(key)
            if "rpc_meta" in key and old is not None:
                if old == data:
                    return self._reply(200, "metadata unchanged")
                return self._reply(400, "Duplicate rpc_meta key not allowed")
            store[key] = data
        logging.debug("updated %s (%d bytes)", key, len(data))
        return self._reply(200, "metadata updated")

    do_GET = do_PUT = do_DELETE = do_POST = do_HEAD = do_PATCH = do_OPTIONS = _serve


class KVBootstrapServer:
    """The metadata server in a background thread of this process (upstream's class)."""

    def __init__(self, port: int, host: str = "0.0.0.0"):
        self.port = port
        self.host = host
        self.store = {}
        self.lock = threading.Lock()
        self.thread = None
        self._httpd = None

    def run(self):
        """Start serving in a daemon thread; the thread."""
        self._httpd = ThreadingHTTPServer((self.host, self.port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.kv_store = self.store
        self._httpd.kv_lock = self.lock
        self.port = self._httpd.server_address[1]
        self.thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self.thread.start()
        logging.info("HTTP Metadata Server started on %s:%d", self.host, self.port)
        return self.thread

    def close(self):
        """Stop serving."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self.thread is not None and self.thread.is_alive():
            self.thread.join(timeout=2)

    def poll(self) -> KVPoll:
        if self.thread is None or not self.thread.is_alive():
            return KVPoll.Failed
        return KVPoll.Success


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="HTTP Metadata Server for Mooncake",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--port", type=int, default=8080, help="Port to listen on")
    parser.add_argument("--host", type=str, default="0.0.0.0", help="Host to bind to")
    parser.add_argument("--log-level", type=str,
                        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
                        default="INFO", help="Logging level")
    parser.add_argument("--python", action="store_true",
                        help="serve from this module even when the C server is installed")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if not args.python:
        path = _binaries.find("mooncake_http_metadata_server")
        if path is not None:
            level = "ERROR" if args.log_level == "CRITICAL" else args.log_level
            return _binaries.exec_program("mooncake_http_metadata_server",
                                          ["--port=%d" % args.port, "--host=" + args.host,
                                           "--log-level=" + level])
    logging.basicConfig(level=getattr(logging, args.log_level),
                        format="%(asctime)s - %(name)s - %(levelname)s - %(message)s")
    server = KVBootstrapServer(port=args.port, host=args.host)
    try:
        server.run()
    except OSError as e:
        logging.error("cannot listen on %s:%d: %s", args.host, args.port, e)
        return 1
    done = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: done.set())
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    while not done.wait(1):
        pass
    logging.info("Shutting down...")
    server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
