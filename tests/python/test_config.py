# SPDX-License-Identifier: Apache-2.0
"""mooncake.mooncake_config: sizes, booleans, defaults, the environment and errors.

Needs no daemons, and imports nothing of ours but the module under test, so it runs as well
against upstream's wheel (put its site-packages first on PYTHONPATH) to confirm the expectations.
"""
import json
import logging

import pytest

from mooncake import mooncake_config as mc
from mooncake.mooncake_config import MooncakeConfig

BASE = {"local_hostname": "node1", "metadata_server": "P2PHANDSHAKE",
        "master_server_address": "127.0.0.1:50051"}
ENV_NAMES = ("MOONCAKE_CONFIG_PATH", "MOONCAKE_MASTER", "MOONCAKE_LOCAL_HOSTNAME",
             "MOONCAKE_TE_META_DATA_SERVER", "MOONCAKE_GLOBAL_SEGMENT_SIZE",
             "MOONCAKE_LOCAL_BUFFER_SIZE", "MOONCAKE_PROTOCOL", "MOONCAKE_DEVICE",
             "MOONCAKE_OFFLOAD_ENABLED", "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH",
             "MOONCAKE_TENANT_ID", "MOONCAKE_ENABLE_CLIENT_HTTP_SERVER",
             "MOONCAKE_CLIENT_HTTP_PORT")


@pytest.fixture
def env(monkeypatch):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def write(tmp_path, obj):
    p = tmp_path / "mooncake.json"
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(p)


def test_constants_and_logger():
    assert mc.DEFAULT_GLOBAL_SEGMENT_SIZE == 3355443200
    assert mc.DEFAULT_LOCAL_BUFFER_SIZE == 1073741824
    assert isinstance(mc.logger, logging.Logger)
    assert mc.logger.name == "mooncake.mooncake_config"


@pytest.mark.parametrize("text,expect", [
    (4096, 4096), (0, 0), ("4096", 4096), ("4GB", 4 << 30), ("4 GB", 4 << 30),
    ("4gb", 4 << 30), ("4g", 4 << 30), ("1.5GB", int(1.5 * (1 << 30))), ("512MB", 512 << 20),
    ("512m", 512 << 20), ("16 mb", 16 << 20), ("8KB", 8192), ("8k", 8192), ("2TB", 2 << 40),
    ("100b", 100), ("  3 GB  ", 3 << 30), ("1e3", 1000), ("2.9", 2), (3.7, 3),
])
def test_parse_segment_size(text, expect):
    assert mc._parse_segment_size(text) == expect


@pytest.mark.parametrize("bad", ["", "   ", "GB", "abc", "50%", "4 G B", "4gib", "1,5GB"])
def test_parse_segment_size_rejects(bad):
    with pytest.raises(ValueError):
        mc._parse_segment_size(bad)


@pytest.mark.parametrize("bad", [None, [1], {"a": 1}])
def test_parse_segment_size_wrong_type(bad):
    with pytest.raises(TypeError):
        mc._parse_segment_size(bad)


def test_from_file_minimal_defaults(tmp_path):
    c = MooncakeConfig.from_file(write(tmp_path, BASE))
    assert c.local_hostname == "node1" and c.metadata_server == "P2PHANDSHAKE"
    assert c.master_server_address == "127.0.0.1:50051"
    assert c.global_segment_size == mc.DEFAULT_GLOBAL_SEGMENT_SIZE
    assert c.local_buffer_size == mc.DEFAULT_LOCAL_BUFFER_SIZE
    assert c.protocol == "tcp" and c.device_name == ""
    assert c.enable_ssd_offload is False and c.ssd_offload_path == ""
    assert c.tenant_id == "default"
    assert c.enable_client_http_server is False and c.client_http_port == 9300


def test_from_file_full(tmp_path):
    cfg = dict(BASE, global_segment_size="4 GB", local_buffer_size="1.5GB", protocol=" RDMA ",
               device_name="mlx5_0", enable_ssd_offload="true", ssd_offload_path="/nvme/x",
               tenant_id="t1", enable_client_http_server="on", client_http_port="9400")
    c = MooncakeConfig.from_file(write(tmp_path, cfg))
    assert c.global_segment_size == 4 << 30
    assert c.local_buffer_size == int(1.5 * (1 << 30))
    assert c.protocol == "rdma" and c.device_name == "mlx5_0"
    assert c.enable_ssd_offload is True and c.ssd_offload_path == "/nvme/x"
    assert c.tenant_id == "t1"
    assert c.enable_client_http_server is True and c.client_http_port == 9400


