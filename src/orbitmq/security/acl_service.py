"""AclService: one server's accounts files, kept loaded, watched, enforced and edited.

Files. The main file (``aclFile``; a broker's default is ``<storePathRootDir>/conf/
plain_acl.yml``) comes first, then every ``*.yml`` / ``*.yaml`` under the ``acl/`` directory
beside it, recursively, in path order; an access key belongs to the first file that defines
it. A missing main file is created empty (mode 0600: it holds secrets), as RocketMQ does.

Reload. Every ``watch_interval_s`` (1 s) the service compares the files' paths, sizes,
modification times and inodes with what it loaded; on a change it waits for the files to hold
still for a moment (an editor's truncate-then-write) and reloads them all, so an edit applies
within about two seconds (RocketMQ: 5 s). A file that no longer parses keeps its previous
accounts, with an error in the log; at start-up a bad file stops the server instead.

Guard. :meth:`AclService.guard` wraps a handler table: each request is checked
(``AclTable.check_broker`` or ``check_namesrv``) before its handler runs, and a refusal
answers SYSTEM_ERROR (1) with remark ``org.apache.rocketmq.acl.common.AclException: <why>``,
RocketMQ's ACL 1.0 answer. Oneway requests get no answer, as the transport never answers
them. The gRPC proxy asks :meth:`AclService.check_grpc` per call instead (role ``proxy``).
Refusals are logged once per peer and reason per minute, so a misconfigured client does not
flood the log.

Edits. The ACL admin requests rewrite the file that owns the account (or the main file),
atomically, bump its ``dataVersion``, and reload at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Literal

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
from orbitmq.acl.grpc_auth import GrpcCredentials
from orbitmq.acl.validator import AclTable, GrpcRefusal
from orbitmq.errors import ConfigError
from orbitmq.protocol.acl_commands import AclAccountView, AclConfigBody
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.transport.server import Handler, RequestContext

__all__ = ["ACL_EXCEPTION", "AclRole", "AclService", "acl_file_set"]

logger = logging.getLogger(__name__)

ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
"""Prefix of every refusal remark, as a RocketMQ broker writes it."""

AclRole = Literal["broker", "namesrv", "proxy"]

WATCH_INTERVAL_S = 1.0
_SETTLE_S = 0.1
_REFUSAL_LOG_INTERVAL_S = 60.0
_EMPTY_FILE = "# OrbitMQ accounts, RocketMQ's plain_acl.yml format (see docs/security.md).\naccounts: []\n"

_Fingerprint = tuple[tuple[str, int, int, int], ...]


def acl_file_set(main: Path) -> list[Path]:
    """The accounts files of ``main``: itself, then ``acl/**/*.yml|yaml`` beside it, sorted."""
    directory = main.parent / "acl"
    extra: list[Path] = []
    if directory.is_dir():
        extra = sorted(
            path
            for path in directory.rglob("*")
            if path.suffix in (".yml", ".yaml") and path.is_file() and path != main
        )
    return [main, *extra]


def _fingerprint(paths: Iterable[Path]) -> _Fingerprint:
    entries = []
    for path in paths:
        try:
            status = path.stat()
        except OSError:
            continue
        entries.append((str(path), status.st_mtime_ns, status.st_size, status.st_ino))
    return tuple(entries)


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` atomically; the new file keeps the old mode (0600 when new)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    temporary = path.with_name(f".{path.name}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class _RefusalLog:
    """Logs a refusal once per (peer, reason) per minute, counting the ones it skips."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], tuple[float, int]] = {}

    def note(self, peer: str, code: int | str, reason: str) -> None:
        now = time.monotonic()
        key = (peer, reason)
        last, skipped = self._last.get(key, (-_REFUSAL_LOG_INTERVAL_S, 0))
        if now - last < _REFUSAL_LOG_INTERVAL_S:
            self._last[key] = (last, skipped + 1)
            return
        if len(self._last) > 10_000:
            self._last.clear()
        self._last[key] = (now, 0)
        more = f" ({skipped} more like it in the last minute)" if skipped else ""
        what = f"request code {code}" if isinstance(code, int) else code
        logger.warning("refused %s from %s: %s%s", what, peer, reason, more)


async def _answer(response: RemotingCommand) -> RemotingCommand:
    return response


