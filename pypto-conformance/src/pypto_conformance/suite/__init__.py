"""The conformance suite's tests, collected with ``pytest --pyargs pypto_conformance.suite``.

Parametrisation (which backends, cases, dtypes; what is skipped or expected to fail and why)
comes from the plugin in :mod:`pypto_conformance.plugin`.
"""
