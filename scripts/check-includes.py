#!/usr/bin/env python3
"""Fails when a header under include/paro includes one from a higher layer (docs/architecture.md).

The stack, lowest first; a header may include its own layer and those below:
  core < cuda < topology < bootstrap, transport < algorithms < communicator (+ collectives.hpp, which
  forwards there) < tools < compression, dp < testing < paro.hpp (the umbrella)
Usage: scripts/check-includes.py [ROOT]   (ROOT: the repository, default: this script's parent's parent)
"""
import pathlib
import re
import sys

LAYERS = {
    "core": 0, "cuda": 1, "topology": 2, "bootstrap": 3, "transport": 3, "algorithms": 4,
    "communicator": 5, "collectives.hpp": 5, "tools": 6, "compression": 7, "dp": 7, "testing": 8, "paro.hpp": 9,
}
INCLUDE = re.compile(r'\s*#\s*include\s+[<"](paro/[^>"]+)[>"]')


def layer_of(relative):  # relative: "paro/<layer>/..." or "paro/<file>"
    first = relative.split("/")[1]
    if first not in LAYERS:
        raise SystemExit(f"check-includes: '{relative}' is in no layer; add its folder to LAYERS "
                         f"(scripts/check-includes.py) and to docs/architecture.md")
    return LAYERS[first]


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[1])
    include = root / "include"
    upward = []
    headers = sorted(p for p in (include / "paro").rglob("*") if p.is_file())
    for header in headers:
        me = header.relative_to(include).as_posix()
        for number, line in enumerate(header.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if match and layer_of(match.group(1)) > layer_of(me):
                upward.append(f"{me}:{number}: includes {match.group(1)}, a higher layer")
    if upward:
        print("check-includes: includes that point up the stack (docs/architecture.md):")
        print("\n".join("  " + u for u in upward))
        return 1
    print(f"check-includes: {len(headers)} headers, every include points down or sideways")
    return 0


if __name__ == "__main__":
    sys.exit(main())
