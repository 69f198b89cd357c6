"""The quick demo: run the two introductory kernels and the attention block of the array API on the default executor,
and check them against NumPy."""

import attention
import fused_softmax
import vector_add

import pypto as pt

if __name__ == "__main__":
    info = pt.get_runtime_info()
    print(f"pypto {info['pypto']}, executor: {info['default_executor']}  (installed: {', '.join(pt.list_backends())})")
    ok = vector_add.main() == 0.0
    ok &= fused_softmax.main() < 1e-6
    ok &= attention.main() < 1e-4
    print("agree with NumPy:", "yes" if ok else "NO")
    raise SystemExit(0 if ok else 1)
