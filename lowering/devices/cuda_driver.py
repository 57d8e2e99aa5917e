"""The CUDA driver API (`libcuda.so.1`) through ctypes: what the nvptx device needs to load PTX, hold
buffers and launch a kernel, with no CuPy, no toolkit and no numpy.

The driver is the library every CUDA program ends in, installed with the GPU's kernel module. Talking
to it directly costs its own start (`cuInit`, the primary context) and nothing else: a worker that
imports this module and the standard library is ready in the time CUDA itself takes. Every call is
checked; a failure is a `CudaError` named as the driver names it (`CUDA_ERROR_ILLEGAL_ADDRESS: an
illegal memory access was encountered`). A library that cannot be loaded is `DriverMissing`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from ctypes import POINTER, byref, c_char_p, c_float, c_int, c_size_t, c_uint, c_uint64, c_void_p
from dataclasses import dataclass

LIBRARY = "libcuda.so.1"
SUCCESS = 0
ERROR_NOT_FOUND = 500
ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 91
HOST_REGISTER_DEVICE_MAP = 0x02
JIT_ERROR_LOG_BUFFER = 5
JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
JIT_LOG_BYTES = 1 << 14

# Each entry point this module calls and its parameters (every one returns a CUresult, an int). The
# `_v2` names are those `cuda.h` maps the plain names to on 64-bit hosts.
_SIGNATURES: dict[str, tuple] = {
    "cuInit": (c_uint,),
    "cuDeviceGetCount": (POINTER(c_int),),
    "cuDeviceGet": (POINTER(c_int), c_int),
    "cuDeviceGetAttribute": (POINTER(c_int), c_int, c_int),
    "cuDevicePrimaryCtxRetain": (POINTER(c_void_p), c_int),
    "cuCtxSetCurrent": (c_void_p,),
    "cuCtxSynchronize": (),
    "cuModuleLoadDataEx": (POINTER(c_void_p), c_char_p, c_uint, POINTER(c_int), POINTER(c_void_p)),
    "cuModuleGetFunction": (POINTER(c_void_p), c_void_p, c_char_p),
    "cuModuleGetGlobal_v2": (POINTER(c_uint64), POINTER(c_size_t), c_void_p, c_char_p),
    "cuMemAlloc_v2": (POINTER(c_uint64), c_size_t),
    "cuMemsetD8_v2": (c_uint64, ctypes.c_ubyte, c_size_t),
    "cuMemcpyHtoD_v2": (c_uint64, c_void_p, c_size_t),
    "cuMemcpyDtoH_v2": (c_void_p, c_uint64, c_size_t),
    "cuMemHostRegister_v2": (c_void_p, c_size_t, c_uint),
    "cuLaunchKernel": (
        c_void_p,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_void_p,
        POINTER(c_void_p),
        POINTER(c_void_p),
    ),
    "cuEventCreate": (POINTER(c_void_p), c_uint),
    "cuEventRecord": (c_void_p, c_void_p),
    "cuEventSynchronize": (c_void_p,),
    "cuEventElapsedTime": (POINTER(c_float), c_void_p, c_void_p),
    "cuGetErrorName": (c_int, POINTER(c_char_p)),
    "cuGetErrorString": (c_int, POINTER(c_char_p)),
}


class DriverMissing(ImportError):
    """The CUDA driver library cannot be loaded (no NVIDIA driver on this machine)."""


class CudaError(RuntimeError):
    """A driver call that failed: `code` is its CUresult, the text the driver's name and description."""

    def __init__(self, call: str, code: int, name: str, description: str) -> None:
        super().__init__(f"{name}: {description}")
        self.call = call
        self.code = code


@dataclass(frozen=True, slots=True)
class Kernel:
    """A kernel function of a loaded module."""

    handle: int


