#!/usr/bin/env python3
"""Prints the structure of zcomm's C++ sources, for reviews of the layering:

  python3 scripts/structure.py [--root DIR] [--top N]

1. which folders of src/ include which (the layers: api -> collectives, ps,
   engine -> p2p -> transports), and every include that runs the other way;
2. the N longest functions (lines from the signature to the closing brace);
3. the N biggest files;
4. the headers outside src/common most included (the classes everything
   climbs back to), with who includes them.

It reads the sources only (no build): includes are the quoted #include lines,
functions are found by brace matching at namespace level.
"""
import argparse
import os
import re
import sys

# The layers, highest first: a folder may include those after it only.
LAYERS = ["src/api", "src/engine", "src/ps", "src/gpu", "src/collectives", "src/p2p/shm",
          "src/p2p/tcp", "src/p2p/verbs", "src/p2p", "src/bootstrap", "src/common"]
SOURCE = (".cpp", ".h", ".cu", ".hpp", ".c")


def sources(root, top):
    for base, dirs, files in os.walk(os.path.join(root, top)):
        dirs[:] = sorted(d for d in dirs if d not in ("build", ".git"))
        for f in sorted(files):
            if f.endswith(SOURCE):
                yield os.path.relpath(os.path.join(base, f), root)


def folder_of(path):
    for layer in sorted(LAYERS, key=len, reverse=True):
        if path.startswith(layer + "/"):
            return layer
    return os.path.dirname(path)


def includes(root, path):
    with open(os.path.join(root, path), errors="replace") as f:
        for line in f:
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if m:
                yield m.group(1)


def resolve(root, path, inc):
    for cand in (os.path.join("src", inc), os.path.join(os.path.dirname(path), inc)):
        if os.path.exists(os.path.join(root, cand)):
            return os.path.normpath(cand)
    return None


def strip_comments_and_strings(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])'", "''", text)


def functions(root, path):
    """(name, lines) of every function body at namespace or class level."""
    with open(os.path.join(root, path), errors="replace") as f:
        text = strip_comments_and_strings(f.read())
    out = []
    depth, start, head = 0, None, ""
    line = 1
    kinds = []  # per open brace: True if it opened a function body
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\n":
            line += 1
        if c == "{":
            sig = head.strip()
            is_fn = bool(re.search(r"\)\s*(const|noexcept|override|final|->[^{;]*|\s)*$", sig)) and \
                not re.search(r"\b(if|for|while|switch|catch|namespace|class|struct|enum|union)\b[^;]*$",
                              sig.split("\n")[-1]) and not any(kinds)
            if is_fn:
                m = re.search(r"([~\w:]+)\s*\([^()]*(\([^()]*\)[^()]*)*\)[^()]*$", sig)
                name = m.group(1) if m else "?"
                start = (name, line - sig.count("\n"))
            kinds.append(is_fn)
            depth += 1
            head = ""
        elif c == "}":
            depth -= 1
            opened_fn = kinds.pop() if kinds else False
            if opened_fn and start:
                out.append((start[0], line - start[1] + 1, start[1]))
                start = None
            head = ""
        elif c == ";":
            head = ""
        else:
            head += c
        i += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    files = list(sources(root, "src"))

    deps, upward, fan_in = {}, [], {}
    for p in files:
        src = folder_of(p)
        for inc in includes(root, p):
            target = resolve(root, p, inc)
            if not target:
                continue
            if os.path.splitext(target)[0] != os.path.splitext(p)[0]:
                fan_in.setdefault(target, []).append(p)
            dst = folder_of(target)
            if dst == src:
                continue
            deps.setdefault(src, {}).setdefault(dst, 0)
            deps[src][dst] += 1
            if src in LAYERS and dst in LAYERS and LAYERS.index(dst) < LAYERS.index(src):
                upward.append("%s -> %s" % (p, target))
    print("1. Folders of src/ and what they include (count of include lines):")
    for src in sorted(deps, key=lambda s: LAYERS.index(s) if s in LAYERS else 99):
        print("  %-18s -> %s" % (src, ", ".join("%s %d" % (d, n) for d, n in sorted(deps[src].items()))))
    print("  includes against the layers (a lower folder including a higher one): %d" % len(upward))
    for u in upward:
        print("    " + u)

    fns = []
    for p in files:
        if p.endswith((".cpp", ".cu", ".c", ".h")):
            fns += [(n, name, p, l0) for name, n, l0 in functions(root, p)]
    fns.sort(reverse=True)
    print("\n2. The %d longest functions (lines):" % a.top)
    for n, name, p, l0 in fns[:a.top]:
        print("  %4d  %s  (%s:%d)" % (n, name, p, l0))

    sizes = []
    for p in files:
        with open(os.path.join(root, p), errors="replace") as f:
            sizes.append((sum(1 for _ in f), p))
    sizes.sort(reverse=True)
    print("\n3. The %d biggest files (lines):" % a.top)
    for n, p in sizes[:a.top]:
        print("  %5d  %s" % (n, p))

    print("\n4. The %d most included headers outside src/common (files that include each):"
          % (a.top // 3))
    ranked = [kv for kv in fan_in.items() if not kv[0].startswith("src/common/")]
    for target, who in sorted(ranked, key=lambda kv: -len(kv[1]))[:a.top // 3]:
        print("  %3d  %s: %s" % (len(who), target, " ".join(sorted(os.path.basename(w) for w in who))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
