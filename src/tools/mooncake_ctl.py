#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""mooncake_ctl: look inside a running mooncake cluster through the master's admin HTTP.

Commands: status, segments, keys [PATTERN], get-info KEY, remove KEY [--force],
remove-all [--force], metrics, capacity --model-config FILE (--tokens N | --token-log FILE),
capacity [--segment-size SIZE] [--hugepage-size 2MB|1GB] (segment population, hugetlb pool),
drain SEGMENT... [--targets A,B] [--max-concurrency N] [--wait], drain --query JOB,
drain --cancel JOB (drain jobs: move a segment's objects elsewhere before it is unmounted).
Human tables by default, --json for scripts.  Exit status 0, 1 on a failed request, 2 on bad
usage.
"""
import argparse
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

VERSION = "@PACKAGE_VERSION@"
DTYPE_BYTES = {"float16": 2, "fp16": 2, "half": 2, "bfloat16": 2, "bf16": 2, "float32": 4,
               "fp32": 4, "float": 4, "float8": 1, "fp8": 1, "float8_e4m3fn": 1,
               "float8_e5m2": 1, "int8": 1, "uint8": 1, "float64": 8}


class CtlError(Exception):
    pass


# The cluster secret (--cluster-secret-file or MOONCAKE_CLUSTER_SECRET_FILE): every request is
# signed with it (the X-Mooncake-Auth header, doc/protocol.md).
SECRET = None
# For https:// masters: the TLS context (--tls-ca-file, --tls-cert-file, --tls-key-file).
TLS = None


def load_secret(path):
    """The secret's bytes, trailing white space removed, as the daemons read it."""
    try:
        st = os.stat(path)
        if st.st_mode & stat.S_IRWXO:
            raise CtlError("cluster secret %s: readable by others; chmod 600 it" % path)
        with open(path, "rb") as f:
            key = f.read(4096).rstrip(b" \t\r\n")
    except OSError as e:
        raise CtlError("cluster secret %s: %s" % (path, e.strerror))
    if len(key) < 16:
        raise CtlError("cluster secret %s: at least 16 bytes are needed" % path)
    return key


def sign(key, method, uri, body):
    ts = str(int(time.time()))
    nonce = secrets.token_hex(16)
    msg = "mooncake-http-v1\n%s\n%s\n%s\n%s\n%s" % (method, uri, ts, nonce,
                                                    hashlib.sha256(body).hexdigest())
    return "%s:%s:%s" % (ts, nonce, hmac.new(key, msg.encode(), hashlib.sha256).hexdigest())


def request(base, path, method="GET", body=None):
    url = base.rstrip("/") + path
    data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
    req = urllib.request.Request(url, method=method, data=data)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    if SECRET is not None:
        uri = urllib.parse.urlsplit(url)
        target = (uri.path or "/") + ("?" + uri.query if uri.query else "")
        req.add_header("X-Mooncake-Auth", sign(SECRET, method, target, data or b""))
    try:
        with urllib.request.urlopen(req, timeout=10, context=TLS) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as e:
        raise CtlError("cannot reach the master's admin HTTP at %s: %s" % (base, e))


def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


def human(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.2f %s" % (n, unit))
        n /= 1024


def table(rows, headers):
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)] if rows else \
        [len(h) for h in headers]
    fmt = "  ".join("%%-%ds" % w for w in widths)
    lines = [fmt % tuple(headers)]
    lines += [fmt % tuple(str(x) for x in r) for r in rows]
    return "\n".join(lines)


def metrics_of(args):
    status, text = request(args.master, "/metrics")
    if status != 200:
        raise CtlError("/metrics answered %d" % status)
    return parse_metrics(text)


