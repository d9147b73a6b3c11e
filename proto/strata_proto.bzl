"""Compiles .proto files with Debian's protoc (and grpc_cpp_plugin) in a genrule.

Bazel 4.2.3's native proto rules want a @com_google_protobuf source repository,
which is not available offline; protoc from /usr is.
"""

def strata_proto_library(name, srcs, deps = [], grpc = False, visibility = None):
    bases = [s[:-len(".proto")] for s in srcs]
    hdrs = [b + ".pb.h" for b in bases]
    ccs = [b + ".pb.cc" for b in bases]
    cmd = "protoc -I. --cpp_out=$(GENDIR) $(SRCS)"
    if grpc:
        hdrs += [b + ".grpc.pb.h" for b in bases]
        ccs += [b + ".grpc.pb.cc" for b in bases]
        cmd = ("protoc -I. --cpp_out=$(GENDIR) --grpc_out=$(GENDIR) " +
               "--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin $(SRCS)")
    dep_protos = [d + "_srcs" for d in deps]
    native.filegroup(name = name + "_srcs", srcs = srcs + dep_protos)
    native.genrule(
        name = name + "_gen",
        srcs = srcs + dep_protos,
        outs = hdrs + ccs,
        cmd = cmd.replace("$(SRCS)", " ".join(["$(location %s)" % s for s in srcs])),
    )
    native.cc_library(
        name = name,
        srcs = ccs,
        hdrs = hdrs,
        deps = deps + ["@system//:protobuf"] + (["@system//:grpc"] if grpc else []),
        visibility = visibility,
    )
