"""Fake backend plugins for testing the suite: the reference NumPy code, correct or altered."""

PLUGIN_TEMPLATE = """
import pypto
from pypto.backend_api import PLUGIN_API_VERSION, Artifact, Availability, Backend, BackendSpec, Capabilities, Source

PYPTO_PLUGIN_API = PLUGIN_API_VERSION
NAME = {name!r}


class Fake(Backend):
    spec = BackendSpec(
        NAME, "0.1", PLUGIN_API_VERSION, priority=-10,
        capabilities={capabilities},
        probe=lambda: {probe},
    )

    def render(self, program):
        from pypto.backends.numpy_source import render_numpy
        return Source({codegen})

    def build(self, program, source):
        return Artifact(NAME, source.text.encode(), ".py")

    def load(self, program, artifact):
        from pypto.backends.numpy_support import NAMESPACE
        namespace = dict(NAMESPACE)
        exec(artifact.data.decode(), namespace)
        fn = namespace[program.reference_ir.name]
{launch}


@pypto.hookimpl
def pypto_backends():
    return [Fake()]
"""

# the reference backend's NumPy code with every addition turned into a subtraction: a - b for a + b
BROKEN_CODEGEN = 'render_numpy(program.reference_ir).replace("_np.add", "_np.subtract")'
CORRECT_CODEGEN = "render_numpy(program.reference_ir)"
PLAIN_LAUNCH = "        return fn"
SKIPPING_LAUNCH = """        def launcher(*args):
            import pytest
            pytest.skip("this backend would rather not")
        return launcher"""


def plugin_source(
    name: str,
    *,
    codegen: str = CORRECT_CODEGEN,
    capabilities: str = "Capabilities()",
    probe: str = "Availability(True)",
    launch: str = PLAIN_LAUNCH,
) -> str:
    """The source of a backend plugin module that runs the reference NumPy code (possibly altered)."""
    return PLUGIN_TEMPLATE.format(name=name, codegen=codegen, capabilities=capabilities, probe=probe, launch=launch)
