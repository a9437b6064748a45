"""``expediter --help`` beside ``llm --help``, and the heavy libraries it must not import."""

from __future__ import annotations

import sys
import tempfile

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

#: Libraries the help screen (and ``import expediter``) must leave alone.
FORBIDDEN = ("sqlalchemy", "alembic", "httpx", "fastmcp")

PROBES = {
    "expediter --help": cli_code("--help"),
    "python -m expediter --help": (
        "import runpy, sys\nsys.argv = ['expediter', '--help']\n"
        "runpy.run_module('expediter', run_name='__main__', alter_sys=True)\n"
    ),
    "import expediter": "import expediter\n",
}


def main() -> int:
    """Measure and report."""
    args = parse_args(__doc__)
    rounds = 1 if args.quick else 11
    report = Report("help", args.quick)
    report.settings.update(rounds=rounds, forbidden=list(FORBIDDEN))
    llm = console_script("llm")
    commands = {
        "expediter_help": [str(console_script("expediter")), "--help"],
        "python": [sys.executable, "-c", "pass"],
    }
    skipped = None if llm.is_file() else f"{llm} is not installed (the bench extra installs llm)"
    if skipped is None:
        commands["llm_help"] = [str(llm), "--help"]
    elif not args.quick:
        report.check("llm is installed (bench extra)", False, skipped)

    with tempfile.TemporaryDirectory() as home:
        env = bench_env(EXPEDITER_HOME=home)
        for label, code in PROBES.items():
            _, modules = probe_modules(code, env)
            heavy = sorted({name.partition(".")[0] for name in modules} & set(FORBIDDEN))
            report.check(
                f"{label} imports none of {', '.join(FORBIDDEN)}",
                not heavy,
                f"imported {', '.join(heavy)}" if heavy else f"{len(modules)} modules, none heavy",
            )
        runs = time_commands(commands, env, rounds=rounds)

    report.add(Figure("python", "python -c pass (same interpreter)", runs["python"]))
    report.add(Figure("expediter_help", "expediter --help", runs["expediter_help"]))
    report.add(Figure("llm_help", "llm --help", runs.get("llm_help", ()), skipped))
    report.ratio("expediter --help", "expediter_help", "llm_help", 0.1)  # benchmarks/README.md
    report.ratio("expediter --help vs python -c pass", "expediter_help", "python")
    return report.finish(args.results_dir)


if __name__ == "__main__":
    sys.exit(main())