@pytest.mark.parametrize("word,expect", [
    ("false", False), ("False", False), ("0", False), ("no", False), ("off", False),
    ("disable", False), ("", False), (None, False), (0, False), (False, False),
    ("true", True), ("TRUE", True), (" yes ", True), ("1", True), ("on", True),
    ("enable", True), (1, True), (True, True),
])
def test_booleans_as_strings(tmp_path, word, expect):
    c = MooncakeConfig.from_file(write(tmp_path, dict(BASE, enable_ssd_offload=word,
                                                      enable_client_http_server=word)))
    assert c.enable_ssd_offload is expect and c.enable_client_http_server is expect


def test_bad_boolean_is_value_error(tmp_path):
    with pytest.raises(ValueError):
        MooncakeConfig.from_file(write(tmp_path, dict(BASE, enable_ssd_offload="maybe")))
    with pytest.raises(ValueError):
        mc._parse_bool("y")


def test_null_optional_fields_take_defaults(tmp_path):
    c = MooncakeConfig.from_file(write(tmp_path, dict(BASE, ssd_offload_path=None,
                                                      tenant_id=None, device_name=None,
                                                      enable_ssd_offload=None)))
    assert c.ssd_offload_path == "" and c.tenant_id == "default"
    assert c.device_name is None and c.enable_ssd_offload is False


def test_null_size_is_type_error(tmp_path):
    with pytest.raises(TypeError):
        MooncakeConfig.from_file(write(tmp_path, dict(BASE, global_segment_size=None)))


@pytest.mark.parametrize("field", ["local_hostname", "metadata_server", "master_server_address"])
def test_missing_required_field(tmp_path, field):
    cfg = dict(BASE)
    del cfg[field]
    with pytest.raises(ValueError, match=field):
        MooncakeConfig.from_file(write(tmp_path, cfg))


@pytest.mark.parametrize("field", ["local_hostname", "metadata_server", "master_server_address"])
@pytest.mark.parametrize("value", ["", "   ", None, 5])
def test_empty_required_field(tmp_path, field, value):
    with pytest.raises(ValueError, match=field):
        MooncakeConfig.from_file(write(tmp_path, dict(BASE, **{field: value})))


@pytest.mark.parametrize("proto", ["", "  ", None, 5])
def test_bad_protocol(tmp_path, proto):
    with pytest.raises(ValueError, match="protocol"):
        MooncakeConfig.from_file(write(tmp_path, dict(BASE, protocol=proto)))


def test_unknown_protocol_warns_and_passes(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="mooncake.mooncake_config"):
        c = MooncakeConfig.from_file(write(tmp_path, dict(BASE, protocol="Carrier-Pigeon")))
    assert c.protocol == "carrier-pigeon"
    assert any("carrier-pigeon" in r.getMessage() for r in caplog.records)


def test_negative_size(tmp_path):
    with pytest.raises(ValueError, match="global_segment_size"):
        MooncakeConfig.from_file(write(tmp_path, dict(BASE, global_segment_size=-1)))
    with pytest.raises(ValueError, match="local_buffer_size"):
        MooncakeConfig.from_file(write(tmp_path, dict(BASE, local_buffer_size="-2MB")))


def test_bad_size_and_port(tmp_path):
    with pytest.raises(ValueError):
        MooncakeConfig.from_file(write(tmp_path, dict(BASE, global_segment_size="50%")))
    with pytest.raises(ValueError):
        MooncakeConfig.from_file(write(tmp_path, dict(BASE, client_http_port="http")))


def test_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        MooncakeConfig.from_file(str(tmp_path / "absent.json"))
    with pytest.raises(json.JSONDecodeError):
        MooncakeConfig.from_file(write(tmp_path, "{not json"))
    with pytest.raises(ValueError):
        MooncakeConfig.from_file(write(tmp_path, "[]"))


def test_direct_construction_normalises():
    c = MooncakeConfig("h", "P2PHANDSHAKE", 1, 2, "TCP", None, "m:1")
    assert c.protocol == "tcp" and c.tenant_id == "default" and c.client_http_port == 9300
    with pytest.raises(ValueError):
        MooncakeConfig("h", "P2PHANDSHAKE", -1, 2, "tcp", None, "m:1")


def test_env_needs_master_or_path(env):
    with pytest.raises(ValueError, match="MOONCAKE_MASTER"):
        MooncakeConfig.load_from_env()


