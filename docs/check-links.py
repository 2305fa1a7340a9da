#!/usr/bin/env python3
"""Checks every relative link in README.md and docs/*.md: the file must exist and, for a link
with a #fragment into a Markdown file, the heading must be there (GitHub's anchor rules:
lower case, punctuation dropped, spaces to hyphens, -1, -2 ... for repeats).

    python3 docs/check-links.py        # prints each broken link; exit 1 if there is one
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(path):
    """The lines outside fenced code blocks, with their numbers."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield number, line


def slug(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    found = set()
    for _, line in prose_lines(path):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def check(path):
    broken = []
    here = os.path.dirname(path)
    for number, line in prose_lines(path):
        for m in LINK.finditer(line):
            target = m.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, fragment = target.partition("#")
            dest = os.path.normpath(os.path.join(here, file_part)) if file_part else path
            where = f"{os.path.relpath(path, ROOT)}:{number}: {target}"
            if not os.path.exists(dest):
                broken.append(f"{where}: no such file")
            elif fragment and dest.endswith(".md") and fragment not in anchors(dest):
                broken.append(f"{where}: no heading #{fragment}")
    return broken


def main():
    docs = os.path.join(ROOT, "docs")
    files = [os.path.join(ROOT, "README.md")]
    files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    broken = [b for f in files for b in check(f)]
    for b in broken:
        print(b)
    print(f"{len(files)} files checked, {len(broken)} broken links", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
