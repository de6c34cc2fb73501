#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Counts the results of meson test logs (meson-logs/LOGBASE.json) for
scripts/run-tests.sh: prints "PASSED FAILED SKIPPED" summed over the logs
given.  A missing log counts as one failure (the run did not happen).

    tally.py LOG.json...
"""
import json
import sys

passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        failed += 1
        continue
    for line in lines:
        result = json.loads(line)["result"]
        if result == "OK":
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:
            failed += 1
print(passed, failed, skipped)
