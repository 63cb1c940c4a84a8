"""The apps behind ``hpd-agent``: the demo and the store subcommands (layer 5, private)."""
