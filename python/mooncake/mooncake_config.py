# SPDX-License-Identifier: Apache-2.0
"""mooncake.mooncake_config: the MooncakeConfig dataclass that integrations build a store from.

Where a configuration comes from, in order:
  1. MooncakeConfig.from_file(path): a JSON object;
  2. MooncakeConfig.load_from_env(): the file named by MOONCAKE_CONFIG_PATH when that variable is
     set, else the MOONCAKE_* variables (MOONCAKE_MASTER is then required).

Sizes are integers or strings such as "4GB", "4 GB", "1.5GB", "512m" (binary units: k, m, g, t,
with or without a trailing b).  Booleans may be given as strings: "true"/"false", "yes"/"no",
"on"/"off", "1"/"0", "enable"/"disable"; anything else is an error.  The protocol is lower-cased;
one outside the known transports is kept, with a warning, for the store to accept or refuse.
Malformed values raise ValueError (TypeError where a field has a type no conversion applies to).
"""
import json
import logging
import os
from dataclasses import dataclass
from typing import Optional

logger = logging.getLogger(__name__)

DEFAULT_GLOBAL_SEGMENT_SIZE = 3355443200    # 3.125 GiB
DEFAULT_LOCAL_BUFFER_SIZE = 1073741824      # 1 GiB

