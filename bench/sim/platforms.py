#!/usr/bin/env python3
"""Writes a SimGrid platform (XML), an smpirun hostfile and a paro topology file (PARO_TOPO_FILE) for one
of three simulated clusters, so that paro's groups match the simulated hosts.

  gpu    (a) nodes of 8 ranks on NVLink-class links, one NIC per rank to a leaf switch, non-blocking spine
  cloud  (b) nodes of 8 ranks on NVLink-class links, one NIC per node shared by its 8 ranks, flat fabric
  pods   (c) nodes < leaf switches < pods; a spine between pods oversubscribed by --oversubscription

On gpu and pods every rank is one simulated host: inside a node, rank i reaches rank j over its own NVLink
port and j's (as an NVSwitch gives every GPU its own bandwidth); leaving the node, it goes through its own
NIC. On cloud every node is one host with its 8 ranks, talking over the host's loopback inside and its one
link (the shared NIC) outside, so that SMPI's SMP-aware algorithms see the node. Links are full duplex
(SPLITDUPLEX). Switches and non-blocking fabrics carry no link of their own: their latency is folded into
the NIC links' (switch_us per switch on the way), and only what can be a bottleneck is a link (the pods'
oversubscribed uplinks). A link shared by every flow would also make SimGrid re-solve every flow's share
at every event, which at 1024 ranks costs minutes per collective. Defaults and their sources:
docs/simulation.md.

  platforms.py --platform cloud --ranks 128 --out build-smpi/platforms
writes cloud-128.xml, cloud-128.hosts and cloud-128.topo.json there, and prints their stem.
"""
import argparse
import json
import os
import sys
from xml.sax.saxutils import quoteattr

DEFAULTS = {
    # NVLink 4 (H100/H200): 900 GB/s both ways per GPU = 450 GB/s each way; ConnectX-7 400 Gbit/s per GPU;
    # a 64-port 400G leaf switch (32 ports down = 4 nodes, 32 up).
    "gpu": dict(nvlink_gbps=3600, nvlink_us=0.7, nic_gbps=400, nic_us=1.5, switch_us=0.5, nodes_per_leaf=4),
    # An 8-GPU cloud VM (A100, NVLink 3: 300 GB/s each way) with one 100 Gbit/s virtual NIC; cloud fabrics
    # add tens of microseconds over the NIC.
    "cloud": dict(nvlink_gbps=2400, nvlink_us=1.0, nic_gbps=100, nic_us=10.0, switch_us=5.0, nodes_per_leaf=0),
    # HDR 200 Gbit/s per GPU, leaves of 4 nodes, pods of 2 leaves (64 ranks), 4:1 between pods.
    "pods": dict(nvlink_gbps=3600, nvlink_us=0.7, nic_gbps=200, nic_us=1.5, switch_us=0.5, nodes_per_leaf=4,
                 leaves_per_pod=2, oversubscription=4.0),
}


def gbps_attr(gbps):
    return f"{gbps / 8:g}GBps"


def us_attr(us):
    return f"{us:g}us"


class Platform:
    def __init__(self):
        self.lines = []

    def emit(self, depth, text):
        self.lines.append("  " * depth + text)

    def link(self, depth, name, gbps, us, policy="SPLITDUPLEX"):
        self.emit(depth, f"<link id={quoteattr(name)} bandwidth=\"{gbps_attr(gbps)}\" latency=\"{us_attr(us)}\" "
                         f"sharing_policy=\"{policy}\"/>")

    def route(self, depth, tag, src, dst, links, extra=""):
        """links: (name, direction or None for a link that is not split-duplex)"""
        ctn = "".join(f"<link_ctn id={quoteattr(n)}" + (f" direction=\"{d}\"" if d else "") + "/>" for n, d in links)
        self.emit(depth, f"<{tag} src={quoteattr(src)} dst={quoteattr(dst)}{extra}>{ctn}</{tag}>")


