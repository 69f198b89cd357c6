"""Support for backends that compile to native shared objects (OpenMP, TBB).

:mod:`.toolchain` finds and probes a host compiler and builds shared objects; :mod:`.pyentry`
renders the C fast-call entry point; :mod:`.loader` loads a built kernel with cffi and exposes both
the validated-arguments launcher and the fast entry.
"""
