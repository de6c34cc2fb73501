#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Prints the test names registered in a test file, one per line, so meson
can register each as a test of its own (and CI counts them).

C tables (tests/test.h): rows {"name", func, ANY_BACKEND|SHM_ONLY|VERBS_ONLY}.
With --backend shm the VERBS_ONLY rows are left out, with --backend verbs the
SHM_ONLY ones.
With --gst-check, the names are gst-check's tcase_add_test (tc, name), to
be selected at run time with GST_CHECKS=name."""
import argparse
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--backend", choices=["shm", "verbs"])
ap.add_argument("--gst-check", action="store_true")
ap.add_argument("path")
args = ap.parse_args()
text = open(args.path).read()
if args.gst_check:
    for m in re.finditer(r"tcase_add_test\s*\(\s*\w+\s*,\s*(\w+)\s*\)", text):
        print(m.group(1))
    sys.exit(0)
left_out = {"shm": "VERBS_ONLY", "verbs": "SHM_ONLY"}.get(args.backend)
rows = re.findall(r'\{"(\w+)",\s*\w+,\s*(ANY_BACKEND|SHM_ONLY|VERBS_ONLY)\}', text)
if not rows:
    sys.exit("%s: no test table rows found" % args.path)
for name, backends in rows:
    if backends != left_out:
        print(name)