def cmd_status(args):
    m = metrics_of(args)
    status, health = request(args.master, "/health")
    h = json.loads(health) if status == 200 else {}
    info = {"role": h.get("role", "unknown"), "state": h.get("ha_state", "unknown"),
            "capacity_bytes": int(m.get("master_total_capacity_bytes", 0)),
            "used_bytes": int(m.get("master_allocated_bytes", 0)),
            "keys": int(m.get("master_key_count", 0)),
            "soft_pinned_keys": int(m.get("master_soft_pin_key_count", 0)),
            "clients": int(m.get("master_active_clients", 0)),
            "persistence_ok": h.get("persistence_ok", True),
            "persist_commit_failures": int(m.get("master_persist_commit_failures_total", 0)),
            "persist_refusing_seconds": float(m.get("master_persist_refusing_seconds_total", 0))}
    if args.json:
        return info
    cap = info["capacity_bytes"]
    pct = 100.0 * info["used_bytes"] / cap if cap else 0.0
    return "\n".join([
        "role:      %s (%s)" % (info["role"], info["state"]),
        "capacity:  %s used of %s (%.1f%%)" % (human(info["used_bytes"]), human(cap), pct),
        "keys:      %d (soft-pinned: %d)" % (info["keys"], info["soft_pinned_keys"]),
        "clients:   %d" % info["clients"],
        "persistence: %s" % ("ok" if info["persistence_ok"] else
                             "FAILING: the master cannot write its --persist_path file"),
        "             %d failed commits, %.1f s spent failing" % (
            info["persist_commit_failures"], info["persist_refusing_seconds"])])


def cmd_segments(args):
    status, text = request(args.master, "/get_segments_detail")
    if status != 200:
        raise CtlError("/get_segments_detail answered %d" % status)
    segs = json.loads(text).get("segments", [])
    if args.json:
        return segs
    def state(s):
        # The client's liveness, and what that means for the segment's objects.
        st = s.get("client_state", "active").upper()
        if s.get("status") == "DORMANT":
            return "%s/DORMANT(%ds)" % (st, s.get("dormant_remaining_sec", 0))
        return st

    def health(s):
        if s.get("health") == "unhealthy":
            return "UNHEALTHY(%.1fs)" % (s.get("unhealthy_remaining_ms", 0) / 1000.0)
        return "healthy"

    rows = [(s["segment_name"], s["te_endpoint"], human(s["allocator_used_bytes"]),
             human(s["size_bytes"]), "%.1f%%" % s["allocator_usage_percent"], state(s),
             health(s)) for s in segs]
    return table(rows, ["SEGMENT", "ENDPOINT", "USED", "CAPACITY", "USE%", "STATE", "HEALTH"])


def cmd_keys(args):
    status, text = request(args.master, "/get_all_keys")
    if status != 200:
        raise CtlError("/get_all_keys answered %d" % status)
    keys = [k for k in text.splitlines() if k]
    if args.pattern:
        try:
            rx = re.compile(args.pattern)
        except re.error as e:
            raise CtlError("bad pattern: %s" % e)
        keys = [k for k in keys if rx.search(k)]
    keys.sort()
    return keys if args.json else "\n".join(keys)


def cmd_get_info(args):
    q = urllib.parse.urlencode({"keys": args.key})
    status, text = request(args.master, "/batch_query_keys?" + q)
    if status != 200:
        raise CtlError("/batch_query_keys answered %d" % status)
    entry = json.loads(text).get("data", {}).get(args.key, {})
    if not entry.get("ok"):
        raise CtlError("%s: %s" % (args.key, entry.get("error", "OBJECT_NOT_FOUND")))
    reps = entry.get("values", [])
    checksum = entry.get("object_checksum")
    if args.json:
        out = {"key": args.key, "replicas": reps}
        if checksum is not None:
            out["object_checksum"] = checksum
        return out
    rows = [(i, r["transport_endpoint_"], "0x%x" % r["buffer_address_"], r["size_"],
             r["protocol_"]) for i, r in enumerate(reps)]
    head = "key: %s\n" % args.key
    if checksum is not None:
        head += "object_checksum: %s\n" % checksum
    return head + table(rows, ["REPLICA", "ENDPOINT", "ADDRESS", "SIZE", "PROTOCOL"])


def cmd_remove(args):
    q = urllib.parse.urlencode({"key": args.key, "force": "true" if args.force else "false"})
    status, text = request(args.master, "/api/v1/remove?" + q, "POST")
    body = json.loads(text) if text.startswith("{") else {}
    if status != 200:
        raise CtlError("remove %s: %s (%s)" % (args.key, body.get("error_message", status),
                                               body.get("error_code", "")))
    return body if args.json else "removed %s" % args.key


def cmd_remove_all(args):
    q = "?force=true" if args.force else ""
    status, text = request(args.master, "/api/v1/remove_all" + q, "POST")
    if status != 200:
        raise CtlError("remove_all answered %d" % status)
    body = json.loads(text)
    return body if args.json else "removed %d objects" % body.get("removed_count", 0)


