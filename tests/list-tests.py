#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Prints the test names registered in a C test file's table, one per line,
so meson can register each as a test of its own (and CI counts them).

Table rows look like {"name", func} or {{"name", func}, shm_only}.
With --no-shm-only, rows marked `true` (shm only) are left out; with
--no-verbs-only, rows marked `VERBS_ONLY`.
With --gst-check, the names are gst-check's tcase_add_test (tc, name), to
be selected at run time with GST_CHECKS=name."""
import re
import sys

path = sys.argv[-1]
skip_shm_only = "--no-shm-only" in sys.argv
skip_verbs_only = "--no-verbs-only" in sys.argv
if "--gst-check" in sys.argv:
    for m in re.finditer(r"tcase_add_test\s*\(\s*\w+\s*,\s*(\w+)\s*\)", open(path).read()):
        print(m.group(1))
    sys.exit(0)
for m in re.finditer(r'\{\{?"(\w+)",\s*\w+\}(?:,\s*(true|false|ANY|VERBS_ONLY)\})?', open(path).read()):
    if skip_shm_only and m.group(2) == "true":
        continue
    if skip_verbs_only and m.group(2) == "VERBS_ONLY":
        continue
    print(m.group(1))
