"""Which BLAS library PyTorch's products run on in this process, from /proc/self/maps: the
PyTorch peers of bench_models and bench_layers report it. Debian's PyTorch takes sgemm from
libblas.so.3, which the alternatives (or LD_LIBRARY_PATH) select, even though OpenBLAS itself
is loaded beside it; on the reference BLAS it is 20-40x slower, and a run there printed
ratios 7x too kind to sparq under a header that named OpenBLAS's kernels (review,
2026-12-07)."""

import re
import sys

_KINDS = (("openblas", "OpenBLAS"), ("blis", "BLIS"), ("mkl", "MKL"))


def _kind_of(path):
    for marker, kind in _KINDS:
        if marker in path.lower():
            return kind
    if re.search(r"/blas/libblas\.so", path):
        return "reference"
    return "unknown"


def loaded_blas():
    """(kind, path): kind is OpenBLAS, BLIS, MKL, reference or unknown. The library loaded as
    libblas.so.3 decides (the first one that defines sgemm for PyTorch's libraries); without
    one, any BLAS library loaded, then MKL linked into torch."""
    paths = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                path = fields[5].strip() if len(fields) == 6 else ""
                name = path.rsplit("/", 1)[-1]
                if path.startswith("/") and re.search(r"blas|blis|mkl", name) and path not in paths:
                    paths.append(path)
    except OSError as error:
        return "unknown", "/proc/self/maps_unreadable"
    for path in paths:
        if path.rsplit("/", 1)[-1].startswith("libblas.so"):
            return _kind_of(path), path
    for path in paths:
        if _kind_of(path) != "unknown":
            return _kind_of(path), path
    # PyPI's x86 wheels link MKL into libtorch_cpu itself: no library of its own is loaded.
    torch = sys.modules.get("torch")
    if torch is not None and getattr(getattr(torch.backends, "mkl", None), "is_available",
                                     lambda: False)():
        return "MKL", "linked_into_torch"
    return "unknown", ",".join(paths) if paths else "no_BLAS_library_loaded"
