"""Random-number state of the neuron device generators (Philox seed + offset)."""

from .. import _C


def _generator(device=None):
    from . import _index, _lazy_init

    _lazy_init()
    return _C._default_generator(_index(device))


def _all():
    from . import device_count

    return [_C._default_generator(i) for i in range(device_count())]


def _usable():
    # In a forked child the device cannot be used; seeding it (as DataLoader workers do through
    # torch.manual_seed) must not fail.
    return not _C._is_in_bad_fork()


def get_rng_state(device="neuron"):
    return _generator(device).get_state()


def get_rng_state_all():
    return [g.get_state() for g in _all()]


def set_rng_state(new_state, device="neuron"):
    _generator(device).set_state(new_state.cpu() if new_state.device.type != "cpu" else new_state)


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed):
    """Seeds the current device's generator."""
    if _usable():
        _generator().manual_seed(int(seed))


def manual_seed_all(seed):
    """Seeds every device's generator."""
    if _usable():
        for g in _all():
            g.manual_seed(int(seed))


def seed():
    """Seeds the current device's generator with a non-deterministic number."""
    if _usable():
        _generator().seed()


def seed_all():
    if _usable():
        s = _generator().seed()
        for g in _all():
            g.manual_seed(s)


def initial_seed():
    return _generator().initial_seed()




def __getattr__(name):
    if name == "default_generators":
        return tuple(_all())
    raise AttributeError(name)


