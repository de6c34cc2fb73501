#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the shared objects export, against what they should.

  check-exports.py SBR_H LIBSBR_MAP LIBSBR_SO [PLUGIN_SO]
  check-exports.py --list SBR_H     (the functions sbr.h declares)

libsbr.so must export exactly the functions sbr.h declares (not the
static inline wrappers), every one listed in the version script under
its version node, and nothing else: no internal sbr__ helper.  The
plugin must export only the two entry points GST_PLUGIN_DEFINE declares
(gst_plugin_rdma_get_desc, and gst_plugin_rdma_register for static
registration), as upstream plugins built with hidden visibility do.
Prints what differs and exits 1, or prints a summary and exits 0.
"""
import re
import subprocess
import sys

PLUGIN_ENTRY_POINTS = {"gst_plugin_rdma_get_desc", "gst_plugin_rdma_register"}


def header_functions(path):
    """Names of the functions sbr.h declares at file scope (prototypes
    ending in ';'; inline definitions, typedefs and struct members are
    left out)."""
    text = open(path).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^\s*#[^\n]*(\\\n[^\n]*)*", " ", text, flags=re.M)
    names, stmt, depth = set(), "", 0
    for ch in text:
        if ch == "{":
            # extern "C" { opens no scope of its own for declarations.
            if depth == 0 and re.search(r'extern\s+"C"\s*$', stmt):
                stmt = ""
                continue
            if depth == 0:
                stmt = ""
            depth += 1
        elif ch == "}":
            depth = max(depth - 1, 0)
            if depth == 0:
                stmt = ""
        elif depth == 0:
            if ch == ";":
                s = " ".join(stmt.split())
                m = re.search(r"\b(sbr_\w+)\s*\(", s)
                if m and not s.startswith("typedef") and "(*" not in s:
                    names.add(m.group(1))
                stmt = ""
            else:
                stmt += ch
    return names


def map_globals(path):
    """{name: version node} of the version script's global symbols."""
    text = re.sub(r"/\*.*?\*/", " ", open(path).read(), flags=re.S)
    out = {}
    for node, body in re.findall(r"([\w.]+)\s*\{(.*?)\}\s*[\w.]*\s*;", text, re.S):
        m = re.search(r"global:(.*?)(local:|$)", body, re.S)
        for name in re.findall(r"([\w]+)\s*;", m.group(1) if m else ""):
            out[name] = node
    return out


def exported(path):
    """{name: version or ''} of the defined dynamic symbols, without the
    version nodes' own absolute symbols."""
    out = subprocess.run(
        ["nm", "-D", "--defined-only", "--with-symbol-versions", path],
        check=True, capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[1] == "A":
            continue
        name, _, version = parts[2].partition("@")
        syms[name] = version.lstrip("@")
    return syms


def main(argv):
    if argv[1:2] == ["--list"]:
        print("\n".join(sorted(header_functions(argv[2]))))
        return 0
    header, mapfile, lib = argv[1:4]
    plugin = argv[4] if len(argv) > 4 else None
    problems = []
    declared = header_functions(header)
    listed = map_globals(mapfile)
    syms = exported(lib)
    if len(declared) < 20:
        problems.append(f"sbr.h: only {len(declared)} functions found: "
                        "the parser no longer understands it")
    for n in sorted(declared - set(listed)):
        problems.append(f"{n}: declared in sbr.h, missing from {mapfile}")
    for n in sorted(set(listed) - declared):
        problems.append(f"{n}: in {mapfile} but not declared in sbr.h")
    for n in sorted(declared - set(syms)):
        problems.append(f"{n}: declared in sbr.h, not exported by {lib}")
    for n in sorted(set(syms) - declared):
        problems.append(f"{n}: exported by {lib} but not public")
    for n in sorted(declared & set(syms)):
        if n in listed and syms[n] != listed[n]:
            problems.append(f"{n}: exported with version '{syms[n]}', "
                            f"the map says {listed[n]}")
    n_plugin = 0
    if plugin:
        psyms = exported(plugin)
        n_plugin = len(psyms)
        for n in sorted(set(psyms) - PLUGIN_ENTRY_POINTS):
            problems.append(f"{n}: exported by {plugin}")
        for n in sorted(PLUGIN_ENTRY_POINTS - set(psyms)):
            problems.append(f"{n}: the plugin's entry point is not exported")
    for p in problems:
        print("check-exports:", p)
    if problems:
        return 1
    print(f"check-exports: libsbr exports the {len(declared)} functions of "
          f"sbr.h, versioned as the map says, and nothing else"
          + (f"; the plugin only its {n_plugin} entry points" if plugin else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
