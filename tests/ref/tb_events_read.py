#!/usr/bin/env python3
"""An independent reader of TensorBoard event files (tests only).

    python3 tests/ref/tb_events_read.py events.out.tfevents.*   ->  JSON on stdout:
    {"file_version": "brain.Event:2", "records": N,
     "scalars": {tag: [[step, value], ...]}, "texts": {tag: [[step, text], ...]}}

Shares nothing with agentr1's C++ writer: the message classes are built at run time from
a schema written here with descriptor_pb2 (field numbers of TensorFlow's event.proto,
summary.proto, tensor.proto, tensor_shape.proto), parsed by Debian's python3-protobuf;
the CRC-32C is a plain bitwise loop. Every record's two masked CRCs are checked; a
mismatch, a short record, or a text value without the text plugin's metadata exits 1.
"""
import json
import math
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def message(fdp, name, fields):
    m = fdp.message_type.add(name=name)
    for fname, number, ftype, label, type_name in fields:
        f = m.field.add(name=fname, number=number, type=ftype, label=label)
        if type_name:
            f.type_name = type_name
    return m


def build_classes():
    fdp = descriptor_pb2.FileDescriptorProto(name="tb_events_ref.proto", package="tbref", syntax="proto3")
    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    # tensor_shape.proto: TensorShapeProto { repeated Dim dim = 2; bool unknown_rank = 3; }
    message(fdp, "Dim", [("size", 1, F.TYPE_INT64, opt, None), ("name", 2, F.TYPE_STRING, opt, None)])
    message(fdp, "TensorShapeProto", [("dim", 2, F.TYPE_MESSAGE, rep, ".tbref.Dim"),
                                      ("unknown_rank", 3, F.TYPE_BOOL, opt, None)])
    # tensor.proto: TensorProto { DataType dtype = 1; TensorShapeProto tensor_shape = 2;
    # int32 version_number = 3; bytes tensor_content = 4; repeated bytes string_val = 8; }
    message(fdp, "TensorProto", [("dtype", 1, F.TYPE_INT32, opt, None),
                                 ("tensor_shape", 2, F.TYPE_MESSAGE, opt, ".tbref.TensorShapeProto"),
                                 ("version_number", 3, F.TYPE_INT32, opt, None),
                                 ("tensor_content", 4, F.TYPE_BYTES, opt, None),
                                 ("string_val", 8, F.TYPE_BYTES, rep, None)])
    # summary.proto: SummaryMetadata { PluginData plugin_data = 1; string display_name = 2;
    # string summary_description = 3; } PluginData { string plugin_name = 1; bytes content = 2; }
    message(fdp, "PluginData", [("plugin_name", 1, F.TYPE_STRING, opt, None),
                                ("content", 2, F.TYPE_BYTES, opt, None)])
    message(fdp, "SummaryMetadata", [("plugin_data", 1, F.TYPE_MESSAGE, opt, ".tbref.PluginData"),
                                     ("display_name", 2, F.TYPE_STRING, opt, None),
                                     ("summary_description", 3, F.TYPE_STRING, opt, None)])
    # Summary.Value { string tag = 1; float simple_value = 2; TensorProto tensor = 8;
    # SummaryMetadata metadata = 9; }   Summary { repeated Value value = 1; }
    message(fdp, "Value", [("tag", 1, F.TYPE_STRING, opt, None),
                           ("simple_value", 2, F.TYPE_FLOAT, opt, None),
                           ("tensor", 8, F.TYPE_MESSAGE, opt, ".tbref.TensorProto"),
                           ("metadata", 9, F.TYPE_MESSAGE, opt, ".tbref.SummaryMetadata")])
    message(fdp, "Summary", [("value", 1, F.TYPE_MESSAGE, rep, ".tbref.Value")])
    # event.proto: Event { double wall_time = 1; int64 step = 2; string file_version = 3;
    # Summary summary = 5; SessionLog session_log = 7; }
    # SessionLog { SessionStatus status = 1; string checkpoint_path = 2; string msg = 3; }
    # (enum SessionStatus: STATUS_UNSPECIFIED 0, START 1, STOP 2, CHECKPOINT 3)
    message(fdp, "SessionLog", [("status", 1, F.TYPE_INT32, opt, None),
                                ("checkpoint_path", 2, F.TYPE_STRING, opt, None),
                                ("msg", 3, F.TYPE_STRING, opt, None)])
    message(fdp, "Event", [("wall_time", 1, F.TYPE_DOUBLE, opt, None), ("step", 2, F.TYPE_INT64, opt, None),
                           ("file_version", 3, F.TYPE_STRING, opt, None),
                           ("summary", 5, F.TYPE_MESSAGE, opt, ".tbref.Summary"),
                           ("session_log", 7, F.TYPE_MESSAGE, opt, ".tbref.SessionLog")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    factory = message_factory.MessageFactory(pool)
    return factory.GetPrototype(pool.FindMessageTypeByName("tbref.Event"))


def fail(msg):
    print("tb_events_read: " + msg, file=sys.stderr)
    sys.exit(1)


def read(path, Event):
    data = open(path, "rb").read()
    out = {"file_version": None, "records": 0, "scalars": {}, "texts": {}, "session_starts": []}
    at = 0
    DT_STRING = 7
    while at < len(data):
        if len(data) - at < 12:
            fail("%s: %d trailing bytes at %d, not a record" % (path, len(data) - at, at))
        head = data[at:at + 8]
        (n,) = struct.unpack("<Q", head)
        (head_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if head_crc != masked(crc32c(head)):
            fail("%s: record at %d: length CRC mismatch" % (path, at))
        if len(data) - at < 16 + n:
            fail("%s: record at %d: %d data bytes announced, file too short" % (path, at, n))
        body = data[at + 12:at + 12 + n]
        (body_crc,) = struct.unpack("<I", data[at + 12 + n:at + 16 + n])
        if body_crc != masked(crc32c(body)):
            fail("%s: record at %d: data CRC mismatch" % (path, at))
        at += 16 + n
        ev = Event()
        ev.ParseFromString(body)
        if out["records"] == 0:
            out["file_version"] = ev.file_version
        out["records"] += 1
        if ev.HasField("session_log") and ev.session_log.status == 1:
            out["session_starts"].append(ev.step)
        for v in ev.summary.value:
            if v.HasField("tensor"):
                if v.metadata.plugin_data.plugin_name != "text":
                    fail("%s: tensor value %r without the text plugin's metadata" % (path, v.tag))
                if v.tensor.dtype != DT_STRING or len(v.tensor.string_val) != 1 or v.tensor.tensor_shape.dim:
                    fail("%s: text value %r is not a scalar DT_STRING tensor" % (path, v.tag))
                out["texts"].setdefault(v.tag, []).append([ev.step, v.tensor.string_val[0].decode("utf-8")])
            else:
                x = v.simple_value  # NaN and infinities as null, as metrics.jsonl has them
                out["scalars"].setdefault(v.tag, []).append([ev.step, x if math.isfinite(x) else None])
    return out


def main():
    if len(sys.argv) != 2:
        fail("usage: tb_events_read.py EVENT_FILE")
    print(json.dumps(read(sys.argv[1], build_classes())))


if __name__ == "__main__":
    main()
