"""``expediter tools list`` with 500 installed packs, cold and warm, beside ``python -c pass``."""

from __future__ import annotations

import compileall
import json
import sys
import tempfile
from pathlib import Path

from measure import (
    Figure,
    Report,
    bench_env,
    cli_code,
    console_script,
    parse_args,
    probe_modules,
    time_commands,
)

#: Every generated module and tool name starts with this, so the import probe can spot them.
PREFIX = "xbenchpack_"

_FUNCTION_PACK = '''"""Benchmark pack {index}: one @expediter.tool function."""

import expediter


@expediter.tool
def repeat(text: str, times: int = 1) -> str:
    """Repeat the text."""
    return text * times
'''

_TOOLBOX_PACK = '''"""Benchmark pack {index}: one Toolbox."""

import expediter


class Box(expediter.Toolbox):
    """Echo text back."""

    name = "{name}"

    @expediter.action
    def echo(self, text: str) -> str:
        """Return the text unchanged."""
        return text
'''


def write_site(site: Path, count: int) -> list[str]:
    """Write ``count`` installed packs (dist-info plus module) into ``site``; return tool names."""
    names = []
    for index in range(count):
        name = f"{PREFIX}{index:04d}"
        info = site / f"{name}-1.0.dist-info"
        info.mkdir(parents=True)
        metadata = f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: 1.0\n"
        (info / "METADATA").write_text(metadata, encoding="utf-8")
        if index % 2:
            source, target = _TOOLBOX_PACK.format(index=index, name=name), f"{name}:Box"
        else:
            source, target = _FUNCTION_PACK.format(index=index), name
        (info / "entry_points.txt").write_text(f"[expediter]\n{name} = {target}\n", "utf-8")
        (site / f"{name}.py").write_text(source, encoding="utf-8")
        names.append(name)
    # pip compiles at install time; without this the cold run would write __pycache__ into the
    # site directory, changing its mtime and with it the manifest cache key.
    compileall.compile_dir(site, quiet=1)
    return names


def _pack_modules(modules: set[str]) -> list[str]:
    return sorted(name for name in modules if name.startswith(PREFIX))


def _cache_state(home: Path) -> dict[str, int]:
    """Each manifest cache file with its modification time (a cold run rewrites it)."""
    return {path.name: path.stat().st_mtime_ns for path in home.glob("cache/manifest-*.json")}


def main() -> int:
    """Measure and report."""
    args = parse_args(__doc__)
    count, cold_rounds, warm_rounds = (20, 1, 3) if args.quick else (500, 3, 21)
    report = Report("tools_list", args.quick)
    report.settings.update(packs=count, cold_rounds=cold_rounds, warm_rounds=warm_rounds)
    expediter = str(console_script("expediter"))
    cold = [expediter, "--refresh", "tools", "list", "--json"]
    warm = [expediter, "tools", "list", "--json"]
    python = [sys.executable, "-c", "pass"]
    with tempfile.TemporaryDirectory() as temporary:
        site, home = Path(temporary, "site"), Path(temporary, "home")
        names = write_site(site, count)
        env = bench_env(PYTHONPATH=str(site), EXPEDITER_HOME=str(home))

        _, modules = probe_modules(cli_code(*cold[1:]), env)
        imported = _pack_modules(modules)
        report.check(
            "the cold run imports every pack (the probe works)",
            len(imported) == count,
            f"{len(imported)} of {count} pack modules imported",
        )
        runs = time_commands({"cold": cold}, env, rounds=cold_rounds)

        done, modules = probe_modules(cli_code(*warm[1:]), env)
        imported = _pack_modules(modules)
        report.check(
            "the warm run imports no pack",
            not imported,
            f"imported {len(imported)}: {', '.join(imported[:3])}" if imported else "none imported",
        )
        listed = {row["name"] for row in json.loads(done.stdout)}
        missing = sorted(set(names) - listed)
        report.check(
            f"--json lists all {count} tools",
            not missing,
            f"missing {len(missing)}, e.g. {missing[0]}" if missing else f"{len(listed)} listed",
        )
        before = _cache_state(home)
        runs.update(time_commands({"warm": warm, "python": python}, env, rounds=warm_rounds))
        report.check(
            "the timed warm runs reuse the cache",
            bool(before) and _cache_state(home) == before,
            f"{len(before)} manifest file(s), unchanged" if before else "no manifest written",
        )

    report.add(Figure("python", "python -c pass (same interpreter)", runs["python"]))
    report.add(Figure("warm", f"expediter tools list --json, {count} packs, cache", runs["warm"]))
    report.add(
        Figure("cold", f"expediter --refresh tools list --json, {count} packs", runs["cold"])
    )
    report.ratio(f"warm tools list, {count} packs", "warm", "python", 10.0)  # benchmarks/README.md
    report.ratio(f"cold tools list, {count} packs", "cold", "python")
    return report.finish(args.results_dir)


if __name__ == "__main__":
    sys.exit(main())
