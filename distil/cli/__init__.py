"""The one `distil` command, one file per subcommand; nothing imports it."""
