"""Access control, RocketMQ's ACL 1.0: accounts, address patterns, permissions, signatures.

Pure: no I/O, no asyncio. The files are read and watched by the server shells
(``orbitmq.security``); clients sign with :func:`sign_request`.

========================  ==================================================================
module                    owns
========================  ==================================================================
``permission``            the DENY/PUB/SUB words and bits, and the comparison rule
``address``               white-list address patterns
``accounts``              the ``plain_acl.yml`` model, parser, writer and admin edits
``resources``             which resources a request touches, admin request codes
``signature``             the AK/SK HMAC signature of remoting requests
``grpc_auth``             the ``authorization`` header and signature of 5.x gRPC calls
``validator``             :class:`AclTable`, the check itself
========================  ==================================================================
"""

from orbitmq.acl.accounts import (
    Account,
    AccountUpdate,
    AclDocument,
    DataVersion,
    dump_document,
    parse_document,
    remove_account,
    replace_global_white,
    upsert_account,
)
from orbitmq.acl.address import AddressPattern, parse_address_pattern
from orbitmq.acl.resources import ADMIN_CODES, NAMESRV_ADMIN_CODES, required_resources
from orbitmq.acl.signature import Credentials, compute_signature, sign_request, signature_content
from orbitmq.acl.validator import AclTable

__all__ = [
    "ADMIN_CODES",
    "NAMESRV_ADMIN_CODES",
    "Account",
    "AccountUpdate",
    "AclDocument",
    "AclTable",
    "AddressPattern",
    "Credentials",
    "DataVersion",
    "compute_signature",
    "dump_document",
    "parse_address_pattern",
    "parse_document",
    "remove_account",
    "replace_global_white",
    "required_resources",
    "sign_request",
    "signature_content",
    "upsert_account",
]
