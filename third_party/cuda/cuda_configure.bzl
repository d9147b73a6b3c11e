"""The @cuda repository: the CUDA toolkit and NCCL found on this machine.

Looks for the toolkit at $CUDA_PATH, else /usr/local/cuda. Where it is found,
the repository exposes its headers and libraries as cc_library targets and
defs.bzl says CUDA_AVAILABLE = True; where it is not, the same targets exist
but are empty and CUDA_AVAILABLE = False, so the default (CPU-only) build
never depends on CUDA being installed. GPU targets are built only under
--config=cuda (see //third_party/cuda:cuda.bzl).
"""

_BUILD_WITH_CUDA = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "headers",
    hdrs = glob(["root/include/**/*.h", "root/include/**/*.hpp", "root/include/**/*.inl"]),
    includes = ["root/include"],
)

# Shared libraries throughout: the GPU machine has its own (PyTorch's wheels
# carry libcudart, libcublas and libnccl), which tools/bundle_gpu.sh points at.
cc_library(
    name = "cudart",
    linkopts = ["-L{root}/lib64", "-Wl,-rpath,{root}/lib64", "-lcudart"],
    deps = [":headers"],
)

cc_library(
    name = "cublas",
    linkopts = ["-L{root}/lib64", "-lcublasLt", "-lcublas"],
    deps = [":headers"],
)

cc_library(
    name = "nccl",
    linkopts = ["-L{root}/lib64", "-lnccl"],
    deps = [":headers"],
)
"""

_BUILD_WITHOUT_CUDA = """
package(default_visibility = ["//visibility:public"])

# No CUDA toolkit was found at {root}: these targets are empty, and every GPU
# target is incompatible with the default configuration anyway.
cc_library(name = "headers")
cc_library(name = "cudart")
cc_library(name = "cublas")
cc_library(name = "nccl")
"""

def _cuda_configure_impl(ctx):
    root = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    available = ctx.path(root + "/include/cuda_runtime.h").exists
    if available:
        ctx.symlink(root, "root")
        ctx.file("BUILD.bazel", _BUILD_WITH_CUDA.replace("{root}", root))
    else:
        ctx.file("BUILD.bazel", _BUILD_WITHOUT_CUDA.replace("{root}", root))
    ctx.file("defs.bzl", "CUDA_AVAILABLE = %s\nCUDA_ROOT = %r\n" % (available, root))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)
