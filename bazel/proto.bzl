"""Protocol Buffers and gRPC C++ code from Debian's protoc and grpc_cpp_plugin.

Bazel 4.2's native proto rules need downloads, so this macro runs the system
compiler in a genrule and wraps the generated sources in a cc_library.
Proto paths are relative to the package of the BUILD file that calls it.
"""

def cc_grpc_proto_library(name, srcs, deps = [], grpc = True):
    """One cc_library `name` over the .pb and (if grpc) .grpc.pb code of srcs."""
    stems = [s[:-len(".proto")] for s in srcs]
    hdrs = [s + ".pb.h" for s in stems]
    cc_srcs = [s + ".pb.cc" for s in stems]
    if grpc:
        hdrs += [s + ".grpc.pb.h" for s in stems]
        cc_srcs += [s + ".grpc.pb.cc" for s in stems]
    pkg = native.package_name()
    out_root = "$(GENDIR)/" + pkg if pkg else "$(GENDIR)"
    grpc_flags = ""
    if grpc:
        grpc_flags = ("--grpc_out=%s --plugin=protoc-gen-grpc=$(location @system_tools//:grpc_cpp_plugin) " %
                      out_root)
    native.genrule(
        name = name + "_gen",
        srcs = srcs,
        outs = hdrs + cc_srcs,
        tools = ["@system_tools//:protoc", "@system_tools//:grpc_cpp_plugin"],
        cmd = ("$(location @system_tools//:protoc) -I%s -I/usr/include --cpp_out=%s %s%s" %
               (pkg if pkg else ".", out_root, grpc_flags,
                " ".join(["$(location %s)" % s for s in srcs]))),
    )
    native.cc_library(
        name = name,
        srcs = cc_srcs,
        hdrs = hdrs,
        includes = ["."],
        deps = deps + ["@system//:protobuf"] + (["@system//:grpc"] if grpc else []),
    )
