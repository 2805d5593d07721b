"""``orbitmq dashboard``: a web app to watch and operate an OrbitMQ (or RocketMQ) cluster.

Like ``cli/``, it sits on top of OrbitMQ's client: every figure comes from admin requests to
the name servers and brokers (``data.py``, ``messages.py``), pages are rendered on the
server (``templates/``), and the one script draws charts with a vendored uPlot
(``static/vendor``), so nothing is built at install time. ``app.create_app`` is the ASGI app;
``__main__`` serves it with uvicorn.
"""

from orbitmq.dashboard.app import DashboardConfig, create_app

__all__ = ["DashboardConfig", "create_app"]
