#!/usr/bin/env python3
"""Checks that no layer of src/ includes a layer above it.

Every folder src/<layer>/ is a layer; its .h and .cc files may include (as "layer/file.h")
their own layer and the layers RULES lists for it, nothing else. Files named *_test.cc are
exempt: the unit tests link everything. A folder of src/ that RULES does not list is an
error too, so a new layer has to be placed in the table before it can hold code.

Usage: scripts/check_layering.py [SRC_DIR]   (default: the src/ next to this script)
Prints one line per violation, `file:line: layer 'a' may not include 'b/file.h'`, and
exits 1 if there is any; exits 0 and prints a one-line summary otherwise.
"""
import os
import re
import sys

ANY = "*"  # in a layer's list: every layer in the table, less those written "-name"

# layer: the other layers its files may include. Layers without files yet are fine.
RULES = {
    "base": [],
    "engine": ["base"],
    "command": ["base"],                      # the command interface
    "store": ["base", "command", "engine"],   # the in-memory store implementing it
    "storage": ["base", "engine"],            # the binlog
    "protocol": ["base", "command"],          # the text protocol
    "http": ["base", "command"],
    "cli": ["base"],                          # stalk, a client: no layer of the server
    "net": ["base"],
    "redis": ["base", "net", "command"],      # the Redis client and the Redis store
    "server": [ANY, "-app"],
    "app": [ANY],
}

EXTENSIONS = (".h", ".cc")
EXEMPT_SUFFIX = "_test.cc"
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"/]+)/[^"]*"')


def allowed(layer):
    """The set of layers `layer` may include, itself among them."""
    rule = RULES[layer]
    out = set(RULES) if ANY in rule else {r for r in rule if not r.startswith("-")}
    out -= {r[1:] for r in rule if r.startswith("-")}
    return out | {layer}


def check(src):
    """Returns (problems, files checked); each problem is one output line."""
    problems, checked = [], 0
    folders = sorted(d for d in os.listdir(src)
                     if os.path.isdir(os.path.join(src, d)) and not d.startswith("."))
    for layer in folders:
        if layer not in RULES:
            problems.append("%s: folder '%s' is not a layer in the table of %s; add it to RULES"
                            % (os.path.join(src, layer), layer, os.path.basename(__file__)))
    for layer in folders:
        if layer not in RULES:
            continue
        ok = allowed(layer)
        for dirpath, dirnames, filenames in os.walk(os.path.join(src, layer)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(EXTENSIONS) or name.endswith(EXEMPT_SUFFIX):
                    continue
                path = os.path.join(dirpath, name)
                checked += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        # Only src/ folders are layers; "gtest/gtest.h" and the like are not.
                        if target not in RULES and not os.path.isdir(os.path.join(src, target)):
                            continue
                        if target not in ok:
                            include = line.split('"')[1]
                            problems.append("%s:%d: layer '%s' may not include '%s'"
                                            % (path, lineno, layer, include))
    return problems, checked


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    src = argv[1] if len(argv) == 2 else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    if not os.path.isdir(src):
        print("%s: no such folder" % src, file=sys.stderr)
        return 2
    problems, checked = check(src)
    for p in problems:
        print(p)
    if problems:
        print("layering: %d problem(s) in %s" % (len(problems), src), file=sys.stderr)
        return 1
    print("layering: %d files in %s follow the table" % (checked, src))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