def drain_answer(status, text, what):
    try:
        body = json.loads(text)
    except ValueError:
        body = {}
    if status != 200 or not body.get("success"):
        raise CtlError("%s: %s (%s)" % (what, body.get("error_message", "HTTP %d" % status),
                                        body.get("error_code", "")))
    return body


def drain_line(job):
    return ("job %s: %s, %d moved (%s), %d failed, %d blocked, %d in flight: %s"
            % (job["job_id"], job["status_name"], job["succeeded_units"],
               human(job["migrated_bytes"]), job["failed_units"], job["blocked_units"],
               job["active_units"], job["message"]))


def drain_query(args, job_id):
    q = urllib.parse.urlencode({"job_id": job_id})
    status, text = request(args.master, "/api/v1/drain_jobs/query?" + q)
    return drain_answer(status, text, "drain job %s" % job_id)


def cmd_drain(args):
    if args.query:
        job = drain_query(args, args.query)
        return job if args.json else drain_line(job)
    if args.cancel:
        q = urllib.parse.urlencode({"job_id": args.cancel})
        status, text = request(args.master, "/api/v1/drain_jobs/cancel?" + q, "POST")
        body = drain_answer(status, text, "cancel of drain job %s" % args.cancel)
        return body if args.json else "drain job %s canceled" % args.cancel
    req = {"segments": args.segments, "max_concurrency": args.max_concurrency}
    if args.targets:
        req["target_segments"] = args.targets
    status, text = request(args.master, "/api/v1/drain_jobs", "POST", req)
    body = drain_answer(status, text, "drain of %s" % " ".join(args.segments))
    if not args.wait:
        return body if args.json else "drain job %s created" % body["job_id"]
    deadline = time.time() + args.wait
    while True:
        job = drain_query(args, body["job_id"])
        if job["status_name"] in ("SUCCEEDED", "FAILED", "CANCELED"):
            break
        if time.time() > deadline:
            raise CtlError("drain job %s still %s after %ds" % (body["job_id"],
                                                                job["status_name"], args.wait))
        time.sleep(0.5)
    if job["status_name"] != "SUCCEEDED":
        raise CtlError(drain_line(job))
    return job if args.json else drain_line(job)


def cmd_metrics(args):
    status, text = request(args.master, "/metrics")
    if status != 200:
        raise CtlError("/metrics answered %d" % status)
    return parse_metrics(text) if args.json else text.rstrip("\n")


def kv_bytes_per_token(cfg):
    """KV-cache bytes one token occupies: kv_heads x head_dim x 2 (K and V) x dtype x layers."""
    try:
        hidden = int(cfg["hidden_size"])
        heads = int(cfg["num_attention_heads"])
        layers = int(cfg["num_hidden_layers"])
    except (KeyError, TypeError, ValueError) as e:
        raise CtlError("model config lacks %s" % e)
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    dtype = str(cfg.get("torch_dtype", "float16")).replace("torch.", "").lower()
    if dtype not in DTYPE_BYTES:
        raise CtlError("unknown torch_dtype %r" % dtype)
    return kv_heads * head_dim * 2 * DTYPE_BYTES[dtype] * layers


def tokens_from_log(path):
    total = 0
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                raise CtlError("%s:%d: not JSON" % (path, n))
            for field in ("retained_tokens", "tokens", "input_length"):
                if field in entry:
                    total += int(entry[field])
                    break
    return total


def used_from_log(path):
    """The last 'Mem Storage: X / Y' (or v0.3.5 'Storage:') figure in a master log."""
    units = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
    used = None
    rx = re.compile(r"(?:Mem )?Storage: ([0-9.]+) (B|KB|MB|GB|TB) /")
    with open(path, errors="replace") as f:
        for line in f:
            m = rx.search(line)
            if m:
                used = float(m.group(1)) * units[m.group(2)]
    if used is None:
        raise CtlError("no storage line in %s" % path)
    return int(used)


SEG_RX = re.compile(r'^(segment_[a-z_]+)\{segment="((?:[^"\\]|\\.)*)"\}$')
HUGE_SIZES = {"2MB": 2 << 20, "1GB": 1 << 30}


def huge_pages(size, page):
    return (size + page - 1) // page


def pool_line(size, page_name):
    page = HUGE_SIZES[page_name]
    pages = huge_pages(size, page)
    sysfs = "/sys/kernel/mm/hugepages/hugepages-%dkB/nr_hugepages" % (page >> 10)
    how = ("sysctl vm.nr_hugepages=%d or echo %d > %s" % (pages, pages, sysfs)
           if page_name == "2MB" else "echo %d > %s (at boot: hugepagesz=1G hugepages=%d)"
           % (pages, sysfs, pages))
    return pages, how


