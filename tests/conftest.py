import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The tests expect the default device layout (two 16 GiB cores, asynchronous launches); the
# ones about these settings start subprocesses with their own values.
for _var in ("NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "LOCAL_RANK",
             "NEURON_RT_DEVICE_MEMORY", "NEURON_LAUNCH_BLOCKING",
             "TORCH_NEURONX_DISABLE_CPU_FALLBACK"):
    os.environ.pop(_var, None)

import torch  # noqa: E402  (autoloads torch_neuronx through the torch.backends entry point)
import torch_neuronx  # noqa: E402,F401  (imported explicitly too, as users may)


def run_python(code, env=None, timeout=120):
    """Runs `code` as a script in a fresh interpreter (for settings read once at start-up, and
    so that spawned children can import its functions); returns the CompletedProcess. The
    child inherits this environment plus `env`."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "script.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(code))
        return subprocess.run([sys.executable, script], env=full_env, capture_output=True,
                              text=True, timeout=timeout)


@pytest.fixture
def quiet_fallback():
    """Silences the once-per-op fallback warnings for tests that are not about them."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*has no native neuron kernel.*")
        yield


@pytest.fixture(autouse=True)
def _synchronized():
    yield
    torch.neuron.synchronize()
