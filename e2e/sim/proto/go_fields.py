#!/usr/bin/env python3
"""Lists, from the upstream Go API types, what the .proto files do not say but JSON needs:
which scalar fields are Go pointers (an explicit zero is a value), which are emitted even when
zero (no `omitempty`), and which fields have a JSON name other than their proto name.

Usage: go_fields.py API_REPO APIMACHINERY_REPO APIEXTENSIONS_REPO > go-fields.txt
(checkouts of k8s.io/api, k8s.io/apimachinery and k8s.io/apiextensions-apiserver).
Output lines: `<proto package>.<Message> <proto field> <json name> <ptr|always|omitempty>`.
"""
import os
import re
import sys

STRUCT = re.compile(r"^type (\w+) struct \{")
FIELD = re.compile(r'^\s*(\w+)\s+([^\s`]+)\s+`([^`]*)`')
JSON_TAG = re.compile(r'json:"([^"]*)"')
PB_TAG = re.compile(r'protobuf:"[^"]*name=(\w+)')


def scan(path, package, out):
    current = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = STRUCT.match(line)
            if m:
                current = m.group(1)
                continue
            if line.startswith("}"):
                current = None
                continue
            if current is None:
                continue
            m = FIELD.match(line)
            if not m:
                continue
            _, go_type, tags = m.groups()
            j, p = JSON_TAG.search(tags), PB_TAG.search(tags)
            if not j or not p:
                continue
            parts = j.group(1).split(",")
            json_name = parts[0]
            if json_name in ("", "-"):
                continue
            if go_type.startswith("*"):
                presence = "ptr"
            elif "omitempty" in parts or "omitzero" in parts:
                presence = "omitempty"
            else:
                presence = "always"
            out.append(f"{package}.{current} {p.group(1)} {json_name} {presence}")


def main():
    api, machinery, extensions = sys.argv[1:4]
    roots = [
        (api, "api", ["core/v1", "apps/v1", "batch/v1", "policy/v1", "rbac/v1", "autoscaling/v1",
                      "autoscaling/v2", "coordination/v1", "events/v1", "admissionregistration/v1",
                      "authorization/v1", "authentication/v1", "discovery/v1"]),
        (machinery, "apimachinery.pkg", ["apis/meta/v1", "runtime", "util/intstr", "api/resource"]),
        (extensions, "apiextensions_apiserver.pkg", ["apis/apiextensions/v1"]),
    ]
    out = []
    for repo, prefix, dirs in roots:
        for d in dirs:
            base = os.path.join(repo, "pkg", d) if prefix != "api" else os.path.join(repo, d)
            package = prefix + "." + d.replace("/", ".")
            for name in sorted(os.listdir(base)):
                if name.endswith(".go") and not name.endswith("_test.go") and "generated" not in name:
                    scan(os.path.join(base, name), package, out)
    for line in sorted(set(out)):
        # Only what differs from the default (omitempty, same name) is listed.
        pkg_msg, field, json_name, presence = line.split()
        if presence != "omitempty" or field != json_name:
            print(line)


main()
