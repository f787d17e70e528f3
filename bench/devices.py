"""Splits the host CPU into N logical devices, so MirroredStrategy stands in for N TPU cores.

Must run before TensorFlow initialises its devices (before any op), as tests/conftest.py does.
"""

from __future__ import annotations


def split_cpu(replicas: int) -> list[str]:
    """Returns the logical CPU device names after splitting (one device: no split)."""
    import tensorflow as tf

    if replicas > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    names = [d.name for d in tf.config.list_logical_devices("CPU")]
    if len(names) != replicas:
        raise RuntimeError(f"wanted {replicas} logical CPUs, have {names}")
    return names