class CudaDriver:
    """The driver API of `library` (a loaded `libcuda`), each call checked (`CudaError`)."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._library = library

    @classmethod
    def load(cls, name: str | None = None) -> CudaDriver:
        """The driver library `name` (LIBRARY by default), its entry points declared; DriverMissing when it
        cannot be loaded."""
        name = name or LIBRARY
        try:
            library = ctypes.CDLL(name)
            for function, parameters in _SIGNATURES.items():
                entry = getattr(library, function)
                entry.argtypes, entry.restype = parameters, c_int
        except (OSError, AttributeError) as failure:
            raise DriverMissing(f"the CUDA driver ({name}) cannot be loaded: {failure}") from None
        return cls(library)

    def _call(self, function: str, *arguments: object) -> None:
        code = getattr(self._library, function)(*arguments)
        if code != SUCCESS:
            raise self.error(function, code)

    def error(self, call: str, code: int) -> CudaError:
        """The CudaError of `code`, named as the driver names it (its number when it has no name)."""
        name, description = c_char_p(), c_char_p()
        if self._library.cuGetErrorName(code, byref(name)) != SUCCESS or name.value is None:
            return CudaError(call, code, f"CUDA error {code}", f"{call} failed")
        self._library.cuGetErrorString(code, byref(description))
        return CudaError(call, code, name.value.decode(), (description.value or b"").decode())

    def initialise(self) -> None:
        self._call("cuInit", 0)

    def device_count(self) -> int:
        count = c_int()
        self._call("cuDeviceGetCount", byref(count))
        return count.value

    def device(self, ordinal: int = 0) -> int:
        device = c_int()
        self._call("cuDeviceGet", byref(device), ordinal)
        return device.value

    def attribute(self, attribute: int, device: int) -> int:
        value = c_int()
        self._call("cuDeviceGetAttribute", byref(value), attribute, device)
        return value.value

    def use_primary_context(self, device: int) -> None:
        """Retain `device`'s primary context (the one the runtime API shares) and make it current."""
        context = c_void_p()
        self._call("cuDevicePrimaryCtxRetain", byref(context), device)
        self._call("cuCtxSetCurrent", context)

    def load_module(self, ptx: str) -> int:
        """Load (JIT-compile) `ptx` into the current context; the module. A failure's message ends with
        the JIT's log."""
        module, log = c_void_p(), ctypes.create_string_buffer(JIT_LOG_BYTES)
        options = (c_int * 2)(JIT_ERROR_LOG_BUFFER, JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        values = (c_void_p * 2)(ctypes.addressof(log), JIT_LOG_BYTES)
        code = self._library.cuModuleLoadDataEx(byref(module), ptx.encode(), 2, options, values)
        if code != SUCCESS:
            failure = self.error("cuModuleLoadDataEx", code)
            detail = log.value.decode("utf-8", "replace").strip()
            if detail:
                failure.args = (f"{failure}: {detail}",)
            raise failure
        return module.value or 0

    def kernel(self, module: int, name: str) -> Kernel:
        function = c_void_p()
        self._call("cuModuleGetFunction", byref(function), module, name.encode())
        return Kernel(function.value or 0)

    def global_address(self, module: int, name: str) -> tuple[int, int] | None:
        """The device address and size of the module's global `name`; None when it has none."""
        address, size = c_uint64(), c_size_t()
        code = self._library.cuModuleGetGlobal_v2(byref(address), byref(size), module, name.encode())
        if code == ERROR_NOT_FOUND:
            return None
        if code != SUCCESS:
            raise self.error("cuModuleGetGlobal_v2", code)
        return address.value, size.value

    def allocate(self, size: int) -> int:
        """`size` bytes of device memory (at least one), zeroed; their address."""
        address = c_uint64()
        self._call("cuMemAlloc_v2", byref(address), max(size, 1))
        self._call("cuMemsetD8_v2", address, 0, max(size, 1))
        return address.value

    def copy_to_device(self, device: int, host: int, size: int) -> None:
        self._call("cuMemcpyHtoD_v2", device, host, size)

    def copy_to_host(self, host: int, device: int, size: int) -> None:
        self._call("cuMemcpyDtoH_v2", host, device, size)

    def register_host(self, address: int, size: int) -> None:
        """Pin `size` bytes at `address` (whole pages) and map them into the device's address space."""
        self._call("cuMemHostRegister_v2", address, size, HOST_REGISTER_DEVICE_MAP)

    def event(self) -> int:
        event = c_void_p()
        self._call("cuEventCreate", byref(event), 0)
        return event.value or 0

    def record(self, event: int) -> None:
        self._call("cuEventRecord", event, None)

    def wait(self, event: int) -> None:
        self._call("cuEventSynchronize", event)

    def elapsed_seconds(self, start: int, end: int) -> float:
        milliseconds = c_float()
        self._call("cuEventElapsedTime", byref(milliseconds), start, end)
        return milliseconds.value / 1000

    def synchronize(self) -> None:
        self._call("cuCtxSynchronize")

    def launch(
        self, kernel: Kernel, blocks: int, threads: int, arguments: Sequence[ctypes._SimpleCData]
    ) -> None:
        """Queue `kernel` on `blocks` blocks of `threads` threads, on the default stream."""
        pointers = (c_void_p * max(len(arguments), 1))(*(ctypes.addressof(value) for value in arguments))
        self._call("cuLaunchKernel", kernel.handle, blocks, 1, 1, threads, 1, 1, 0, None, pointers, None)


def gpu_count(name: str | None = None) -> tuple[int, str]:
    """How many CUDA GPUs the driver sees from this process, and why there are none when there are none.
    Initialises CUDA here: for tests and tools, not for the command, which leaves CUDA to its worker."""
    try:
        driver = CudaDriver.load(name)
        driver.initialise()
        count = driver.device_count()
    except DriverMissing as missing:
        return 0, str(missing)
    except CudaError as failure:
        return 0, f"CUDA reports no usable GPU ({failure})"
    return count, "" if count else "CUDA reports no GPU"
