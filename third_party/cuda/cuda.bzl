"""strata_cuda_library: .cu files compiled by nvcc, linked as a cc_library.

    load("//third_party/cuda:cuda.bzl", "strata_cuda_library", "if_cuda")

    strata_cuda_library(
        name = "cwise_gpu",
        srcs = ["cwise_gpu.cu"],
        hdrs = ["cwise_gpu.h"],
    )

A .cu file sees only its own `hdrs`, the CUDA headers and the C++ standard
library: it holds kernels and launch functions with plain signatures
(pointers, sizes, cudaStream_t). OpKernel glue lives in ordinary .cc files
compiled by the host compiler. Code is built for sm_90 (H100/H200).

GPU targets exist only under --config=cuda: in the default configuration they
are incompatible and `bazel build //...` skips them, so the default build needs
no CUDA.
"""

load("@cuda//:defs.bzl", "CUDA_ROOT")

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "-Xcompiler -fPIC",
    "-gencode arch=compute_90,code=sm_90",
    "--expt-relaxed-constexpr",
]

def cuda_only():
    """target_compatible_with for targets that exist only under --config=cuda."""
    return select({
        "//third_party/cuda:enabled": [],
        "//conditions:default": ["@platforms//:incompatible"],
    })

def if_cuda(if_true, if_false = []):
    return select({
        "//third_party/cuda:enabled": if_true,
        "//conditions:default": if_false,
    })

def strata_cuda_library(name, srcs, hdrs = [], deps = [], copts = [], **kwargs):
    objs = []
    for src in srcs:
        if not src.endswith(".cu"):
            fail("strata_cuda_library %s: %s is not a .cu file" % (name, src))
        obj = "_nvcc_%s/%s.o" % (name, src[:-3])
        native.genrule(
            name = "_nvcc_%s_%s" % (name, src[:-3].replace("/", "_")),
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = "%s/bin/nvcc -c %s %s -I. -I$(GENDIR) $(location %s) -o $@" % (
                CUDA_ROOT,
                " ".join(NVCC_FLAGS),
                " ".join(copts),
                src,
            ),
            target_compatible_with = cuda_only(),
            visibility = ["//visibility:private"],
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@cuda//:cudart"],
        target_compatible_with = cuda_only(),
        **kwargs
    )
