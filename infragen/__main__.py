"""`python -m infragen` runs the CLI."""

from infragen.cli import main

main()