def segment_memory(args):
    """Memory segments from /metrics: total and populated bytes, and the hugetlb pages each host
    needs to hold its segments."""
    status, text = request(args.master, "/metrics")
    if status != 200:
        raise CtlError("/metrics answered %d" % status)
    segs = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        mm = SEG_RX.match(name)
        if mm:
            segs.setdefault(mm.group(2), {})[mm.group(1)] = int(float(value))
    rows = []
    hosts = {}
    for name in sorted(segs):
        total = segs[name].get("segment_total_capacity_bytes", 0)
        pop = segs[name].get("segment_populated_bytes")
        rows.append({"segment": name, "total_bytes": total, "populated_bytes": pop})
        host = name.rsplit(":", 1)[0]
        hosts[host] = hosts.get(host, 0) + huge_pages(total, HUGE_SIZES[args.hugepage_size])
    return rows, hosts


def cmd_capacity(args):
    if args.model_config is None:
        out = {}
        if args.segment_size is not None:
            pages, how = pool_line(args.segment_size, args.hugepage_size)
            out["hugepages"] = {"segment_bytes": args.segment_size,
                                "hugepage_size": args.hugepage_size, "pages": pages}
            line = ("a %s segment on %s pages needs %d pages: %s (plus the pages other "
                    "programs hold: HugePages_Total - HugePages_Free in /proc/meminfo)"
                    % (human(args.segment_size), args.hugepage_size, pages, how))
            if args.json:
                return out
            return line
        rows, hosts = segment_memory(args)
        out["segments"] = rows
        out["hugepages_per_host"] = {h: {"hugepage_size": args.hugepage_size, "pages": n}
                                     for h, n in hosts.items()}
        if args.json:
            return out
        lines = ["memory segments:", table(
            [(r["segment"], human(r["total_bytes"]),
              "not reported" if r["populated_bytes"] is None else "%s (%.0f%%)" % (
                  human(r["populated_bytes"]),
                  100.0 * r["populated_bytes"] / r["total_bytes"] if r["total_bytes"] else 0))
             for r in rows], ["SEGMENT", "TOTAL", "POPULATED"])]
        if hosts:
            lines.append("hugetlb pool to hold them with --use_hugepage (per host, besides what "
                         "other programs hold):")
            for h, n in sorted(hosts.items()):
                lines.append("  %s: %d pages of %s: %s" % (
                    h, n, args.hugepage_size, pool_line(n * HUGE_SIZES[args.hugepage_size],
                                                        args.hugepage_size)[1]))
        return "\n".join(lines)
    with open(args.model_config) as f:
        cfg = json.load(f)
    per_token = kv_bytes_per_token(cfg)
    if args.tokens is not None:
        tokens = args.tokens
    elif args.token_log:
        tokens = tokens_from_log(args.token_log)
    else:
        tokens = None
    out = {"kv_bytes_per_token": per_token}
    if tokens is not None:
        expected = tokens * per_token
        if args.master_log:
            used = used_from_log(args.master_log)
            source = args.master_log
        else:
            used = int(metrics_of(args).get("master_allocated_bytes", 0))
            source = args.master
        ratio = used / expected if expected else float("inf") if used else 1.0
        if expected == 0 and used == 0:
            verdict = "expected"
        elif ratio > 1 + args.tolerance:
            verdict = "unexpected saturation"
        elif ratio < 1 - args.tolerance:
            verdict = "below expectation (evicted or not yet stored)"
        else:
            verdict = "expected"
        out.update({"retained_tokens": tokens, "expected_bytes": expected, "used_bytes": used,
                    "usage_source": source, "ratio": round(ratio, 4), "verdict": verdict})
    if args.json:
        return out
    lines = ["KV bytes per token: %d (%s)" % (per_token, human(per_token))]
    if tokens is not None:
        lines += ["retained tokens:    %d" % tokens,
                  "expected KV memory: %d (%s)" % (out["expected_bytes"],
                                                   human(out["expected_bytes"])),
                  "used by the store:  %d (%s) from %s" % (out["used_bytes"],
                                                            human(out["used_bytes"]), source),
                  "ratio used/expected: %.3f" % out["ratio"],
                  "verdict: %s" % verdict]
    return "\n".join(lines)


