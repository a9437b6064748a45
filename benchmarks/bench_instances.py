"""A turn's toolset for a user with 50 stored instances (10 with secrets) on a warm host, beside
the same toolset built from 50 in-memory ``ToolInstance``s."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from measure import Figure, Report, parse_args, time_statements

INSTANCES = 50
WITH_SECRETS = 10
TOOL = '''
import expediter


class Service(expediter.Toolbox):
    """A configurable service."""

    name = "svc"
    config_fields = (
        expediter.ConfigField("region", description="Where."),
        expediter.ConfigField("api_key", secret=True),
    )

    @expediter.action
    def lookup(self, query: str) -> dict:
        """Look something up.

        Args:
            query: What to look up.
        """
        return {"query": query}

    @expediter.action
    def status(self) -> str:
        """The service's status."""
        return "ok"
'''


def main() -> int:
    """Measure and report."""
    args = parse_args(__doc__)
    rounds, batch = (3, 0.01) if args.quick else (15, 0.1)
    from expediter.core.host import Host
    from expediter.core.instances.keys import generate_key
    from expediter.core.turns.toolset import ToolInstance

    os.environ["EXPEDITER_SECRET_KEYS"] = generate_key()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        tools = root / "tools"
        tools.mkdir()
        (tools / "svc.py").write_text(TOOL)
        options = {"tools_path": [tools], "autoload": False, "builtins": False}
        stored_host = Host(home=root / "stored", **options)
        memory_host = Host(home=root / "memory", **options)
        configs = []
        for number in range(INSTANCES):
            config = {"region": f"r{number}"}
            if number < WITH_SECRETS:
                config["api_key"] = f"key-{number:04d}-" + "x" * 24
            configs.append(config)
            stored_host.instances.add("svc", f"svc{number}", config, user_id="u")
        in_memory = [
            ToolInstance(tool="svc", instance_id=f"svc-{n}", name=f"svc{n}", config=config)
            for n, config in enumerate(configs)
        ]
        stored = stored_host.toolset(user_id="u")
        plain = memory_host.toolset(user_id="u", instances=in_memory)
        report = Report("instances", args.quick)
        report.settings.update(rounds=rounds, instances=INSTANCES, with_secrets=WITH_SECRETS)
        report.check(
            "both toolsets offer the same functions",
            sorted(stored.name_map.names) == sorted(plain.name_map.names)
            and len(stored) >= 2 * INSTANCES,
            f"{len(stored)} and {len(plain)} functions",
        )
        namespace = {
            "stored_host": stored_host,
            "memory_host": memory_host,
            "in_memory": in_memory,
        }
        runs = time_statements(
            {
                "stored": ("stored_host.toolset(user_id='u')", namespace),
                "in_memory": ("memory_host.toolset(user_id='u', instances=in_memory)", namespace),
            },
            rounds=rounds,
            batch_seconds=batch,
        )
        report.add(
            Figure(
                "stored",
                f"host.toolset for a user with {INSTANCES} stored instances "
                f"({WITH_SECRETS} with secrets), warm, SQLite",
                runs["stored"],
            )
        )
        report.add(
            Figure(
                "in_memory",
                f"the same toolset from {INSTANCES} in-memory ToolInstances",
                runs["in_memory"],
            )
        )
        report.ratio("a turn's toolset from stored instances", "stored", "in_memory", 2.0)
        stored_host.close()
        memory_host.close()
    return report.finish(args.results_dir)


if __name__ == "__main__":
    sys.exit(main())
