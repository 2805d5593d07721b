"""``python -m orbitmq.bench peers``: OrbitMQ beside Apache RocketMQ, Apache Kafka and Redis,
same workloads, one invocation (see :mod:`orbitmq.bench.peers._command`).

The Java peers' artifacts are pinned in ``pom.xml`` beside this module (shipped as package
data, so an installed OrbitMQ runs the same versions as a checkout) and resolved by Maven on
first use into the repository's git-ignored ``.cache/m2``.
"""

from orbitmq.bench.peers._command import add_arguments, run

__all__ = ["add_arguments", "run"]
