# SPDX-License-Identifier: Apache-2.0
"""The store as a REST service: `python -m mooncake.mooncake_store_service` and the
`mc_store_rest_server` console script (upstream's, with its flags, endpoints, bodies and
status codes; served by the standard library's threading HTTP server instead of aiohttp).

Flags: --config FILE (a mooncake.json client configuration; without it MooncakeConfig's
environment variables), -D/--define key=value (overrides a configuration field, repeatable),
--port (8080), --max-wait-time (60: seconds to keep retrying the store's set-up).

Endpoints (JSON bodies; answers application/json unless said):

  PUT    /api/put                 {"key", "value"} (value a string)      200 {"status":"success"}
                                  400 missing key or value, 500 the put failed
  GET    /api/get/{key}           200 the bytes (application/octet-stream), 404 {"error": "Key
                                  not found"}, 500
  GET    /api/exist/{key}         200 {"exists": true|false}, 500
  DELETE /api/remove/{key}        200 {"status":"success"}, 500 {"error":"Remove operation
                                  failed"} (a missing key too, as upstream)
  DELETE /api/remove_all          200 {"status":"success removed N keys"}, 500
  POST   /api/mount               {"size", "protocol"?, "location"?}: allocate and mount a
                                  segment; 200 {"status","segment_ids","allocated_size"}, 400 a
                                  size that is not a positive integer, 500
  POST   /api/unmount             {"segment_ids", "grace_period_seconds"?}: unmount and free
                                  what /api/mount made; 400 no ids, 500
  POST   /api/mount_shm           {"name", "size", "offset"?, ...}: mount /dev/shm/<name>;
                                  200 {"status","segment_ids"}, 400 a bad name or no size, 500
  POST   /api/unmount_shm         {"segment_ids", "grace_period_seconds"?}; 500 with
                                  "failed_segment_ids" when some failed
  POST   /api/unmount_local_disk  {"grace_period_seconds"?} (0..3600): take the SSD area out of
                                  service (a preStop hook); 400 a malformed body or period
  POST   /api/reconfigure         {"mode": "decode", "path", "size", ...} mounts the file
                                  (make-before-break: the previous decode segments go once the
                                  new one is mounted); {"mode": "prefill"} unmounts them; 400 an
                                  unknown mode or a decode without path or size

A body that is not JSON is 500 with the parser's message (400 for unmount_local_disk), as
upstream; an unknown path is 404, a known path with another method 405; a body over 100 MiB 413.
"""
import argparse
import asyncio
import json
import logging
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from mooncake.mooncake_config import MooncakeConfig
from mooncake.store import MooncakeDistributedStore

_MAX_UNMOUNT_LOCAL_DISK_GRACE_PERIOD_SECONDS = 3600
_MAX_BODY = 100 * 1024 * 1024


def _shm_name_to_path(name):
    if not isinstance(name, str) or not name:
        return None
    normalized = name[1:] if name.startswith("/") else name
    if not normalized or "/" in normalized or normalized in {".", ".."}:
        return None
    return "/dev/shm/%s" % normalized


class _Reply(Exception):
    """Raised by a handler to answer at once."""

    def __init__(self, status, body, ctype="application/json; charset=utf-8"):
        super().__init__(status)
        self.status, self.body, self.ctype = status, body, ctype


def _json(status, obj):
    return _Reply(status, json.dumps(obj))


