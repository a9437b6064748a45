"""``python -m expediter`` runs the command line."""

from expediter.cli import main

main()
