"""The per-tenant registration index: one JSON file per tenant in a directory.

Expected flow: the CLI and the daemon share a directory (kfold's state dir, or a volume). Readers
read a tenant's file; writers take an exclusive ``flock`` on ``.lock``, read, change, write to a
temporary file in the same directory, fsync and ``os.replace`` it over the old one.

Guarantees:
- A reader sees either the old or the new file, never a torn one (atomic rename).
- Two writers never lose each other's change (the lock spans read-modify-write).
- A tenant's records are read only from that tenant's own file, and their ``tenant`` field is
  forced to the file's tenant: a hand-edited row cannot claim another owner.
- An absent file is an empty index; an unparseable one is ``RegistryCorrupt`` (an outage must not
  look like a tenant with no clusters).
Caveats: ``flock`` is advisory and local to one host; do not share the directory over NFS.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from pydantic import ValidationError

from kfold.registry.errors import RegistryCorrupt
from kfold.registry.records import Registration, check_name

Records = tuple[Registration, ...]


def atomic_write(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` via a temporary sibling, fsync and rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class RegistrationIndex:
    """Registrations per tenant under ``directory`` (created 0700 on first use)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._dir = Path(directory)

    def __repr__(self) -> str:
        return f"RegistrationIndex({str(self._dir)!r})"

    def tenants(self) -> tuple[str, ...]:
        """Every tenant with an index file, sorted."""
        if not self._dir.is_dir():
            return ()
        return tuple(sorted(p.stem for p in self._dir.glob("*.json")))

    def read(self, tenant: str) -> Records:
        """The tenant's records, in registration order."""
        path = self._path(tenant)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return ()
        return self._parse(tenant, raw)

    def update(self, tenant: str, change: Callable[[Records], Records]) -> Records:
        """Apply ``change`` to the tenant's records under the lock; returns the records written."""
        with self._locked():
            new = change(self.read(tenant))
            body = json.dumps([r.model_dump(mode="json") for r in new], indent=1, sort_keys=True)
            atomic_write(self._path(tenant), body.encode())
            return new

    def _path(self, tenant: str) -> Path:
        return self._dir / f"{check_name(tenant, 'tenant')}.json"

    def _parse(self, tenant: str, raw: bytes) -> Records:
        try:
            rows = json.loads(raw)
            return tuple(Registration.model_validate({**row, "tenant": tenant}) for row in rows)
        except (ValueError, TypeError, ValidationError) as e:
            raise RegistryCorrupt(f"cluster index for tenant {tenant} is corrupt: {e}") from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(self._dir / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
