#!/usr/bin/env python3
"""Lists, from the upstream Go API types, what the .proto files do not say but JSON needs:
which scalar fields are Go pointers (an explicit zero is a value), which are emitted even when
zero (no `omitempty`), and which fields have a JSON name other than their proto name.

Usage: go_fields.py API_REPO APIMACHINERY_REPO APIEXTENSIONS_REPO > go-fields.txt
(checkouts of k8s.io/api, k8s.io/apimachinery and k8s.io/apiextensions-apiserver).
Output lines: `<proto package>.<Message> <proto field> <json name> <ptr|always|omitempty>`, or
`<proto package>.<Message> <proto field> - inline` for an embedded struct whose fields JSON
inlines into the parent (`ProbeHandler` in `Probe`, `VolumeSource` in `Volume`).
"""
import os
import re
import sys

STRUCT = re.compile(r"^type (\w+) struct \{")
FIELD = re.compile(r'^\s*(\w+)\s+([^\s`]+)\s+`([^`]*)`')
EMBEDDED = re.compile(r'^\s*(\*?[\w.]+)\s+`([^`]*)`')
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
            embedded = m is None
            if m:
                _, go_type, tags = m.groups()
            else:
                m = EMBEDDED.match(line)
                if not m:
                    continue
                go_type, tags = m.groups()
            j = JSON_TAG.search(tags)
            if not j or 'protobuf:"' not in tags:
                continue
            p = PB_TAG.search(tags)
            type_name = go_type.lstrip("*").split(".")[-1]
            proto_name = p.group(1) if p else type_name[0].lower() + type_name[1:]
            parts = j.group(1).split(",")
            json_name = parts[0]
            if embedded and json_name == "":
                # An embedded struct: its fields are the parent's in JSON, a message in proto.
                out.append(f"{package}.{current} {proto_name} - inline")
                continue
            if json_name in ("", "-"):
                continue
            if go_type.startswith("*"):
                presence = "ptr"
            elif "omitempty" in parts or "omitzero" in parts:
                presence = "omitempty"
            else:
                presence = "always"
            out.append(f"{package}.{current} {proto_name} {json_name} {presence}")


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
        if presence != "omitempty" or field != json_name or json_name == "-":
            print(line)


main()
