"""A throwaway PostgreSQL cluster for tests and benchmarks: ``initdb`` + ``pg_ctl`` in a temporary
directory, listening on a free port on 127.0.0.1 only, removed when stopped.

Used by expediter's own tests and benchmarks, and available to pack authors::

    with PostgresCluster.start() as cluster:
        url = cluster.url("mydb")      # postgresql+psycopg://...@127.0.0.1:PORT/mydb
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PostgresCluster", "PostgresUnavailable", "find_binaries"]


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL server binaries are not installed (install the ``postgresql`` package)."""


def find_binaries() -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or PostgresUnavailable."""
    candidates = []
    if os.environ.get("EXPEDITER_PG_BIN"):
        candidates.append(Path(os.environ["EXPEDITER_PG_BIN"]))
    for name in ("pg_ctl", "initdb"):
        found = shutil.which(name)
        if found:
            candidates.append(Path(found).resolve().parent)
    candidates += [
        Path(path) for path in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    ]
    for directory in candidates:
        if all((directory / tool).exists() for tool in ("initdb", "pg_ctl", "postgres")):
            return directory
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found; install the "
        "postgresql package (Debian: apt-get install postgresql) or set EXPEDITER_PG_BIN"
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresCluster:
    """A running throwaway cluster; ``stop()`` (or leaving the ``with`` block) removes it."""

    def __init__(self, binaries: Path, directory: Path, port: int, user: str) -> None:
        self.binaries = binaries
        self.directory = directory
        self.port = port
        self.user = user

    @classmethod
    @contextlib.contextmanager
    def start(cls, *, settings: dict[str, str] | None = None) -> Iterator[PostgresCluster]:
        """Create, start, yield and finally remove a cluster."""
        cluster = cls.create(settings=settings)
        try:
            yield cluster
        finally:
            cluster.stop()

    @classmethod
    def create(cls, *, settings: dict[str, str] | None = None) -> PostgresCluster:
        """Create and start a cluster (call ``stop()`` when done)."""
        binaries = find_binaries()
        directory = Path(tempfile.mkdtemp(prefix="expediter-pg-"))
        run_as = "postgres" if os.geteuid() == 0 else None  # initdb refuses to run as root
        if run_as is not None:
            shutil.chown(directory, user=run_as)
        cluster = cls(binaries, directory, _free_port(), run_as or _login())
        data = directory / "data"
        cluster._run(
            "initdb",
            "-D",
            str(data),
            "-U",
            cluster.user,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        )
        options = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(cluster.port),
            "unix_socket_directories": f"'{directory}'",
            "fsync": "off",
            "full_page_writes": "off",
            "max_connections": "100",
            **(settings or {}),
        }
        with open(data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.writelines(f"{key} = {value}\n" for key, value in options.items())
        try:
            cluster._run(
                "pg_ctl",
                "-D",
                str(data),
                "-l",
                str(directory / "server.log"),
                "-w",
                "-t",
                "60",
                "start",
            )
        except subprocess.CalledProcessError:
            log = (directory / "server.log").read_text(errors="replace")[-2000:]
            shutil.rmtree(directory, ignore_errors=True)
            raise RuntimeError(f"PostgreSQL did not start:\n{log}") from None
        return cluster

    def _run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.binaries / tool), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=True, capture_output=True, text=True, timeout=120)

    def createdb(self, name: str) -> None:
        """Create a database in the cluster."""
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, name)

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of a database in the cluster (psycopg 3 driver)."""
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def dsn(self, database: str = "postgres") -> str:
        """The libpq connection string of a database in the cluster."""
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname={database}"

    def pg_ctl(self, command: str) -> None:
        """Run ``pg_ctl stop|start|restart`` on the cluster (to simulate an outage)."""
        data = str(self.directory / "data")
        arguments = ["-D", data, "-w", "-t", "60"]
        if command in ("start", "restart"):
            arguments += ["-l", str(self.directory / "server.log")]
        if command in ("stop", "restart"):
            arguments += ["-m", "fast"]
        self._run("pg_ctl", *arguments, command)

    def stop(self) -> None:
        """Stop the server and remove its files."""
        with contextlib.suppress(Exception):
            self.pg_ctl("stop")
        shutil.rmtree(self.directory, ignore_errors=True)


def _login() -> str:
    import getpass

    return getpass.getuser()