# Longest suffix first, so "4gb" is read as giga-bytes and not as "4g" followed by "b".
_UNITS = (("kb", 1 << 10), ("mb", 1 << 20), ("gb", 1 << 30), ("tb", 1 << 40),
          ("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30), ("t", 1 << 40), ("b", 1))

# Transports and store modes Mooncake knows by name.  Only a hint for a warning: whether a
# protocol works is decided by the store when it is set up.
KNOWN_PROTOCOLS = frozenset((
    "tcp", "rdma", "efa", "nvmeof", "nvlink", "nvlink_intra", "musa", "hip", "barex", "cxl",
    "ascend", "ub", "ubshmem", "maca", "sunrise_link", "rpc_only"))

_TRUE_WORDS = ("true", "1", "yes", "on", "enable")
_FALSE_WORDS = ("false", "0", "no", "off", "disable")

_REQUIRED = ("local_hostname", "metadata_server", "master_server_address")


def _parse_segment_size(value) -> int:
    """Bytes from an int, a float (truncated) or a size string ("4GB", "4 GB", "1.5gb")."""
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        return int(value)           # floats truncate; None and other types raise TypeError
    text = value.strip().lower()
    if text == "":
        raise ValueError("Invalid segment size: empty string")
    for unit, scale in _UNITS:
        if text.endswith(unit):
            number = text[:-len(unit)].strip()
            if number == "":
                raise ValueError("Invalid segment size: no number before %r in %r"
                                 % (unit, value))
            return int(float(number) * scale)
    return int(float(text))


def _parse_bool(value) -> bool:
    """A boolean that may come as a bool, a number, None (false) or a word."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, (int, float)):
        return value != 0
    word = str(value).strip().lower()
    if word == "":
        return False
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise ValueError("Invalid boolean value: %r" % (value,))


@dataclass
class MooncakeConfig:
    """How to reach a Mooncake cluster and what this client contributes to it.

    local_hostname, metadata_server and master_server_address must be non-empty strings;
    global_segment_size and local_buffer_size are bytes (not negative); protocol is kept in
    lower case; device_name names the RDMA NICs ("" or None: discover them).
    """

    local_hostname: str
    metadata_server: str
    global_segment_size: int
    local_buffer_size: int
    protocol: str
    device_name: Optional[str]
    master_server_address: str
    enable_ssd_offload: bool = False
    ssd_offload_path: str = ""
    tenant_id: str = "default"
    enable_client_http_server: bool = False
    client_http_port: int = 9300
    # The cluster secret every connection proves (mooncake.json(5) cluster_secret_file).  The
    # store reads it from MOONCAKE_CLUSTER_SECRET_FILE at setup, so a config that names one
    # puts it there unless the environment already names one.
    cluster_secret_file: str = ""

    def __post_init__(self):
        if self.cluster_secret_file:
            os.environ.setdefault("MOONCAKE_CLUSTER_SECRET_FILE", str(self.cluster_secret_file))
        if not isinstance(self.protocol, str) or self.protocol.strip() == "":
            raise ValueError("Invalid protocol: %r (a transport name such as 'tcp' or 'rdma' "
                             "is required)" % (self.protocol,))
        self.protocol = self.protocol.strip().lower()
        if self.protocol not in KNOWN_PROTOCOLS:
            logger.warning("Unrecognised protocol %r: passed to the store as it is (known: %s)",
                           self.protocol, ", ".join(sorted(KNOWN_PROTOCOLS)))
        for name in ("global_segment_size", "local_buffer_size"):
            size = getattr(self, name)
            if size < 0:
                raise ValueError("Invalid %s: %r; a size cannot be negative" % (name, size))
        for name in _REQUIRED:
            text = getattr(self, name)
            if not isinstance(text, str) or text.strip() == "":
                raise ValueError("Config field %r must be a non-empty string, got %r"
                                 % (name, text))

    @staticmethod
    def from_file(file_path: str) -> "MooncakeConfig":
        """The configuration in the JSON file file_path.

        The three address fields must be present; a field that is missing takes its default,
        and so does a null ssd_offload_path ("") or tenant_id ("default").
        """
        with open(file_path) as f:
            cfg = json.load(f)
        if not isinstance(cfg, (dict, list, str)):
            raise TypeError("%s: the configuration must be a JSON object" % (file_path,))
        for name in _REQUIRED:
            if name not in cfg:
                raise ValueError("Missing required config field: %s" % name)
        if not isinstance(cfg, dict):
            raise TypeError("%s: the configuration must be a JSON object" % (file_path,))
        ssd_path = cfg.get("ssd_offload_path")
        tenant = cfg.get("tenant_id")
        return MooncakeConfig(
            local_hostname=cfg["local_hostname"],
            metadata_server=cfg["metadata_server"],
            global_segment_size=_parse_segment_size(
                cfg.get("global_segment_size", DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_segment_size(
                cfg.get("local_buffer_size", DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=cfg.get("protocol", "tcp"),
            device_name=cfg.get("device_name", ""),
            master_server_address=cfg["master_server_address"],
            enable_ssd_offload=_parse_bool(cfg.get("enable_ssd_offload", False)),
            ssd_offload_path="" if ssd_path is None else str(ssd_path),
            tenant_id="default" if tenant is None else str(tenant),
            enable_client_http_server=_parse_bool(cfg.get("enable_client_http_server", False)),
            client_http_port=int(cfg.get("client_http_port", 9300)),
            cluster_secret_file=str(cfg.get("cluster_secret_file") or ""),
        )

    @staticmethod
    def load_from_file(file_path=None) -> "MooncakeConfig":
        """from_file(file_path), or of the file MOONCAKE_CONFIG_PATH names."""
        path = file_path or os.getenv("MOONCAKE_CONFIG_PATH")
        if path is None:
            raise ValueError("The environment variable 'MOONCAKE_CONFIG_PATH' is not set.")
        return MooncakeConfig.from_file(path)

    @staticmethod
    def load_from_env() -> "MooncakeConfig":
        """The file MOONCAKE_CONFIG_PATH names, else the MOONCAKE_* variables:

        MOONCAKE_MASTER (required), MOONCAKE_LOCAL_HOSTNAME (localhost),
        MOONCAKE_TE_META_DATA_SERVER (P2PHANDSHAKE), MOONCAKE_GLOBAL_SEGMENT_SIZE,
        MOONCAKE_LOCAL_BUFFER_SIZE, MOONCAKE_PROTOCOL (tcp), MOONCAKE_DEVICE,
        MOONCAKE_OFFLOAD_ENABLED, MOONCAKE_OFFLOAD_FILE_STORAGE_PATH, MOONCAKE_TENANT_ID,
        MOONCAKE_ENABLE_CLIENT_HTTP_SERVER, MOONCAKE_CLIENT_HTTP_PORT (9300).
        """
        path = os.getenv("MOONCAKE_CONFIG_PATH")
        if path is not None:
            return MooncakeConfig.from_file(path)
        master = os.getenv("MOONCAKE_MASTER")
        if not master:
            raise ValueError("Neither the environment variable 'MOONCAKE_CONFIG_PATH' nor "
                             "'MOONCAKE_MASTER' is set.")
        env = os.getenv
        return MooncakeConfig(
            local_hostname=env("MOONCAKE_LOCAL_HOSTNAME", "localhost"),
            metadata_server=env("MOONCAKE_TE_META_DATA_SERVER", "P2PHANDSHAKE"),
            global_segment_size=_parse_segment_size(
                env("MOONCAKE_GLOBAL_SEGMENT_SIZE", DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_segment_size(
                env("MOONCAKE_LOCAL_BUFFER_SIZE", DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=env("MOONCAKE_PROTOCOL", "tcp"),
            device_name=env("MOONCAKE_DEVICE", ""),
            master_server_address=master,
            enable_ssd_offload=_parse_bool(env("MOONCAKE_OFFLOAD_ENABLED", "false")),
            ssd_offload_path=env("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", ""),
            tenant_id=env("MOONCAKE_TENANT_ID", "default"),
            enable_client_http_server=_parse_bool(
                env("MOONCAKE_ENABLE_CLIENT_HTTP_SERVER", "false")),
            client_http_port=int(env("MOONCAKE_CLIENT_HTTP_PORT", 9300)),
            cluster_secret_file=env("MOONCAKE_CLUSTER_SECRET_FILE", ""),
        )
