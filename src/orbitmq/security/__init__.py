"""The servers' side of access control: accounts files on disk, their reload, the request guard.

``orbitmq.acl`` decides (pure); this package does the I/O around it for the broker and the
name server: it finds and reads the accounts files, watches them, wraps a handler table so
every request is checked before its handler runs, applies the ACL admin requests to the files,
and warns at start when a server is reachable beyond loopback without ACL.

=================  =========================================================================
module             owns
=================  =========================================================================
``acl_service``    :class:`AclService`: load, watch (reload within ~1 s), guard, admin edits
``exposure``       the start-up warnings for ports open to the network without a check
=================  =========================================================================
"""

from orbitmq.security.acl_service import ACL_EXCEPTION, AclRole, AclService, acl_file_set
from orbitmq.security.exposure import (
    exposure_warning,
    grpc_exposure_warning,
    ha_exposure_warning,
    is_loopback_bind,
    warn_if_exposed,
)

__all__ = [
    "ACL_EXCEPTION",
    "AclRole",
    "AclService",
    "acl_file_set",
    "exposure_warning",
    "grpc_exposure_warning",
    "ha_exposure_warning",
    "is_loopback_bind",
    "warn_if_exposed",
]
