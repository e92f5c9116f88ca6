#!/usr/bin/env python3
"""Regenerates fsm-testkit/src/protobuf/fields.txt: for every Kubernetes
protobuf message of the k8s-pb crate (the prost bindings of the kube-rs
project), its field numbers and field names.

Usage: scripts/gen-protobuf-fields.py PATH/TO/k8s-pb-VERSION/src > fsm-testkit/src/protobuf/fields.txt
(the crate's source is under ~/.cargo/registry/src/*/ once fsm-testkit's
dev-dependencies are fetched).

Each line: `package.Message<TAB>tag name[ type]<TAB>...`, `type` the
`package.Message` of a message field,, the package as
the module path (`api.core.v1`), the name in prost's snake case: the
decoder matches it to the JSON name of the Kubernetes OpenAPI schema.
"""
import os
import re
import sys

root = sys.argv[1]


def resolve(package, ty):
    """The absolute `package.Message` of a prost field type such as
    `::core::option::Option<super::super::meta::v1::ObjectMeta>`."""
    inner = [p for p in re.sub(r"^.*?<", "", ty).rstrip(">,").split(",") if p][-1].rstrip(">,")
    parts = package.split(".")
    segs = inner.split("::")
    while segs and segs[0] == "super":
        parts.pop()
        segs.pop(0)
    return ".".join(parts + segs)


out = []
for dirpath, _, files in os.walk(root):
    if "mod.rs" not in files:
        continue
    package = os.path.relpath(dirpath, root).replace(os.sep, ".")
    if not (package.startswith("api.") or package.startswith("apimachinery.")
            or package.startswith("apiextensions_apiserver.")
            or package.startswith("kube_aggregator.")):
        continue
    text = open(os.path.join(dirpath, "mod.rs")).read()
    for m in re.finditer(r"pub struct (\w+) \{(.*?)\n\}", text, re.S):
        name, body = m.group(1), m.group(2)
        fields = []
        for chunk in body.split("#[prost(")[1:]:
            m2 = re.match(r'([^\]]*?)tag = "(\d+)"\)\]\s*pub (?:r#)?(\w+):(.*)', chunk, re.S)
            if m2:
                ty = re.sub(r"\s+", "", m2.group(4).split("///")[0]).rstrip(",")
                fields.append(("message" in m2.group(1), m2.group(2), m2.group(3), ty))
        if not fields:
            continue
        cols = []
        for message, tag, field, ty in fields:
            col = f"{tag} {field}"
            if message:
                col += " " + resolve(package, ty)
            cols.append(col)
        out.append(package + "." + name + "\t" + "\t".join(cols))
print("\n".join(sorted(out)))
