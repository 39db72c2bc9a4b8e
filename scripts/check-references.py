#!/usr/bin/env python3
"""Fails when a tracked text file speaks of how the project is made instead of the library itself.

paro's docs, scripts and comments are read by its users, who have none of the project's tracker, planning
files or private tooling. This check flags, in every file git tracks:
  - numbered issues and tracker talk ("issue 12", "issue #12", "the issue asks");
  - paths outside the repository (../shared/, shared/seeds, DESIGN.md);
  - tools and arrangements that are not part of the repository (a duplicate finder, the structure drawer,
    a lent GPU machine and its carry list, per-command time limits of a runner).
A line that must keep such a word (a test's fixture, say) goes into scripts/reference-allowlist.txt as
`PATH: TEXT`, TEXT being part of the line; an entry that matches nothing is an error, so the list stays true.

    scripts/check-references.py              # check the tree (exit 1 and one line per finding when dirty)
    scripts/check-references.py --self-test  # show that the check catches a planted reference
"""

import re
import subprocess
import sys
import tempfile
from pathlib import Path

RULES = [
    ("a numbered issue", re.compile(r"\bissues?\s*#?\d+|#\d{1,4}\b(?=\s*(?:asks|says|wants))", re.I)),
    ("the tracker", re.compile(r"\b(?:the|this|next|previous|foundation)\s+issue\b(?!\s+order)", re.I)),
    ("a path outside the repository", re.compile(r"\.\./shared\b|\bshared/seeds\b|\bDESIGN\.md\b")),
    ("a tool outside the repository", re.compile(r"`duplicates`|\bduplicates\s+(?:tool|--change)|farm-studio", re.I)),
    ("a lent machine", re.compile(r"\blent\b|device (?:tool|runner|machine)|\bcarry\b\s*(?:list|\[)|`carry`", re.I)),
    ("a runner's limits", re.compile(r"\b600\s*s\s+(?:a|per)\s+command", re.I)),
    ("a working session", re.compile(r"\b(?:this|a|no|the|each|every|earlier|later|next|previous)\s+session\b", re.I)),
]

ALLOWLIST = Path("scripts/reference-allowlist.txt")
SELF = {"scripts/check-references.py", str(ALLOWLIST)}


def tracked_text_files(root):
    names = subprocess.run(["git", "ls-files", "-z"], cwd=root, check=True, capture_output=True).stdout
    for name in names.decode().split("\0"):
        if not name or name in SELF:
            continue
        path = Path(root, name)
        try:
            data = path.read_bytes()
        except OSError:  # deleted in the work tree but still in the index
            continue
        if b"\0" in data[:8192]:
            continue  # binary: images, archives
        yield name, data.decode("utf-8", errors="replace")


def read_allowlist(root):
    entries = []
    path = Path(root, ALLOWLIST)
    if path.exists():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, text = line.partition(": ")
            if not sep or not text:
                sys.exit(f"{ALLOWLIST}:{number}: '{line}' is not 'PATH: TEXT'")
            entries.append((name, text))
    return entries


def findings(root):
    allow = read_allowlist(root)
    used = set()
    found = []
    for name, text in tracked_text_files(root):
        for number, line in enumerate(text.splitlines(), 1):
            for what, rule in RULES:
                match = rule.search(line)
                if not match:
                    continue
                allowed = [e for e in allow if e[0] == name and e[1] in line]
                if allowed:
                    used.update(allowed)
                    continue
                found.append(f"{name}:{number}: {what} ('{match.group(0)}'): {line.strip()[:160]}")
    for entry in allow:
        if entry not in used:
            found.append(f"{ALLOWLIST}: '{entry[0]}: {entry[1]}' matches no finding; remove it")
    return found


def self_test():
    """A planted 'see issue 12' must fail the check, and the same tree without it must pass."""
    with tempfile.TemporaryDirectory() as tmp:
        def git(*args):
            subprocess.run(["git", *args], cwd=tmp, check=True, capture_output=True)

        git("init", "-q")
        doc = Path(tmp, "docs", "guide.md")
        doc.parent.mkdir()
        doc.write_text("# Guide\n\nThe issue order of nonblocking calls is kept.\n")
        git("add", ".")
        clean = findings(tmp)
        doc.write_text(doc.read_text() + "Details: see issue 12.\n")
        dirty = findings(tmp)
    ok = not clean and len(dirty) == 1 and "docs/guide.md:4: a numbered issue" in dirty[0]
    print(f"check-references self-test: clean tree {len(clean)} findings, planted 'see issue 12': {dirty}")
    return ok


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(0 if self_test() else 1)
    if sys.argv[1:]:
        sys.exit(__doc__)
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True, capture_output=True,
                          text=True).stdout.strip()
    found = findings(root)
    for line in found:
        print(line)
    print(f"check-references: {len(found)} finding(s)")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