class MooncakeStoreService:
    """A store client set up from a MooncakeConfig, served over REST."""

    def __init__(self, config_path: str = None, cli_config: dict = None):
        self.store = None
        self.config = None
        self._setup_logging()
        self.current_mode = "prefill"
        self.mounted_segment_ids = []
        self.last_mount_info = {}
        self._state_lock = threading.Lock()
        self._httpd = None
        self._thread = None
        if config_path:
            self.config = MooncakeConfig.from_file(config_path)
        else:
            self.config = MooncakeConfig.load_from_env()
        for key, value in (cli_config or {}).items():
            if hasattr(self.config, key):
                setattr(self.config, key, value)
        logging.info("Mooncake configuration loaded")

    def _setup_logging(self):
        logging.basicConfig(level=logging.INFO,
                            format="%(asctime)s - %(name)s - %(levelname)s - %(message)s")

    def _setup_once(self):
        store = MooncakeDistributedStore()
        c = self.config
        ret = store.setup({
            "local_hostname": c.local_hostname,
            "metadata_server": c.metadata_server,
            "global_segment_size": c.global_segment_size,
            "local_buffer_size": c.local_buffer_size,
            "protocol": c.protocol,
            "rdma_devices": c.device_name,
            "master_server_addr": c.master_server_address,
            "enable_ssd_offload": c.enable_ssd_offload,
            "ssd_offload_path": c.ssd_offload_path,
            "tenant_id": c.tenant_id,
            "enable_client_http_server": c.enable_client_http_server,
            "client_http_port": c.client_http_port,
        })
        if ret != 0:
            store.close()
            raise RuntimeError("Store initialization failed (%d)" % ret)
        self.store = store

    async def start_store_service(self, max_wait_time: float = 60, shutdown_event=None):
        """Set the store up, retrying every second for max_wait_time seconds; True or False."""
        start, attempt = time.perf_counter(), 0
        while True:
            if shutdown_event is not None and shutdown_event.is_set():
                logging.info("Store startup cancelled by shutdown request")
                return False
            elapsed = time.perf_counter() - start
            if elapsed >= max_wait_time:
                logging.error("Store startup failed: exceeded max wait time of %ss after %d "
                              "attempts", max_wait_time, attempt)
                return False
            attempt += 1
            logging.info("Attempting to start store service (attempt %d, elapsed: %.1fs/%ss)",
                         attempt, elapsed, max_wait_time)
            try:
                await asyncio.get_running_loop().run_in_executor(None, self._setup_once)
                logging.info("Store service started successfully on %s",
                             self.config.local_hostname)
                return True
            except Exception as e:      # noqa: BLE001 - retried, as upstream
                remaining = max_wait_time - (time.perf_counter() - start)
                pause = min(1.0, remaining) if remaining > 0 else 0
                logging.warning("Store startup failed (attempt %d): %s. Retrying in %.1fs... "
                                "(remaining time: %.1fs)", attempt, e, pause, remaining)
                if pause > 0:
                    if shutdown_event is not None:
                        try:
                            await asyncio.wait_for(shutdown_event.wait(), timeout=pause)
                            return False
                        except asyncio.TimeoutError:
                            pass
                    else:
                        await asyncio.sleep(pause)

    async def start_http_service(self, port: int = 8080, host: str = "0.0.0.0"):
        service = self

        class Handler(_RestHandler):
            svc = service

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        logging.info("REST API started on port %d", self.port)
        return True

    async def stop(self):
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self.store:
            ret = self.store.close()
            self.store = None
            if ret not in (0, None):
                logging.warning("Mooncake service close returned %s", ret)
            else:
                logging.info("Mooncake service stopped")

    # ---- handlers: each raises _Reply ----

    def put(self, data):
        key, raw = data.get("key"), data.get("value")
        if not key or raw is None:
            raise _json(400, {"error": "Missing key or value"})
        if self.store.put(key, raw.encode()) != 0:
            raise _json(500, {"error": "PUT operation failed"})
        raise _json(200, {"status": "success"})

    def get(self, key):
        exists = self.store.is_exist(key)
        if exists == 0:
            raise _json(404, {"error": "Key not found"})
        if exists < 0:
            raise _json(500, {"error": "Exist check failed"})
        value = self.store.get(key)
        if value is None:
            raise _json(500, {"error": "GET operation failed"})
        if value == b"":
            exists = self.store.is_exist(key)
            if exists == 0:
                raise _json(404, {"error": "Key not found"})
            if exists < 0:
                raise _json(500, {"error": "Exist check failed"})
        raise _Reply(200, bytes(value), "application/octet-stream")

    def exist(self, key):
        exists = self.store.is_exist(key)
        if exists < 0:
            raise _json(500, {"error": "Exist check failed"})
        raise _json(200, {"exists": exists > 0})

    def remove(self, key):
        if self.store.remove(key) != 0:
            raise _json(500, {"error": "Remove operation failed"})
        raise _json(200, {"status": "success"})

    def remove_all(self):
        ret = self.store.remove_all()
        if ret < 0:
            raise _json(500, {"error": "RemoveAll operation failed"})
        raise _json(200, {"status": "success removed " + str(ret) + " keys"})

    def mount(self, data):
        size = data.get("size")
        protocol = data.get("protocol", self.config.protocol)
        location = data.get("location", "")
        if type(size) is not int or size <= 0:
            raise _json(400, {"error": "Invalid size, must be a positive integer"})
        result = self.store.allocate_and_mount_segment(size, protocol, location)
        if result["ret"] != 0:
            raise _json(500, {"error": "Allocate and mount failed, ret=%s" % result["ret"]})
        raise _json(200, {"status": "success", "segment_ids": list(result["segment_ids"]),
                          "allocated_size": result["allocated_size"]})

    @staticmethod
    def _ids(data):
        ids = data.get("segment_ids", [])
        if isinstance(ids, str):
            ids = [ids]
        if not ids:
            raise _json(400, {"error": "Missing segment_ids"})
        return ids

    def unmount(self, data):
        ids = self._ids(data)
        ret = self.store.unmount_and_free_segment(ids, data.get("grace_period_seconds", 0))
        if ret != 0:
            raise _json(500, {"error": "Unmount and free failed, ret=%s" % ret})
        raise _json(200, {"status": "success"})

    def mount_shm(self, data):
        path = _shm_name_to_path(data.get("name"))
        size = data.get("size")
        if not path or size is None:
            raise _json(400, {"error": "Missing or invalid name or size"})
        result = self.store.mount_segment(path, size, data.get("offset", 0),
                                          data.get("protocol", self.config.protocol),
                                          data.get("location", ""))
        if result["ret"] != 0:
            raise _json(500, {"error": "Mount failed, ret=%s" % result["ret"]})
        raise _json(200, {"status": "success", "segment_ids": list(result["segment_ids"])})

    def unmount_shm(self, data):
        ids = self._ids(data)
        grace = data.get("grace_period_seconds", 0)
        failed = []
        with self._state_lock:
            for sid in ids:
                if self.store.unmount_segment([sid], grace) != 0:
                    failed.append(sid)
                    continue
                if sid in self.mounted_segment_ids:
                    self.mounted_segment_ids.remove(sid)
            if not self.mounted_segment_ids:
                self.current_mode = "prefill"
        if failed:
            raise _json(500, {"error": "Unmount failed for one or more segments",
                              "failed_segment_ids": failed})
        raise _json(200, {"status": "success"})

    def unmount_local_disk(self, data):
        if not isinstance(data, dict):
            raise _json(400, {"error": "Request body must be a JSON object"})
        grace = data.get("grace_period_seconds", 0)
        if (type(grace) is not int or grace < 0 or
                grace > _MAX_UNMOUNT_LOCAL_DISK_GRACE_PERIOD_SECONDS):
            raise _json(400, {"error": "Invalid grace_period_seconds, must be a non-negative "
                                       "integer no greater than %d"
                                       % _MAX_UNMOUNT_LOCAL_DISK_GRACE_PERIOD_SECONDS})
        ret = self.store.unmount_local_disk_segment(grace)
        if ret != 0:
            raise _json(500, {"error": "Unmount local disk failed, ret=%s" % ret})
        raise _json(200, {"status": "success"})

    def reconfigure(self, data):
        mode = data.get("mode", "").lower()
        if mode == "decode":
            path, size = data.get("path"), data.get("size")
            offset = data.get("offset", 0)
            protocol = data.get("protocol", self.config.protocol)
            location = data.get("location", "")
            if not path or size is None:
                raise _json(400, {"error": "Missing path or size for decode mode"})
            with self._state_lock:
                previous = list(self.mounted_segment_ids)
                result = self.store.mount_segment(path, size, offset, protocol, location)
                if result["ret"] != 0:
                    if previous:
                        raise _json(500, {"error": "Mount failed, ret=%s; keeping previous "
                                                   "decode segments" % result["ret"],
                                          "mode": self.current_mode})
                    self.current_mode = "prefill"
                    self.mounted_segment_ids.clear()
                    self.last_mount_info.clear()
                    raise _json(500, {"error": "Mount failed, ret=%s; rolled back to prefill"
                                               % result["ret"], "mode": self.current_mode})
                failed = [sid for sid in previous if self.store.unmount_segment([sid]) != 0]
                if failed:
                    logging.warning("Reconfigure decode: new mount succeeded but unmount of "
                                    "previous segments %s failed; keeping them tracked", failed)
                self.mounted_segment_ids = list(result["segment_ids"]) + failed
                self.current_mode = "decode"
                self.last_mount_info = {"path": path, "offset": offset, "size": size,
                                        "protocol": protocol, "location": location}
            raise _json(200, {"status": "success", "mode": self.current_mode,
                              "segment_ids": self.mounted_segment_ids})
        if mode == "prefill":
            with self._state_lock:
                if self.mounted_segment_ids:
                    ret = self.store.unmount_segment(self.mounted_segment_ids)
                    if ret != 0:
                        raise _json(500, {"error": "Unmount failed, ret=%s" % ret})
                    self.mounted_segment_ids.clear()
                self.current_mode = "prefill"
                self.last_mount_info.clear()
            raise _json(200, {"status": "success", "mode": self.current_mode})
        raise _json(400, {"error": "Invalid mode. Use 'decode' or 'prefill'"})