def build(kind, ranks, p):
    per_node = p["ranks_per_node"]
    if ranks % per_node:
        sys.exit(f"platforms.py: --ranks {ranks} is not a multiple of --ranks-per-node {per_node}")
    nodes = ranks // per_node
    per_leaf = p["nodes_per_leaf"] or nodes
    per_pod = per_leaf * p.get("leaves_per_pod", 0) if kind == "pods" else nodes
    leaf_of = [n // per_leaf for n in range(nodes)]
    pod_of = [n // per_pod for n in range(nodes)]
    shared_nic = kind == "cloud"

    x = Platform()
    x.emit(0, "<?xml version='1.0'?>")
    x.emit(0, '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">')
    x.emit(0, '<platform version="4.1">')
    if shared_nic:
        # One simulated host per node, its 8 ranks on it: SMPI's SMP-aware algorithms (smp_*, two_level)
        # then see the node. Ranks of a host talk over its loopback, which gives every flow the full
        # loopback bandwidth (each GPU its own NVLink ports); the host's link is the node's one NIC.
        x.emit(1, f'<cluster id="cloud" prefix="node" suffix="" radical="0-{nodes - 1}" speed="1Gf" '
                  f'bw="{gbps_attr(p["nic_gbps"])}" lat="{us_attr(p["nic_us"] + p["switch_us"] / 2)}" '
                  f'sharing_policy="SPLITDUPLEX" loopback_bw="{gbps_attr(p["nvlink_gbps"])}" '
                  f'loopback_lat="{us_attr(p["nvlink_us"])}"/>')
        x.emit(0, "</platform>")
        return finish(x, kind, p, nodes, per_node, leaf_of, pod_of, [f"node{n}" for n in range(nodes) for _ in range(per_node)])
    x.emit(1, '<zone id="cluster" routing="Full">')
    for n in range(nodes):
        x.emit(2, f'<zone id="node{n}" routing="Full">')
        hosts = [f"node{n}-rank{i}" for i in range(per_node)]
        for h in hosts:
            x.emit(3, f'<host id="{h}" speed="1Gf"/>')
        x.emit(3, f'<router id="node{n}-router"/>')
        for h in hosts:
            x.link(3, f"{h}-nvlink", p["nvlink_gbps"], p["nvlink_us"] / 2)
            x.link(3, f"{h}-nic", p["nic_gbps"], p["nic_us"] + 1.5 * p["switch_us"])  # leaf, spine, leaf
        for i, a in enumerate(hosts):
            for b in hosts[i + 1:]:
                x.route(3, "route", a, b, [(f"{a}-nvlink", "UP"), (f"{b}-nvlink", "DOWN")])
            x.route(3, "route", a, f"node{n}-router", [(f"{a}-nic", "UP")])
        x.emit(2, "</zone>")
    # Only the pods' uplinks can be a bottleneck: what a pod's NICs can send over the oversubscription.
    pods = sorted(set(pod_of))
    if kind == "pods":
        for pod in pods:
            x.link(2, f"pod{pod}-up", p["nic_gbps"] * per_node * per_pod / p["oversubscription"], p["switch_us"])
    routes = []  # SimGrid wants every link declared before the first route
    for a in range(nodes):
        for b in range(a + 1, nodes):
            if pod_of[a] != pod_of[b]:
                path = [(f"pod{pod_of[a]}-up", "UP"), (f"pod{pod_of[b]}-up", "DOWN")]
            else:  # SimGrid forbids empty routes: a link of this pair alone, which never limits
                x.link(2, f"node{a}-node{b}", p["nic_gbps"] * per_node * 2, 0, "FATPIPE")
                path = [(f"node{a}-node{b}", None)]
            routes.append((a, b, path))
    for a, b, path in routes:
        x.route(2, "zoneRoute", f"node{a}", f"node{b}", path, f' gw_src="node{a}-router" gw_dst="node{b}-router"')
    x.emit(1, "</zone>")
    x.emit(0, "</platform>")
    return finish(x, kind, p, nodes, per_node, leaf_of, pod_of,
                  [f"node{n}-rank{i}" for n in range(nodes) for i in range(per_node)])


def finish(x, kind, p, nodes, per_node, leaf_of, pod_of, hostfile):
    shared_nic = kind == "cloud"
    pods = sorted(set(pod_of))
    # paro's view: a host per node, its leaf switch and pod; links per level as paro's cost model reads them
    # (Gbit/s per rank inside a node, per NIC above; the pod level's is a NIC's share of the spine).
    topo = {
        "hosts": [{"name": f"node{n}", "switch": f"leaf{leaf_of[n]}", "pod": f"pod{pod_of[n]}"} for n in range(nodes)],
        "ranks": [f"node{n}" for n in range(nodes) for _ in range(per_node)],
        "links": {
            "node": {"gbps": p["nvlink_gbps"], "latency_us": p["nvlink_us"]},
            "switch": {"gbps": p["nic_gbps"], "latency_us": 2 * p["nic_us"] + p["switch_us"] * (1 if kind == "cloud" else 3)},
        },
        "nic": "shared" if shared_nic else "per_rank",
    }
    if kind == "pods" and len(pods) > 1:
        topo["links"]["pod"] = {"gbps": p["nic_gbps"] / p["oversubscription"],
                                "latency_us": 2 * p["nic_us"] + 5 * p["switch_us"]}
    return "\n".join(x.lines) + "\n", topo, hostfile


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform", choices=sorted(DEFAULTS), required=True)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--out", required=True, help="folder for the three files")
    ap.add_argument("--ranks-per-node", type=int, default=8)
    for key in ("nvlink_gbps", "nvlink_us", "nic_gbps", "nic_us", "switch_us", "nodes_per_leaf", "leaves_per_pod",
                "oversubscription"):
        ap.add_argument("--" + key.replace("_", "-"), type=float, help="overrides the platform's default")
    args = ap.parse_args()
    if args.ranks < 1:
        sys.exit("platforms.py: --ranks must be at least 1")
    params = dict(DEFAULTS[args.platform], ranks_per_node=args.ranks_per_node)
    for key in list(params) + ["leaves_per_pod", "oversubscription"]:
        value = getattr(args, key, None)
        if value is not None:
            if value <= 0:
                sys.exit(f"platforms.py: --{key.replace('_', '-')} must be positive")
            params[key] = int(value) if key in ("nodes_per_leaf", "leaves_per_pod") else value
    xml, topo, hostfile = build(args.platform, args.ranks, params)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"{args.platform}-{args.ranks}")
    with open(stem + ".xml", "w") as f:
        f.write(xml)
    with open(stem + ".topo.json", "w") as f:
        json.dump(topo, f, indent=1)
    with open(stem + ".hosts", "w") as f:
        f.write("\n".join(hostfile) + "\n")
    print(stem)


if __name__ == "__main__":
    main()
