"""What a Python call runs a kernel on when trnsim's own options do not say: the simulated hardware from the
kernel's nki.jit(platform_target=...) or NKI's NEURON_PLATFORM_TARGET_OVERRIDE, the LNC from NKI's
NEURON_LOGICAL_NC_CONFIG (docs/nki.md, "Target platform and LNC"). Workloads read neither variable: the
file says its "hardware" and "lnc"."""

import os

# NKI's platform target names (nki.jit: trn1|inf2|gen2, trn2|gen3, trn3|gen4) -> trnsim's hardware config
# (Inf2 has Trn1's NeuronCore generation).
TARGETS = {"trn1": "trn1", "inf2": "trn1", "gen2": "trn1", "trn2": "trn2", "gen3": "trn2", "trn3": "trn3",
           "gen4": "trn3"}
ACCEPTED = "trn1|inf2|gen2, trn2|gen3, trn3|gen4"
TARGET_ENV = "NEURON_PLATFORM_TARGET_OVERRIDE"
LNC_ENV = "NEURON_LOGICAL_NC_CONFIG"


def check_target(value, what):
    """trnsim's hardware config name for NKI platform target `value`; ValueError naming `what` and the
    accepted names otherwise."""
    if not isinstance(value, str) or value not in TARGETS:
        raise ValueError(f"{what}={value!r} is not a platform target NKI accepts ({ACCEPTED})")
    return TARGETS[value]


def env_target():
    """The hardware NEURON_PLATFORM_TARGET_OVERRIDE names, or None when it is unset (or empty)."""
    value = os.environ.get(TARGET_ENV, "")
    return check_target(value, TARGET_ENV) if value else None


def kernel_target(kernel):
    """(the hardware the kernel's platform_target names, as written), or (None, None)."""
    k = getattr(kernel, "__trnsim_kernel__", kernel)
    written = getattr(k, "options", {}).get("platform_target")
    return (TARGETS[written], written) if written is not None else (None, None)


def hardware_for(kernel, hardware):
    """The hardware of a Python call: `hardware` when given (a build checks it against the kernel's
    platform_target), else the kernel's platform_target, else NEURON_PLATFORM_TARGET_OVERRIDE, else trn2. The
    variable naming another generation than the kernel's platform_target is a ValueError naming both."""
    if hardware is not None:
        return hardware
    mine, written = kernel_target(kernel)
    env = env_target()
    if mine is not None and env is not None and env != mine:
        raise ValueError(f"{TARGET_ENV}={os.environ[TARGET_ENV]!r} conflicts with the kernel's "
                         f"nki.jit(platform_target={written!r}), a {mine} NeuronCore: unset the variable or "
                         f"name {mine} in it")
    return mine or env or "trn2"


def env_lnc():
    """The LNC NEURON_LOGICAL_NC_CONFIG sets (1 or 2), or None when it is unset (or empty); ValueError for
    another value."""
    value = os.environ.get(LNC_ENV, "")
    if not value:
        return None
    if value.strip() not in ("1", "2"):
        raise ValueError(f"{LNC_ENV}={value!r}: NKI's LNC degree is 1 or 2 (trnsim runs 1 core or the LNC2 "
                         "pair)")
    return int(value)
