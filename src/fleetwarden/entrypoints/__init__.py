"""Entry points: the CLI (and later the service). They wire adapters into the app and core."""
