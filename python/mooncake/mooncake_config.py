# SPDX-License-Identifier: Apache-2.0
"""mooncake.mooncake_config: upstream's MooncakeConfig (its JSON file and environment loaders).

Sources, in order: an explicit JSON file, MOONCAKE_CONFIG_PATH, then the environment
(MOONCAKE_MASTER required).
"""
import json
import os
from dataclasses import dataclass

DEFAULT_GLOBAL_SEGMENT_SIZE = 3355443200
DEFAULT_LOCAL_BUFFER_SIZE = 1073741824


def _parse_size(value):
    if isinstance(value, int):
        return value
    s = str(value).strip().lower().replace(" ", "")
    units = [("tb", 1 << 40), ("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10),
             ("t", 1 << 40), ("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10), ("b", 1)]
    for suffix, mult in units:
        if s.endswith(suffix):
            return int(float(s[:-len(suffix)]) * mult)
    return int(s)


@dataclass
class MooncakeConfig:
    local_hostname: str
    metadata_server: str
    global_segment_size: int
    local_buffer_size: int
    protocol: str
    device_name: str
    master_server_address: str
    enable_ssd_offload: bool = False
    ssd_offload_path: str = ""
    tenant_id: str = "default"
    enable_client_http_server: bool = False
    client_http_port: int = 9300

    @staticmethod
    def from_file(file_path):
        with open(file_path) as f:
            config = json.load(f)
        for req in ("local_hostname", "metadata_server", "master_server_address"):
            if not config.get(req):
                raise ValueError("Missing required config field: %s" % req)
        return MooncakeConfig(
            local_hostname=config["local_hostname"],
            metadata_server=config["metadata_server"],
            global_segment_size=_parse_size(config.get("global_segment_size",
                                                       DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_size(config.get("local_buffer_size",
                                                     DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=config.get("protocol", "tcp").lower(),
            device_name=config.get("device_name", ""),
            master_server_address=config["master_server_address"],
            enable_ssd_offload=bool(config.get("enable_ssd_offload", False)),
            ssd_offload_path=config.get("ssd_offload_path", ""),
            tenant_id=config.get("tenant_id", "default"),
            enable_client_http_server=bool(config.get("enable_client_http_server", False)),
            client_http_port=int(config.get("client_http_port", 9300)),
        )

    @staticmethod
    def load_from_file(file_path=None):
        path = file_path or os.getenv("MOONCAKE_CONFIG_PATH")
        if path is None:
            raise ValueError("The environment variable 'MOONCAKE_CONFIG_PATH' is not set.")
        return MooncakeConfig.from_file(path)

    @staticmethod
    def load_from_env():
        master = os.getenv("MOONCAKE_MASTER")
        if not master:
            raise ValueError("The environment variable 'MOONCAKE_MASTER' is not set.")
        truthy = ("1", "true", "yes", "on")
        return MooncakeConfig(
            local_hostname=os.getenv("MOONCAKE_LOCAL_HOSTNAME", "localhost"),
            metadata_server=os.getenv("MOONCAKE_TE_META_DATA_SERVER", "P2PHANDSHAKE"),
            global_segment_size=_parse_size(os.getenv("MOONCAKE_GLOBAL_SEGMENT_SIZE",
                                                      DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_size(os.getenv("MOONCAKE_LOCAL_BUFFER_SIZE",
                                                    DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=os.getenv("MOONCAKE_PROTOCOL", "tcp").lower(),
            device_name=os.getenv("MOONCAKE_DEVICE", ""),
            master_server_address=master,
            enable_ssd_offload=os.getenv("MOONCAKE_OFFLOAD_ENABLED", "").lower() in truthy,
            ssd_offload_path=os.getenv("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", ""),
            tenant_id=os.getenv("MOONCAKE_TENANT_ID", "default"),
            enable_client_http_server=os.getenv("MOONCAKE_ENABLE_CLIENT_HTTP_SERVER",
                                                "").lower() in truthy,
            client_http_port=int(os.getenv("MOONCAKE_CLIENT_HTTP_PORT", "9300")),
        )
