"""OrbitMQ: Apache RocketMQ's architecture in Python, wire-compatible with RocketMQ clients."""

__version__ = "0.1.0"

__all__ = ["__version__"]