class OneLineParser(argparse.ArgumentParser):
    """Bad usage is one line on stderr and status 2, as with the daemons."""

    def error(self, message):
        self.exit(2, "%s: %s (see --help)\n" % (self.prog, message.replace("\n", " ")))


HOST_RX = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?)"
                     r"(:([0-9]{1,5}))?$")


def master_url(value):
    """--master: host[:port] or http(s)://host[:port][/path]; the URL to use."""
    rest = value
    if "://" in value:
        scheme, _, rest = value.partition("://")
        if scheme not in ("http", "https"):
            raise argparse.ArgumentTypeError("invalid value '%s' for --master (expected "
                                             "http://host[:port])" % value)
    auth = rest.split("/", 1)[0]
    m = HOST_RX.match(auth)
    if not m or ".." in auth or (m.group(4) and not 1 <= int(m.group(4)) <= 65535):
        raise argparse.ArgumentTypeError("invalid value '%s' for --master (expected "
                                         "http://host[:port], port 1-65535)" % value)
    return value if "://" in value else "http://" + value


def non_negative_int(name):
    def parse(value):
        try:
            n = int(value)
        except ValueError:
            n = -1
        if n < 0:
            raise argparse.ArgumentTypeError("invalid value '%s' for %s (expected an integer "
                                             ">= 0)" % (value, name))
        return n
    return parse


def non_negative_float(name):
    def parse(value):
        try:
            x = float(value)
        except ValueError:
            x = -1.0
        if not x >= 0 or x == float("inf"):
            raise argparse.ArgumentTypeError("invalid value '%s' for %s (expected a number "
                                             ">= 0)" % (value, name))
        return x
    return parse


def readable_file(name):
    def check(value):
        try:
            with open(value, "rb"):
                pass
        except OSError as e:
            raise argparse.ArgumentTypeError("invalid value '%s' for %s: %s" %
                                             (value, name, e.strerror or e))
        return value
    return check


def size_arg(name):
    units = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20,
             "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
             "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}

    def check(value):
        mm = re.match(r"^\s*([0-9]+)\s*([A-Za-z]*)\s*$", value)
        if not mm or mm.group(2).lower() not in units or int(mm.group(1)) == 0:
            raise argparse.ArgumentTypeError("invalid value '%s' for %s (expected a size such "
                                             "as 4GB)" % (value, name))
        return int(mm.group(1)) * units[mm.group(2).lower()]
    return check


def hugepage_arg(value):
    for k in HUGE_SIZES:
        if value.lower() == k.lower():
            return k
    raise argparse.ArgumentTypeError("invalid value '%s' for --hugepage-size (expected 2MB or "
                                     "1GB)" % value)


