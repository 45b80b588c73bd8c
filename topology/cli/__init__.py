"""The ``warren`` command: one subcommand per process and ops tool."""
