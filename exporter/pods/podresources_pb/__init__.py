"""Protobuf messages of the kubelet pod-resources API v1 (generated; see api.proto).

``api_pb2.py`` is generated from ``api.proto`` and committed, so neither protoc nor
grpcio-tools is needed at run time. It was generated with grpcio-tools 1.62.3 (protoc 25,
Python gencode 4.25) on purpose: newer protoc versions stamp a runtime check into the
generated file that would force ``protobuf >= <that version>`` on every user. The file
imports under protobuf 4.25, 5.x, 6.x and 7.x (tests/podresources/test_proto.py checks that
its descriptor matches api.proto when grpcio-tools is installed). Regenerate with
``python -m exporter.pods.podresources_pb.regenerate`` from the repository root.

Only the messages are generated; the one RPC we call (``/v1.PodResourcesLister/List``) is
wired by hand in exporter/pods/kubelet.py, which avoids the generated ``_pb2_grpc``
module's hard ``grpcio >= <generator version>`` check.
"""
