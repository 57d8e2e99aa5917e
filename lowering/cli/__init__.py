"""`dprintf`, the command line: argument parsing, one module a subcommand, and how the process ends."""
