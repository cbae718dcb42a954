"""A protobuf message class as protoc would generate it (`Order`, package `eos.test`), built from its
descriptor here because this machine has no protoc: what `value_serializer="protobuf"` imports by path."""

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_file = descriptor_pb2.FileDescriptorProto(name="eos_test_orders.proto", package="eos.test", syntax="proto3")
_order = _file.message_type.add(name="Order")
_order.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64, label=1)
_order.field.add(name="item", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
_order.field.add(name="quantity", number=3, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32, label=1)


def message_class(file: descriptor_pb2.FileDescriptorProto, name: str):
    """Message `name` of `file`, added to the default descriptor pool on first use in this process."""
    pool = descriptor_pool.Default()
    try:
        descriptor = pool.FindFileByName(file.name)
    except KeyError:  # first import in this process
        pool.Add(file)
        descriptor = pool.FindFileByName(file.name)
    return message_factory.GetMessageClass(descriptor.message_types_by_name[name])


Order = message_class(_file, "Order")