# (method, path or path prefix ending in "/", handler name, operation, takes a JSON body)
_ROUTES = [
    ("POST", "/api/reconfigure", "reconfigure", "RECONFIGURE", True),
    ("POST", "/api/mount_shm", "mount_shm", "MOUNT_SHM", True),
    ("POST", "/api/unmount_shm", "unmount_shm", "UNMOUNT_SHM", True),
    ("POST", "/api/mount", "mount", "MOUNT", True),
    ("POST", "/api/unmount", "unmount", "UNMOUNT", True),
    ("POST", "/api/unmount_local_disk", "unmount_local_disk", "UNMOUNT_LOCAL_DISK", True),
    ("PUT", "/api/put", "put", "PUT", True),
    ("GET", "/api/get/", "get", "GET", False),
    ("GET", "/api/exist/", "exist", "EXIST", False),
    ("DELETE", "/api/remove/", "remove", "REMOVE", False),
    ("DELETE", "/api/remove_all", "remove_all", "REMOVE_ALL", False),
]


class _RestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    svc = None

    def log_message(self, fmt, *args):
        logging.debug("%s %s", self.address_string(), fmt % args)

    def _send(self, r):
        body = r.body.encode() if isinstance(r.body, str) else r.body
        self.send_response(r.status)
        self.send_header("Content-Type", r.ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _route(self, path):
        """(route, key) for path, or (None, known) where known says another method has it."""
        known = False
        for route in _ROUTES:
            method, pattern = route[0], route[1]
            if pattern.endswith("/"):
                rest = path[len(pattern):] if path.startswith(pattern) else None
                hit = rest is not None and rest != "" and "/" not in rest
                key = unquote(rest) if hit else None
            else:
                hit, key = path == pattern, None
            if hit and method == self.command:
                return route, key
            known = known or hit
        return None, known

    def _handle(self):
        path = urlsplit(self.path).path
        route, key = self._route(path)
        length = int(self.headers.get("Content-Length") or 0)
        if route is None:
            self.close_connection = length > 0
            if key:
                return self._send(_Reply(405, "405: Method Not Allowed", "text/plain"))
            return self._send(_Reply(404, "404: Not Found", "text/plain"))
        if length > _MAX_BODY:
            self.close_connection = True
            return self._send(_Reply(413, "413: Request Entity Too Large", "text/plain"))
        body = self.rfile.read(length) if length else b""
        _, _, name, op, takes_body = route
        start = time.perf_counter()
        try:
            if takes_body:
                try:
                    data = json.loads(body.decode() if body else "")
                except ValueError as e:
                    if name == "unmount_local_disk":
                        raise _json(400, {"error": "Malformed JSON body"})
                    raise _json(500, {"error": str(e)})
                if not isinstance(data, dict) and name != "unmount_local_disk":
                    raise _json(500, {"error": "'%s' object has no attribute 'get'"
                                               % type(data).__name__})
                getattr(self.svc, name)(data)
            elif key is not None:
                getattr(self.svc, name)(key)
            else:
                getattr(self.svc, name)()
            raise _json(500, {"error": "no answer"})
        except _Reply as r:
            reply = r
        except Exception as e:      # noqa: BLE001 - reported as upstream's handlers do
            logging.error("%s error: %s", op, e)
            reply = _json(500, {"error": str(e)})
        logging.info("%s operation completed in %.2f ms", op,
                     (time.perf_counter() - start) * 1000)
        self._send(reply)

    do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _handle


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description="Mooncake Store Service with REST API")
    parser.add_argument("--config", type=str, help="Path to Mooncake config file",
                        required=False)
    parser.add_argument("-D", "--define", action="append", default=[],
                        help="Override configuration with key=value pairs "
                             "(e.g., -Dlocal_hostname=example.com)")
    parser.add_argument("--port", type=int, default=8080, required=False,
                        help="HTTP API port (default: 8080)")
    parser.add_argument("--max-wait-time", type=float, default=60, required=False,
                        help="Maximum total wait time in seconds (default: 60)")
    return parser.parse_args(argv)


async def main(argv=None):
    args = parse_arguments(argv)
    cli_config = {}
    for item in args.define:
        if "=" in item:
            key, value = item.split("=", 1)
            cli_config[key] = value
        else:
            logging.warning("Ignoring invalid CLI config: %s", item)
    service = MooncakeStoreService(args.config, cli_config)
    shutdown = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, shutdown.set)
    try:
        if not await service.start_store_service(args.max_wait_time, shutdown):
            if shutdown.is_set():
                return 0
            raise RuntimeError("Failed to start store service")
        await service.start_http_service(args.port)
        logging.info("Mooncake Store Service is running")
        await shutdown.wait()
        logging.info("Shutting down")
    finally:
        await service.stop()
    return 0


def sync_main():
    """The `mc_store_rest_server` console script."""
    return asyncio.run(main())


if __name__ == "__main__":
    sync_main()
