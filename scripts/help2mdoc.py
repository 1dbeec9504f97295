#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Turn a daemon's --help flag list into mdoc .It entries (used when writing man pages; the
test tests/integration/test_man_flags.sh checks that man pages and --help list the same flags)."""
import re
import subprocess
import sys

out = subprocess.run([sys.argv[1], "--help"], capture_output=True, text=True).stdout
lines = out.splitlines()
i = 0
print(".Bl -tag -width Ds")
while i < len(lines):
    m = re.match(r"\s+--(\S+)=<(\w+)>(?: \(alias --(\S+)\))?\s+\(default: (.*)\)$", lines[i])
    if m:
        name, typ, alias, default = m.groups()
        help_text = lines[i + 1].strip() if i + 1 < len(lines) else ""
        print(".It Fl -%s Ns = Ns Ar %s" % (name, typ))
        text = help_text[0].upper() + help_text[1:] if help_text else ""
        if not text.endswith("."):
            text += "."
        print(text)
        if alias:
            print("Alias:")
            print(".Fl -%s ." % alias)
        print("Default:")
        print(".Ql %s ." % default.replace('\\', '\\e'))
        i += 2
        continue
    i += 1
print(".El")
