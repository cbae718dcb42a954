"""A protobuf message class with the field kinds a reader must tell apart (`Reading`, package
`eos.test`): a proto3 `optional`, a oneof, 64-bit unsigned integers, a map, a nested message. Built from
its descriptor here, as tests/support/orders_pb2.py is, because this machine has no protoc."""

from google.protobuf import descriptor_pb2

from tests.support.orders_pb2 import message_class

F = descriptor_pb2.FieldDescriptorProto
_file = descriptor_pb2.FileDescriptorProto(
    name="eos_test_readings.proto", package="eos.test", syntax="proto3"
)
_inner = _file.message_type.add(name="Inner")
_inner.field.add(name="x", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
_msg = _file.message_type.add(name="Reading")
_msg.oneof_decl.add(name="choice")
_msg.oneof_decl.add(name="_opt")  # proto3 `optional int32 opt = 1`: a one-field synthetic oneof, last
_msg.field.add(
    name="opt", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL, oneof_index=1, proto3_optional=True
)
_msg.field.add(name="a", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
_msg.field.add(name="b", number=3, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL, oneof_index=0)
_msg.field.add(name="u64", number=4, type=F.TYPE_UINT64, label=F.LABEL_OPTIONAL)
_entry = _msg.nested_type.add(name="CountsEntry")
_entry.options.map_entry = True
_entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
_entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
_msg.field.add(
    name="counts",
    number=5,
    type=F.TYPE_MESSAGE,
    label=F.LABEL_REPEATED,
    type_name=".eos.test.Reading.CountsEntry",
)
_msg.field.add(
    name="inner", number=6, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".eos.test.Inner"
)

Reading = message_class(_file, "Reading")
