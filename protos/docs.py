"""Render docs/API.md, the reference of the gRPC contract, from ``protos/`` and its comments.

    python protos/docs.py           # write docs/API.md
    python protos/docs.py --check   # exit 1 if docs/API.md differs from a fresh rendering

The comments in the .proto files are the documentation: protoc (grpcio-tools, as for the code) compiles the
files with their source info, and every service, RPC, message, field, enum and value is listed with the
comment above it (or after it on its line). Nothing in docs/API.md is written by hand, so CI can hold it to
the contract as it holds the generated code (``--check``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path

from google.protobuf import descriptor_pb2
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
OUT = ROOT / "docs" / "API.md"

# Paths into a FileDescriptorProto, as SourceCodeInfo.Location.path spells them (descriptor.proto's field
# numbers): a message is [4, i], its field [4, i, 2, j], and so on.
SYNTAX, MESSAGE, ENUM, SERVICE = 12, 4, 5, 6
MESSAGE_FIELD = ENUM_VALUE = SERVICE_METHOD = 2

FieldType = descriptor_pb2.FieldDescriptorProto.Type
Label = descriptor_pb2.FieldDescriptorProto.Label


def compile_protos(protos: Path) -> list[descriptor_pb2.FileDescriptorProto]:
    """The .proto files under ``protos``, compiled with their comments, in the order of their names."""
    sources = sorted(str(p.relative_to(protos)) for p in protos.rglob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "set.binpb"
        args = [
            "protoc",
            f"-I{protos}",
            f"-I{include}",
            "--include_source_info",
            f"--descriptor_set_out={out}",
        ]
        if protoc.main([*args, *sources]) != 0:
            raise SystemExit("protoc failed: see its messages above")
        return list(descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file)


def render(files: Sequence[descriptor_pb2.FileDescriptorProto]) -> str:
    """The whole reference: the same files give the same text, byte for byte (``--check`` compares)."""
    lines = [
        "# API reference",
        "",
        "<!-- Generated from protos/ by protos/docs.py: edit the comments there, then run"
        " `python protos/docs.py`. -->",
        "",
        "The gRPC contract, from the comments of its .proto files. Errors carry a `google.rpc.Status`",
        "with `google.rpc.ErrorInfo` details (docs/grpc.md); server reflection serves these files,",
        "those types and `grpc.reflection.v1` as well as `v1alpha`.",
        "",
        *(f"- [{f.name}](#{anchor(f.name)})" for f in files),
    ]
    for f in files:
        lines += render_file(f)
    return "\n".join(lines) + "\n"


def render_file(f: descriptor_pb2.FileDescriptorProto) -> list[str]:
    """One file's section, its declarations in the order of the file (the order its authors chose)."""
    comments = {tuple(loc.path): comment(loc) for loc in f.source_code_info.location}
    lines = ["", f"## {f.name}", "", f"Package `{f.package}`.", *block(comments.get((SYNTAX,), ""))]
    for i, service in enumerate(f.service):
        lines += ["", f"### {service.name}", *block(comments.get((SERVICE, i), ""))]
        lines += ["", "| RPC | Request | Reply | Description |", "| --- | --- | --- | --- |"]
        for j, method in enumerate(service.method):
            request = ("stream " if method.client_streaming else "") + type_link(method.input_type)
            reply = ("stream " if method.server_streaming else "") + type_link(method.output_type)
            text = cell(comments.get((SERVICE, i, SERVICE_METHOD, j), ""))
            lines.append(f"| `{method.name}` | {request} | {reply} | {text} |")
    if f.message_type:
        lines += ["", "### Messages"]
    for i, message in enumerate(f.message_type):
        lines += ["", f"#### {message.name}", *block(comments.get((MESSAGE, i), ""))]
        if not message.field:
            lines += ["", "No fields."]
            continue
        lines += ["", "| Field | Number | Type | Description |", "| --- | --- | --- | --- |"]
        for j, field in enumerate(message.field):
            text = cell(comments.get((MESSAGE, i, MESSAGE_FIELD, j), ""))
            lines.append(f"| `{field.name}` | {field.number} | {field_type(field)} | {text} |")
    if f.enum_type:
        lines += ["", "### Enums"]
    for i, enum in enumerate(f.enum_type):
        lines += ["", f"#### {enum.name}", *block(comments.get((ENUM, i), ""))]
        lines += ["", "| Value | Number | Description |", "| --- | --- | --- |"]
        for j, value in enumerate(enum.value):
            text = cell(comments.get((ENUM, i, ENUM_VALUE, j), ""))
            lines.append(f"| `{value.name}` | {value.number} | {text} |")
    return lines


def comment(location: descriptor_pb2.SourceCodeInfo.Location) -> str:
    """The comment above a declaration and the one after it on its line (detached ones are section rules,
    not documentation)."""
    parts = (location.leading_comments, location.trailing_comments)
    return "\n".join(textwrap.dedent(part).strip("\n") for part in parts if part.strip())


def block(text: str) -> list[str]:
    """A comment as Markdown after a blank line: its lines as they are (its lists stay lists)."""
    return ["", *text.splitlines()] if text else []


def cell(text: str) -> str:
    """A comment in one table cell: one line, its pipes escaped."""
    return " ".join(line.strip() for line in text.splitlines()).replace("|", "\\|")


def field_type(field: descriptor_pb2.FieldDescriptorProto) -> str:
    if field.type_name:
        name = type_link(field.type_name)
    else:
        name = f"`{FieldType.Name(field.type).removeprefix('TYPE_').lower()}`"
    if field.label == Label.LABEL_REPEATED:
        return f"repeated {name}"
    return f"optional {name}" if field.proto3_optional else name


def type_link(full_name: str) -> str:
    """A type of this contract as a link to its section; another package's (google.protobuf's) by name."""
    package, _, name = full_name.lstrip(".").rpartition(".")
    if package.startswith("uno."):
        return f"[{name}](#{anchor(name)})"
    return f"`{package}.{name}`"


def anchor(heading: str) -> str:
    """The id GitHub gives a Markdown heading: lower case, punctuation other than - and _ dropped."""
    return "".join(c for c in heading.lower().replace(" ", "-") if c.isalnum() or c in "-_")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail if docs/API.md is out of date")
    args = parser.parse_args()
    text = render(compile_protos(PROTOS))
    if args.check:
        if OUT.exists() and OUT.read_text() == text:
            print("docs/API.md is up to date")
            return 0
        print("docs/API.md differs from protos/: run python protos/docs.py", file=sys.stderr)
        return 1
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