def main(argv=None):
    p = OneLineParser(prog="mooncake_ctl", description=__doc__.splitlines()[0])
    p.add_argument("--master", default="http://127.0.0.1:9003", type=master_url,
                   help="the master's admin HTTP address (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--tls-ca-file", type=readable_file("--tls-ca-file"),
                   default=os.environ.get("MOONCAKE_TLS_CA_FILE") or None,
                   help="CA certificates to verify an https:// master (default: "
                   "$MOONCAKE_TLS_CA_FILE)")
    p.add_argument("--tls-cert-file", type=readable_file("--tls-cert-file"),
                   default=os.environ.get("MOONCAKE_TLS_CERT_FILE") or None,
                   help="client certificate for a master that asks for one")
    p.add_argument("--tls-key-file", type=readable_file("--tls-key-file"),
                   default=os.environ.get("MOONCAKE_TLS_KEY_FILE") or None,
                   help="key of --tls-cert-file")
    p.add_argument("--cluster-secret-file", dest="secret_file",
                   type=readable_file("--cluster-secret-file"), default=os.environ.get("MOONCAKE_CLUSTER_SECRET_FILE") or None,
                   help="sign requests with the cluster secret in this file (default: "
                   "$MOONCAKE_CLUSTER_SECRET_FILE)")
    p.add_argument("--version", action="version", version="mooncake_ctl " + VERSION)
    sub = p.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    sub.add_parser("status", help="role, capacity, keys and clients")
    sub.add_parser("segments", help="segments, their usage, their client's liveness "
                   "(active, suspected, offline; dormant) and health")
    k = sub.add_parser("keys", help="stored keys, optionally matching a regex")
    k.add_argument("pattern", nargs="?")
    g = sub.add_parser("get-info", help="a key's replicas and where they live")
    g.add_argument("key")
    r = sub.add_parser("remove", help="remove a key")
    r.add_argument("key")
    r.add_argument("--force", action="store_true", help="even while a read lease is held")
    ra = sub.add_parser("remove-all", help="remove every object")
    ra.add_argument("--force", action="store_true", help="even objects under a read lease")
    sub.add_parser("metrics", help="the Prometheus metrics")
    sub.add_parser("token", help="print the bearer token derived from the cluster secret "
                   "(Authorization: Bearer TOKEN for curl)")
    c = sub.add_parser("capacity", help="explain the store's memory use by retained tokens; "
                       "without --model-config: each segment's total and populated bytes and "
                       "the hugetlb pool that holds them")
    c.add_argument("--model-config", type=readable_file("--model-config"), help="the model's config.json")
    c.add_argument("--segment-size", type=size_arg("--segment-size"),
                   help="print the hugetlb pages a segment of this size needs (e.g. 4GB)")
    c.add_argument("--hugepage-size", type=hugepage_arg, default="2MB",
                   help="huge page size for the pool figures: 2MB or 1GB (default: %(default)s)")
    src = c.add_mutually_exclusive_group()
    src.add_argument("--tokens", type=non_negative_int("--tokens"), help="retained tokens")
    src.add_argument("--token-log", type=readable_file("--token-log"), help="JSON lines with retained_tokens (or tokens)")
    c.add_argument("--master-log", type=readable_file("--master-log"), help="read usage from a master log instead of /metrics")
    c.add_argument("--tolerance", type=non_negative_float("--tolerance"), default=0.25,
                   help="allowed relative difference (default: %(default)s)")
    d = sub.add_parser("drain", help="drain segments: move their objects elsewhere (memory and "
                       "SSD copies) so they can be unmounted with nothing lost")
    d.add_argument("segments", nargs="*", metavar="SEGMENT")
    d.add_argument("--targets", type=lambda v: [x for x in v.split(",") if x],
                   help="comma-separated segments to move objects to (default: any)")
    d.add_argument("--max-concurrency", type=non_negative_int("--max-concurrency"), default=4,
                   help="moves in flight at once (default: %(default)s)")
    d.add_argument("--wait", type=non_negative_int("--wait"), nargs="?", const=3600,
                   metavar="SECONDS", help="wait for the job to end (status 1 unless it "
                   "succeeds)")
    dq = d.add_mutually_exclusive_group()
    dq.add_argument("--query", metavar="JOB", help="show a drain job instead")
    dq.add_argument("--cancel", metavar="JOB", help="cancel a drain job instead")
    args = p.parse_args(argv)
    if args.command == "drain" and bool(args.segments) == bool(args.query or args.cancel):
        d.error("give segments to drain, or --query/--cancel JOB")
    global SECRET, TLS
    try:
        SECRET = load_secret(args.secret_file) if args.secret_file else None
        if args.master.startswith("https://"):
            import ssl
            TLS = ssl.create_default_context(cafile=args.tls_ca_file)
            if args.tls_cert_file:
                TLS.load_cert_chain(args.tls_cert_file, args.tls_key_file)
    except OSError as e:
        print("mooncake_ctl: TLS: %s" % e, file=sys.stderr)
        return 2
    except CtlError as e:
        print("mooncake_ctl: %s" % e, file=sys.stderr)
        return 2
    if args.command == "token":
        if SECRET is None:
            p.error("token needs --cluster-secret-file or MOONCAKE_CLUSTER_SECRET_FILE")
        print(hmac.new(SECRET, b"mooncake-http-token-v1", hashlib.sha256).hexdigest())
        return 0
    if args.command == "capacity" and args.model_config is None and (
            args.tokens is not None or args.token_log or args.master_log):
        c.error("--tokens, --token-log and --master-log need --model-config")
    handlers = {"status": cmd_status, "segments": cmd_segments, "keys": cmd_keys,
                "get-info": cmd_get_info, "remove": cmd_remove, "remove-all": cmd_remove_all,
                "metrics": cmd_metrics, "capacity": cmd_capacity, "drain": cmd_drain}
    try:
        out = handlers[args.command](args)
    except CtlError as e:
        print("mooncake_ctl: %s" % e, file=sys.stderr)
        return 1
    except OSError as e:
        print("mooncake_ctl: %s" % e, file=sys.stderr)
        return 1
    print(json.dumps(out, indent=2) if args.json else out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
