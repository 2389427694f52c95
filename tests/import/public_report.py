"""What public_traces.py's parts share: the figures' tolerance, device numbers, the runtime calls
that launch kernels, and the list of failures every check adds to."""

TOLERANCE = 0.001
# c10::DeviceType numbers of devices with memory of their own (c10/core/DeviceType.h): CUDA 1,
# OPENGL 3, OPENCL 4, HIP 6, FPGA 7, MAIA 8, XLA 9, Vulkan 10, Metal 11, XPU 12, MPS 13, HPU 15,
# VE 16, IPU 18, MTIA 19, PrivateUse1 20. Other types (CPU 0, MKLDNN 2, IDEEP 5, Meta 14, Lazy 17,
# numbers c10 does not define) are the host's memory.
ACCELERATORS = {1, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 15, 16, 18, 19, 20}
HOST = -1
failures = []


def imported_copies(conn):
    """The imported trace's copies per (device, kind): [count, bytes]."""
    return {(d, k): [n, b] for d, k, n, b in conn.execute(
        "SELECT device, kind, COUNT(*), SUM(bytes) FROM copies GROUP BY device, kind")}


def fail(name, what):
    failures.append(f"{name}: {what}")
    print(f"  FAIL {what}")


def close(a, b):
    return abs(a - b) <= TOLERANCE * max(abs(b), 1)


def rel(a, b):
    return 0.0 if a == b else abs(a - b) / max(abs(b), 1)


# Runtime and driver calls that launch kernels or a CUDA graph, and those that begin and end a
# stream capture (docs/import.md, Kineto: "kernel launches without their kernels"), by name prefix.
LAUNCH_PREFIXES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchCooperativeKernel", "cuLaunchCooperativeKernel",
                   "cudaGraphLaunch", "cuGraphLaunch", "hipLaunchKernel", "hipModuleLaunchKernel",
                   "hipExtModuleLaunchKernel", "hipExtLaunchKernel", "hipLaunchCooperativeKernel",
                   "hipModuleLaunchCooperativeKernel", "hipGraphLaunch")
CAPTURE_BEGIN = ("cudaStreamBeginCapture", "cuStreamBeginCapture", "hipStreamBeginCapture")
CAPTURE_END = ("cudaStreamEndCapture", "cuStreamEndCapture", "hipStreamEndCapture")
CALL_CATEGORIES = ("cuda_runtime", "cuda_driver", "Runtime", "Driver", "xpu_runtime", "xpu_driver",
                   "privateuse1_runtime", "privateuse1_driver")