class AclService:
    """The accounts of one server process (see the module docstring).

    Args:
        acl_file: the main accounts file.
        role: ``broker`` checks every request; ``namesrv`` only registration and other
            broker-only writes.
        inner_accounts: accounts known only in memory (a standalone broker's key for its
            embedded name server).
        watch_interval_s: how often the files are compared with what was loaded.
        clock_ms: wall clock for ``dataVersion`` timestamps.
    """

    def __init__(
        self,
        acl_file: Path,
        role: AclRole,
        *,
        inner_accounts: Iterable[Account] = (),
        watch_interval_s: float = WATCH_INTERVAL_S,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.acl_file = acl_file
        self.role = role
        self._inner = tuple(inner_accounts)
        self._watch_interval_s = watch_interval_s
        self._clock_ms = clock_ms
        self._table = AclTable([], self._inner)
        self._documents: dict[str, AclDocument] = {}
        self._fingerprint: _Fingerprint = ()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._refusals = _RefusalLog()

    @property
    def table(self) -> AclTable:
        return self._table

    # -- loading ---------------------------------------------------------------------------

    def load(self) -> None:
        """Read every file (creating an empty main file if there is none).

        Raises:
            ConfigError: a file cannot be read or parsed; the server must not start.
        """
        if not self.acl_file.exists():
            _write_private(self.acl_file, _EMPTY_FILE)
            logger.warning("created the empty accounts file %s", self.acl_file)
        paths = acl_file_set(self.acl_file)
        fingerprint = _fingerprint(paths)
        documents: dict[str, AclDocument] = {}
        for path in paths:
            documents[str(path)] = self._read(path)
        self._install(documents, fingerprint)

    def _read(self, path: Path) -> AclDocument:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read accounts file {path}: {exc}") from None
        return parse_document(text, str(path))

    def _install(self, documents: dict[str, AclDocument], fingerprint: _Fingerprint) -> None:
        previous = set(self._table.warnings)
        table = AclTable(list(documents.items()), self._inner)
        for warning in table.warnings:
            if warning not in previous:
                logger.warning("%s", warning)
        self._documents = documents
        self._fingerprint = fingerprint
        self._table = table
        logger.info(
            "ACL (%s): %d account(s), %d global white-list pattern(s) from %d file(s)",
            self.role,
            len(table) - len(self._inner),
            len(table.global_white),
            len(documents),
        )
        if len(table) == len(self._inner) and not table.global_white:
            logger.warning(
                "ACL is on and %s defines no account: every request that needs a signature is refused",
                self.acl_file,
            )

    async def reload_if_changed(self) -> bool:
        """Reload when the files changed since the last load; True if it reloaded."""
        # One trip to a worker thread per look: listing and stating the files together.
        paths, fingerprint = await asyncio.to_thread(self._look)
        if fingerprint == self._fingerprint:
            return False
        # Let an editor finish: reload only once the files hold still for a moment.
        await asyncio.sleep(_SETTLE_S)
        if await asyncio.to_thread(_fingerprint, paths) != fingerprint:
            return False
        async with self._lock:
            await self._reload(paths, fingerprint)
        return True

    def _look(self) -> tuple[list[Path], _Fingerprint]:
        paths = acl_file_set(self.acl_file)
        return paths, _fingerprint(paths)

    async def _reload(self, paths: list[Path], fingerprint: _Fingerprint) -> None:
        documents: dict[str, AclDocument] = {}
        for path in paths:
            try:
                documents[str(path)] = await asyncio.to_thread(self._read, path)
            except ConfigError as exc:
                kept = self._documents.get(str(path))
                logger.error("%s; %s", exc, "keeping its previous accounts" if kept else "file ignored")
                if kept is not None:
                    documents[str(path)] = kept
        self._install(documents, fingerprint)

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch(), name=f"acl-watch-{self.role}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._watch_interval_s)
            try:
                await self.reload_if_changed()
            except Exception:
                logger.exception("checking the accounts files for changes failed")

    # -- the check ---------------------------------------------------------------------------

    def check(self, request: RemotingCommand, peer_host: str) -> str | None:
        """None when the request may be served, else RocketMQ's reason for refusing it."""
        return self._table_check(request, peer_host)

    def guard(self, handlers: Mapping[int, Handler]) -> dict[int, Handler]:
        """The same table with every handler behind the ACL check."""
        return {code: self._guarded(handler) for code, handler in handlers.items()}

    def _guarded(self, handler: Handler) -> Handler:
        check = self._table_check

        def guarded(ctx: RequestContext, request: RemotingCommand) -> Awaitable[RemotingCommand | None]:
            refusal = check(request, ctx.peer_host)
            if refusal is None:
                # The handler's own coroutine, not one awaiting it: no extra frame per request.
                return handler(ctx, request)
            self._refusals.note(ctx.peer_host, request.code, refusal)
            return _answer(request.response(ResponseCode.SYSTEM_ERROR, f"{ACL_EXCEPTION}: {refusal}"))

        return guarded

    def check_grpc(
        self, rpc: str, credentials: GrpcCredentials, peer_host: str, needed: Mapping[str, int]
    ) -> GrpcRefusal | None:
        """The gRPC proxy's check of one call (``rpc`` names it in the log); refusals are logged."""
        refusal = self._table.check_grpc(credentials, peer_host, needed)
        if refusal is not None:
            self._refusals.note(peer_host, f"gRPC {rpc}", refusal.reason)
        return refusal

    def _table_check(self, request: RemotingCommand, peer_host: str) -> str | None:
        table = self._table
        if self.role == "broker":
            return table.check_broker(request, peer_host)
        return table.check_namesrv(request, peer_host)

    # -- admin edits ---------------------------------------------------------------------------

    async def update_account(self, update: AccountUpdate) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG.

        Raises:
            ConfigError: the update is invalid or the file cannot be written.
        """
        async with self._lock:
            path = Path(self._table.source_of(update.access_key) or self.acl_file)
            document = await asyncio.to_thread(self._read, path)
            await self._write(path, upsert_account(document, update, self._clock_ms()))

    async def delete_account(self, access_key: str) -> bool:
        """DELETE_ACL_CONFIG; False when no file defines ``access_key``."""
        async with self._lock:
            source = self._table.source_of(access_key)
            if source is None:
                return False
            document = await asyncio.to_thread(self._read, Path(source))
            edited = remove_account(document, access_key, self._clock_ms())
            if edited is None:
                return False
            await self._write(Path(source), edited)
            return True

    async def update_global_white(self, patterns: Iterable[str], file: str | None) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, on ``file`` (one of the accounts files) or the main one.

        Raises:
            ConfigError: a pattern does not parse, or ``file`` is not one of the accounts files.
        """
        async with self._lock:
            path = Path(file) if file else self.acl_file
            if str(path) not in self._documents:
                raise ConfigError(f"{file} is not one of this server's accounts files")
            document = await asyncio.to_thread(self._read, path)
            await self._write(path, replace_global_white(document, patterns, self._clock_ms()))

    async def _write(self, path: Path, document: AclDocument) -> None:
        try:
            await asyncio.to_thread(_write_private, path, dump_document(document))
        except OSError as exc:
            raise ConfigError(f"cannot write accounts file {path}: {exc}") from None
        logger.info("accounts file %s rewritten (dataVersion %s)", path, document.data_version)
        await self._reload(*await asyncio.to_thread(self._look))

    # -- views -----------------------------------------------------------------------------

    def data_versions(self) -> tuple[DataVersion, dict[str, DataVersion]]:
        """The main file's version and every file's (GET_BROKER_CLUSTER_ACL_INFO)."""
        versions = {
            path: document.data_version or DataVersion() for path, document in self._documents.items()
        }
        return versions.get(str(self.acl_file), DataVersion()), versions

    def config_view(self) -> AclConfigBody:
        """Every account (first definition of each key) and white-list pattern, without secrets."""
        white: list[str] = []
        accounts: dict[str, AclAccountView] = {}
        for document in self._documents.values():
            white.extend(document.global_white_remote_addresses)
            for account in document.accounts:
                accounts.setdefault(
                    account.access_key,
                    AclAccountView(
                        access_key=account.access_key,
                        white_remote_address=account.white_remote_address,
                        admin=account.admin,
                        default_topic_perm=account.default_topic_perm,
                        default_group_perm=account.default_group_perm,
                        topic_perms=account.topic_perms,
                        group_perms=account.group_perms,
                    ),
                )
        return AclConfigBody(tuple(white), tuple(accounts.values()))
