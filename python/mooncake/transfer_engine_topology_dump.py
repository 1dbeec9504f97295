# SPDX-License-Identifier: Apache-2.0
"""`transfer_engine_topology_dump`: print the transfer engine's NIC topology, upstream's tool.

The topology is the {"cpu:N": [[preferred NICs], [other NICs]], ...} matrix the rdma transport
uses, discovered from sysfs; --device-name filters it to a comma-separated list of NICs (as
MC_TE_FILTERS does).  By default a MC_CUSTOM_TOPO_JSON in the environment is ignored so the
output is what discovery finds; --use-custom-topo keeps it and --custom-topo-json PATH sets it.
This build has the classic transfer engine only: --backend tent (and auto under MC_USE_TENT)
is refused, naming the missing piece.
"""
import argparse
import os
import sys


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Dump device topology for the Transfer Engine. By default clears custom "
                    "topology overrides so the output reflects auto-discovery. Use "
                    "--use-custom-topo or --custom-topo-json to load a custom NIC priority "
                    "matrix instead.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--device-name", type=str, default="",
                        help="Filter topology by IB device name(s), comma-separated.")
    parser.add_argument("--backend", choices=("auto", "te", "tent"), default="auto",
                        help="Topology backend: te=classic Transfer Engine, tent=Mooncake TENT "
                             "(not in this build), auto=follow MC_USE_TENT/MC_USE_TEV1")
    parser.add_argument("--use-custom-topo", action="store_true",
                        help="Keep an existing MC_CUSTOM_TOPO_JSON")
    parser.add_argument("--custom-topo-json", type=str, default=None,
                        help="Path to custom topology JSON; sets MC_CUSTOM_TOPO_JSON")
    return parser.parse_args(argv)


def resolve_backend(backend):
    if backend == "auto":
        return "tent" if os.environ.get("MC_USE_TENT") or os.environ.get("MC_USE_TEV1") else "te"
    return backend


def main(argv=None):
    args = parse_args(argv)
    backend = resolve_backend(args.backend)
    if backend == "tent":
        print("error: the TENT backend (Mooncake's transfer engine next) is not part of this "
              "build; use --backend te (and unset MC_USE_TENT/MC_USE_TEV1 for auto)",
              file=sys.stderr)
        return 1
    if args.custom_topo_json is not None:
        os.environ["MC_CUSTOM_TOPO_JSON"] = args.custom_topo_json
        mode = "custom (%s)" % args.custom_topo_json
    elif args.use_custom_topo:
        custom = os.environ.get("MC_CUSTOM_TOPO_JSON", "")
        if not custom:
            print("error: --use-custom-topo requires MC_CUSTOM_TOPO_JSON", file=sys.stderr)
            return 1
        mode = "custom (%s)" % custom
    else:
        os.environ.pop("MC_CUSTOM_TOPO_JSON", None)
        mode = "discover"
    os.environ.setdefault("MC_LOG_LEVEL", "ERROR")
    try:
        from mooncake.engine import TransferEngine

        engine = TransferEngine()
        if args.device_name:
            topo = engine.get_local_topology(device_name=args.device_name)
        else:
            topo = engine.get_local_topology()
    except Exception as exc:        # noqa: BLE001 - reported, as upstream's tool does
        print("error: failed to dump topology: %s" % (exc,), file=sys.stderr)
        return 1
    print("Local topology [%s/%s]: %s" % (backend, mode, topo))
    return 0


if __name__ == "__main__":
    sys.exit(main())
