#!/usr/bin/env python3
"""Checks that no layer of src/ includes a layer above it, and that no file of src/ is long.

Layers: every folder src/<layer>/ is a layer; its .h and .cc files may include (as
"layer/file.h") their own layer and the layers RULES lists for it, nothing else. Files named
*_test.cc, and their helpers *_test_util.h, are exempt: the unit tests link everything. A
folder of src/ that RULES does not list is an error too, so a new layer has to be placed in
the table before it can hold code.

Size: no file of src/ (of any kind, unit tests too) has more than MAX_LINES lines, unless
its first comment says why it must be one piece: a line of that comment holds "one piece:"
followed by the reason (three words at least). A file's first comment is its first run of
consecutive comment lines ("//" in .cc and .h files, "--" in .lua, "#" in others; a "#!"
first line is not one). A file past the limit is split where it holds more than one idea, a
file per idea named for it. AWAITING_SPLIT names the files whose split is under way.

Usage: scripts/check_layering.py [SRC_DIR]   (default: the src/ next to this script)
Prints one line per violation, `file:line: layer 'a' may not include 'b/file.h'` or
`file: N lines, more than 700; ...`, and exits 1 if there is any; exits 0 and prints a
summary otherwise (naming the files still awaiting their split).
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
    "cli": ["base", "net"],                   # stalk, a client: only net/tls.h of the server
    "net": ["base"],
    "redis": ["base", "net", "command"],      # the Redis client and the Redis store
    "server": [ANY, "-app"],
    "app": [ANY],
}

# The most lines a file of src/ may have without a "one piece:" reason in its first comment.
MAX_LINES = 700
ONE_PIECE = re.compile(r"one piece:\s*(\S+\s+){2,}\S")
# Files over MAX_LINES whose split by idea is under way (paths under src/). Each one leaves
# this list when its split has merged; then the list is empty, and stays so.
AWAITING_SPLIT = []

EXTENSIONS = (".h", ".cc")
EXEMPT_SUFFIX = ("_test.cc", "_test_util.h")  # the unit tests and their helpers
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


def first_comment(path, lines):
    """The text of a file's first comment: its first run of consecutive comment lines."""
    leader = "//" if path.endswith(EXTENSIONS) else "--" if path.endswith(".lua") else "#"
    block = []
    for i, line in enumerate(lines):
        text = line.strip()
        if i == 0 and text.startswith("#!"):
            continue
        if text.startswith(leader) and not (leader == "#" and text.startswith("#!")):
            block.append(text[len(leader):])
        elif block:
            break
    return block


def check_sizes(src):
    """Returns (problems, files awaiting their split, stale AWAITING_SPLIT entries)."""
    problems, awaiting, long_files = [], [], set()
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, src).replace(os.sep, "/")
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
            if len(lines) <= MAX_LINES:
                continue
            if any(ONE_PIECE.search(c) for c in first_comment(name, lines)):
                continue
            long_files.add(rel)
            if rel in AWAITING_SPLIT:
                awaiting.append("%s (%d lines)" % (rel, len(lines)))
                continue
            problems.append('%s: %d lines, more than %d; split it by idea, or say in its first '
                            'comment why it must be one piece ("one piece: <why>")'
                            % (path, len(lines), MAX_LINES))
    stale = [rel for rel in AWAITING_SPLIT if rel not in long_files]
    return problems, awaiting, stale


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
    long_files, awaiting, stale = check_sizes(src)
    for p in problems + long_files:
        print(p)
    for rel in stale:
        print("note: %s is in AWAITING_SPLIT but is not a file over %d lines: remove it from "
              "the list" % (rel, MAX_LINES), file=sys.stderr)
    if problems or long_files:
        print("layering: %d problem(s) in %s" % (len(problems) + len(long_files), src),
              file=sys.stderr)
        return 1
    print("layering: %d files in %s follow the table; no file is over %d lines%s"
          % (checked, src, MAX_LINES,
             "" if not awaiting else " but those awaiting their split: " + ", ".join(awaiting)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