def test_env_defaults(env):
    env.setenv("MOONCAKE_MASTER", "10.0.0.1:50051")
    c = MooncakeConfig.load_from_env()
    assert c.master_server_address == "10.0.0.1:50051"
    assert c.local_hostname == "localhost" and c.metadata_server == "P2PHANDSHAKE"
    assert c.global_segment_size == mc.DEFAULT_GLOBAL_SEGMENT_SIZE
    assert c.local_buffer_size == mc.DEFAULT_LOCAL_BUFFER_SIZE
    assert c.protocol == "tcp" and c.device_name == ""
    assert c.enable_ssd_offload is False and c.ssd_offload_path == ""
    assert c.tenant_id == "default" and c.client_http_port == 9300


def test_env_values(env):
    env.setenv("MOONCAKE_MASTER", "10.0.0.1:50051")
    env.setenv("MOONCAKE_LOCAL_HOSTNAME", "node7")
    env.setenv("MOONCAKE_TE_META_DATA_SERVER", "http://meta:8080/metadata")
    env.setenv("MOONCAKE_GLOBAL_SEGMENT_SIZE", "2 GB")
    env.setenv("MOONCAKE_LOCAL_BUFFER_SIZE", "512MB")
    env.setenv("MOONCAKE_PROTOCOL", "RDMA")
    env.setenv("MOONCAKE_DEVICE", "mlx5_1")
    env.setenv("MOONCAKE_OFFLOAD_ENABLED", "false")
    env.setenv("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", "/ssd")
    env.setenv("MOONCAKE_TENANT_ID", "tenant-b")
    env.setenv("MOONCAKE_ENABLE_CLIENT_HTTP_SERVER", "yes")
    env.setenv("MOONCAKE_CLIENT_HTTP_PORT", "9555")
    c = MooncakeConfig.load_from_env()
    assert (c.local_hostname, c.metadata_server) == ("node7", "http://meta:8080/metadata")
    assert c.global_segment_size == 2 << 30 and c.local_buffer_size == 512 << 20
    assert c.protocol == "rdma" and c.device_name == "mlx5_1"
    assert c.enable_ssd_offload is False and c.ssd_offload_path == "/ssd"
    assert c.tenant_id == "tenant-b"
    assert c.enable_client_http_server is True and c.client_http_port == 9555


def test_env_bad_values(env):
    env.setenv("MOONCAKE_MASTER", "10.0.0.1:50051")
    env.setenv("MOONCAKE_OFFLOAD_ENABLED", "sometimes")
    with pytest.raises(ValueError):
        MooncakeConfig.load_from_env()
    env.setenv("MOONCAKE_OFFLOAD_ENABLED", "1")
    env.setenv("MOONCAKE_GLOBAL_SEGMENT_SIZE", "lots")
    with pytest.raises(ValueError):
        MooncakeConfig.load_from_env()


def test_env_config_path_wins(env, tmp_path):
    env.setenv("MOONCAKE_MASTER", "10.0.0.1:50051")
    env.setenv("MOONCAKE_PROTOCOL", "rdma")
    env.setenv("MOONCAKE_CONFIG_PATH", write(tmp_path, dict(BASE, protocol="tcp")))
    c = MooncakeConfig.load_from_env()
    assert c.master_server_address == "127.0.0.1:50051" and c.protocol == "tcp"
    env.setenv("MOONCAKE_CONFIG_PATH", str(tmp_path / "absent.json"))
    with pytest.raises(FileNotFoundError):
        MooncakeConfig.load_from_env()


def test_cluster_secret_file_reaches_the_store_environment(tmp_path, monkeypatch):
    # The store reads the secret from MOONCAKE_CLUSTER_SECRET_FILE at setup; a config naming
    # one puts it there, and an environment that names one already wins.  (Ours only.)
    import os
    if not hasattr(MooncakeConfig, "cluster_secret_file"):
        pytest.skip("upstream's MooncakeConfig has no cluster_secret_file")
    # setenv first, so that the variable the config sets is removed again afterwards
    monkeypatch.setenv("MOONCAKE_CLUSTER_SECRET_FILE", "")
    monkeypatch.delenv("MOONCAKE_CLUSTER_SECRET_FILE")
    c = MooncakeConfig.from_file(write(tmp_path, dict(BASE, cluster_secret_file="/etc/s")))
    assert c.cluster_secret_file == "/etc/s"
    assert os.environ["MOONCAKE_CLUSTER_SECRET_FILE"] == "/etc/s"
    monkeypatch.setenv("MOONCAKE_CLUSTER_SECRET_FILE", "/run/other")
    MooncakeConfig.from_file(write(tmp_path, dict(BASE, cluster_secret_file="/etc/s")))
    assert os.environ["MOONCAKE_CLUSTER_SECRET_FILE"] == "/run/other"
    assert MooncakeConfig.from_file(write(tmp_path, BASE)).cluster_secret_file == ""
