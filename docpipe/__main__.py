"""`python -m docpipe` runs the command-line interface."""

from docpipe.cli import main

raise SystemExit(main())
