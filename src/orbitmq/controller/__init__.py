"""The controller of RocketMQ 5's controller mode (RIP-44): who is master of each broker group.

============  ===============================================================================
module        owns
============  ===============================================================================
state         pure: broker groups, master, epoch, SyncStateSet; the commands and the election
              policy (only live SyncStateSet members may become master)
liveness      pure: the last heartbeat of every replica, as one controller node heard it
consensus     the adapter to PySyncObj's Raft log, which replicates ``state`` on three nodes
config        ``controller.conf`` keys
app           the request handlers, the election scan, the standalone process
============  ===============================================================================

A controller runs standalone (``orbitmq controller -c controller.conf``) or inside a name
server (``enableControllerInNamesrv=true``); three of them make a quorum. Brokers with
``enableControllerMode=true`` heartbeat to every controller and follow the leader's answer.
"""

from orbitmq.controller.app import ControllerApp
from orbitmq.controller.config import ControllerConfig, load_controller_config

__all__ = ["ControllerApp", "ControllerConfig", "load_controller_config"]
